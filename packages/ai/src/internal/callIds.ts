/**
 * Tool-call ids name one call per session: what the loop does with a turn that repeats one, a
 * later turn that reuses one, and the requests of a turn that failed before it was saved.
 */
import { Checkpoint, type PauseSignal, type ToolCall, ToolGate, ToolGateError } from "@tool-gate/core"
import { Effect } from "effect"
import * as GatedToolkit from "../GatedToolkit.js"

const agentName = "@tool-gate/ai/AgentLoop"

/** The ids the turn's calls share with an earlier call of the same turn, each once. */
export const repeatedIds = (calls: ReadonlyArray<GatedToolkit.ModelCall>): Array<string> => {
  const seen = new Set<string>()
  const repeated = new Set<string>()
  for (const call of calls) (seen.has(call.id) ? repeated : seen).add(call.id)
  return [...repeated]
}

/**
 * The gate's refusal of a call whose id this session already used: for another call
 * (`InvalidToolCall` on the id), or for this very call, which already ran (`CallAlreadyExecuted`).
 */
export const reusedId = (call: GatedToolkit.ModelCall) => (error: unknown): boolean =>
  error instanceof ToolGateError.CallAlreadyExecuted || ToolGateError.isReusedCallId(error, call.id)

// A new model turn that reuses a call id of the session: the call does not run, and the model
// reads why (as it reads a denial) instead of the conversation failing on every resume for good.
export const reusedIdOutcome = (call: GatedToolkit.ModelCall, session: ToolCall.CallContext): GatedToolkit.Settled =>
  GatedToolkit.refused(
    call,
    session,
    `tool-call id ${call.id} was already used in this session (by an earlier call); call ids must be unique per session`
  )

/** Whether a checkpoint (another conversation's, or a retried turn's) already waits for the request. */
export const held = (signal: PauseSignal.PauseSignal) =>
  Effect.flatMap(Checkpoint.Checkpoints, (checkpoints) =>
    checkpoints.find(signal.requestId).pipe(
      Effect.as(true),
      Effect.catchTag("CheckpointNotFound", () => Effect.succeed(false))
    ))

/**
 * A request this turn asked for whose turn then failed before saving its checkpoint: nothing
 * would ever resume it, so it is denied (audited) rather than left for a human to approve in
 * vain. One a checkpoint holds (found again by a retried or another conversation) is left alone.
 */
export const releaseOrphan = (signal: PauseSignal.PauseSignal) =>
  Effect.gen(function*() {
    if (yield* held(signal)) return
    const gate = yield* ToolGate.ToolGate
    yield* gate.respond(signal.requestId, {
      decision: "deny",
      reason: "the agent's turn failed before it was saved: nothing would resume this call",
      respondedBy: agentName
    })
  }).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning("AgentLoop: could not deny a request of a failed turn").pipe(
        Effect.annotateLogs({ requestId: signal.requestId, error: error.message })
      )
    )
  )
