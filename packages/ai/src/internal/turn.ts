/**
 * One model turn's tool calls: each through the gate, then the turn's checkpoint when any waits
 * for a human; and the tool message the model reads the results in.
 */
import { Prompt, type Tool, type Toolkit } from "@effect/ai"
import type { Checkpoint, PauseSignal, ToolCall, ToolGateError } from "@tool-gate/core"
import { Effect, Either, Predicate } from "effect"
import * as GatedToolkit from "../GatedToolkit.js"
import * as CallIds from "./callIds.js"

/** The turn's results as the tool message that follows the model's turn. */
export const toolMessage = (results: ReadonlyArray<GatedToolkit.ToolResult>): Prompt.Prompt =>
  Prompt.fromMessages([
    Prompt.makeMessage("tool", {
      content: results.map((result) => Prompt.makePart("tool-result", { ...result, providerExecuted: false }))
    })
  ])

// A retried resume after a crash: the approval was spent by the attempt that died, which may or
// may not have run the tool; the model is told so rather than the call running twice.
export const lostResult = (call: GatedToolkit.ModelCall): GatedToolkit.ToolResult => ({
  id: call.id,
  name: call.name,
  isFailure: true,
  result: {
    interrupted: true,
    message:
      `The approved call ${call.id} (${call.name}) was started by an earlier attempt that stopped before finishing; its result is unknown.`
  }
})

type SaveError = ToolGateError.RequestNotFound | ToolGateError.CheckpointInvalid | ToolGateError.PersistenceError

/** Saves a paused turn: the results obtained and the calls that wait. */
export type SaveTurn = (
  results: Array<GatedToolkit.ToolResult>,
  pending: Array<PauseSignal.PauseSignal>
) => Effect.Effect<Checkpoint.Token, SaveError>

/** Tells the loop's `onStep` how a call was handled. */
export type Report = (call: GatedToolkit.ModelCall, outcome: GatedToolkit.Outcome) => Effect.Effect<void>

/** The turn's results, and its saved checkpoint with the requests it waits for, if any. */
export interface Settled {
  readonly results: Array<GatedToolkit.ToolResult>
  readonly waiting:
    | { readonly token: Checkpoint.Token; readonly requests: Array<PauseSignal.PauseSignal> }
    | undefined
}

/**
 * The turn's results, and its checkpoint when calls wait for a human. A call whose id replayed
 * a request another conversation's checkpoint waits for (the save refuses to mix them) is
 * refused like any reused id, and the turn is saved, or goes on, without it.
 */
const pauseOrGoOn = (
  session: ToolCall.CallContext,
  calls: ReadonlyArray<GatedToolkit.ModelCall>,
  outcomes: ReadonlyArray<GatedToolkit.Outcome>,
  save: SaveTurn,
  report: Report
): Effect.Effect<Settled, SaveError, Checkpoint.Checkpoints> =>
  Effect.gen(function*() {
    const results = outcomes.flatMap((outcome) => outcome._tag === "Pending" ? [] : [outcome.result])
    const pending = outcomes.flatMap((outcome) => outcome._tag === "Pending" ? [outcome.signal] : [])
    if (pending.length === 0) return { results, waiting: undefined }
    const saved = yield* Effect.either(save(results, pending))
    if (Either.isRight(saved)) return { results, waiting: { token: saved.right, requests: pending } }
    if (saved.left._tag !== "CheckpointInvalid") return yield* saved.left
    const taken = new Set(
      (yield* Effect.filter(pending, CallIds.held)).map((signal) => signal.requestId)
    )
    if (taken.size === 0) return yield* saved.left
    const refused = outcomes.map((outcome, i) =>
      outcome._tag === "Pending" && taken.has(outcome.signal.requestId)
        ? CallIds.reusedIdOutcome(calls[i]!, session)
        : outcome
    )
    yield* Effect.forEach(
      refused,
      (outcome, i) => outcome === outcomes[i] ? Effect.void : report(calls[i]!, outcome),
      { discard: true }
    )
    return yield* pauseOrGoOn(session, calls, refused, save, report)
  })

/**
 * One model turn's calls, each through the gate (after `fence`), then the checkpoint if any
 * waits for a human. If the turn fails in between, the requests it asked for are released.
 */
export const settle = <Tools extends Record<string, Tool.Any>, FE>(options: {
  readonly toolkit: Toolkit.WithHandler<Tools>
  readonly session: ToolCall.CallContext
  readonly calls: ReadonlyArray<GatedToolkit.ModelCall>
  readonly fence: Effect.Effect<void, FE>
  readonly save: SaveTurn
  readonly report: Report
}) => {
  const { calls, fence, report, save, session, toolkit } = options
  const asked: Array<PauseSignal.PauseSignal> = []
  return Effect.gen(function*() {
    const outcomes = yield* Effect.forEach(calls, (call) =>
      Effect.zipRight(
        fence,
        GatedToolkit.authorize(toolkit, call, session).pipe(
          Effect.catchIf(CallIds.reusedId(call), () => Effect.succeed(CallIds.reusedIdOutcome(call, session))),
          Effect.tap((outcome) =>
            outcome._tag === "Pending" ? Effect.sync(() => asked.push(outcome.signal)) : Effect.void
          ),
          Effect.tap((outcome) => report(call, outcome))
        )
      ))
    return yield* pauseOrGoOn(session, calls, outcomes, save, report)
  }).pipe(Effect.onError(() => Effect.forEach(asked, CallIds.releaseOrphan, { discard: true })))
}

/** The attributes whose value is defined. */
const defined = (attributes: Record<string, string | number | undefined>) =>
  Object.fromEntries(Object.entries(attributes).filter(([, value]) => value !== undefined))

/** How a turn ended: the loop's result, or results fed back to the model for another turn. */
const turnOutcome = (result: unknown) =>
  Predicate.isTagged(result, "Completed") ? "completed" : Predicate.isTagged(result, "Paused") ? "paused" : "continued"

/**
 * A model turn in its span, `toolgate.agent.turn`: the session and agent, the turn's number, the
 * number of tool calls (set by the turn) and how it ended (`completed`, `paused`, `continued`). The
 * model's and the gate's spans of the turn are its children.
 */
export const withTurnSpan =
  (session: ToolCall.CallContext, turn: number) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tap(self, (result) => Effect.annotateCurrentSpan("toolgate.outcome", turnOutcome(result))).pipe(
      Effect.withSpan("toolgate.agent.turn", {
        attributes: defined({
          "toolgate.session": session.sessionKey,
          "toolgate.agent": session.agentId,
          "toolgate.turn": turn
        })
      })
    )

/**
 * `AgentLoop.resume` in its span, `toolgate.agent.resume`: the checkpoint, and how the resumed
 * conversation ended (its calls run under it, then its next turns).
 */
export const withResumeSpan =
  (token: Checkpoint.Token) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tap(self, (result) => Effect.annotateCurrentSpan("toolgate.outcome", turnOutcome(result))).pipe(
      Effect.withSpan("toolgate.agent.resume", { attributes: { "toolgate.checkpoint": token } })
    )
