/**
 * What a caller saw, reduced to words a test can count: ran / denied / refused (id reused) / paused.
 */
import { type AuditEvent, type Decision, PauseSignal, ToolCall, type ToolGate } from "@tool-gate/core"
import { Effect, Either } from "effect"

/** A failure that is `InvalidToolCall` naming the `id`: the call id was reused for another call. */
export const isIdReuse = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "InvalidToolCall" &&
  ((error as { problems?: ReadonlyArray<{ path: string }> }).problems ?? []).some((p) => p.path === "id")

export const tagOf = (error: unknown): string =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string"
    ? (error as { _tag: string })._tag
    : String(error)

/** One tool run: the call the agent asked for and the call the gate handed to the tool. */
export interface Run {
  readonly asked: ToolCall.ToolCallInput
  readonly got: ToolCall.ToolCall
  readonly requestId: string | undefined
  /** the policy or session-approval decision, when no human was involved */
  readonly decision: Decision.Allow | undefined
}

export type Outcome =
  | { readonly _tag: "ran" }
  | { readonly _tag: "denied"; readonly outcome: string; readonly requestId: string | undefined }
  | { readonly _tag: "refused" }
  | { readonly _tag: "paused"; readonly requestId: string }
  | { readonly _tag: "error"; readonly error: string }

/** What a caller of `authorize` / `gate` saw. Defects are not classified: they fail the test. */
export const classify = (result: Either.Either<unknown, unknown>): Outcome => {
  if (Either.isRight(result)) {
    return PauseSignal.isPauseSignal(result.right)
      ? { _tag: "paused", requestId: result.right.requestId }
      : { _tag: "ran" }
  }
  const error = result.left
  if (isIdReuse(error)) return { _tag: "refused" }
  if (tagOf(error) === "ToolDenied") {
    const denied = error as { outcome: string; requestId?: string }
    return { _tag: "denied", outcome: denied.outcome, requestId: denied.requestId }
  }
  return { _tag: "error", error: tagOf(error) }
}

/** The run of one call: records what the tool was handed. */
export const toolRun = (asked: ToolCall.ToolCallInput, allowed: ToolGate.Allowed): Run => ({
  asked,
  got: allowed.call,
  requestId: allowed.request?.requestId,
  decision: allowed.decision
})

/** A recorder of tool runs, and `gate` / `authorize` wrappers that log every run into it. */
export const recorder = () => {
  const runs: Array<Run> = []
  const run = (asked: ToolCall.ToolCallInput) => (allowed: ToolGate.Allowed) =>
    Effect.sync(() => {
      runs.push(toolRun(asked, allowed))
    })
  /** `gate.gate` with a recorded run; never fails. */
  const gate = (gate: ToolGate.Service, call: ToolCall.ToolCallInput) =>
    Effect.map(Effect.either(gate.gate(call, run(call))), classify)
  /** `gate.authorize`, running the tool when it says `Allowed` (as an agent does); never fails. */
  const authorize = (gate: ToolGate.Service, call: ToolCall.ToolCallInput) =>
    Effect.either(gate.authorize(call)).pipe(
      Effect.tap((result) =>
        Either.isRight(result) && !PauseSignal.isPauseSignal(result.right) ? run(call)(result.right) : Effect.void
      ),
      Effect.map(classify)
    )
  return { runs, gate, authorize }
}

/** Canonical JSON of a call's arguments, as audit events carry them. */
export const argsOf = (call: { readonly args?: ToolCall.ToolArgs | undefined }): string =>
  ToolCall.canonicalArgs(call.args ?? {})

/** The events of one tool call id in one session. */
export const eventsOf = (events: ReadonlyArray<AuditEvent.AuditEvent>, sessionKey: string, toolCallId: string) =>
  events.filter((e) => e.sessionKey === sessionKey && e.toolCallId === toolCallId)

/** The `seq`s are exactly 1..n. */
export const holesIn = (events: ReadonlyArray<AuditEvent.AuditEvent>): Array<number> => {
  const seen = new Set(events.map((e) => e.seq))
  const max = events.reduce((m, e) => Math.max(m, e.seq), 0)
  const holes: Array<number> = []
  for (let seq = 1; seq <= max; seq++) if (!seen.has(seq)) holes.push(seq)
  return holes
}
