/**
 * One `tools/call` through the gate. The arguments are checked against the gate's limits and the
 * tool's input schema before anything else; the gate judges the checked value under a stable
 * call id (`callIds.ts`); what is forwarded is the value that was judged (or the approver's edit,
 * which is checked against the schema again). While a person must answer, the call waits up to
 * the TTL, sending progress notifications so the client does not time out, and may ask the
 * client's own user through elicitation (`elicitation.ts`).
 */
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import type { CallToolRequest, CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js"
import { type ApprovalRequest, PauseSignal, ToolCall, type ToolGate, type ToolGateError } from "@tool-gate/core"
import { Duration, Effect, Either, Schedule } from "effect"
import * as CallIds from "./callIds.js"
import type { Downstream, KnownTool } from "./downstream.js"
import * as Elicitation from "./elicitation.js"
import * as Results from "./results.js"

/** Who answers a call that needs approval. */
export type Ask = "operators" | "client" | "both"

/** What the calls of every session share. */
export interface Gateway {
  readonly gate: ToolGate.Service
  readonly downstream: Downstream
  /** the name the policy judges for a downstream tool */
  readonly judgedName: (tool: string) => string
  readonly ask: Ask
  readonly progressInterval: Duration.Duration
  /** how long a forwarded call may run without progress */
  readonly callTimeout: Duration.Duration
}

/** One MCP session: one tool-gate session. */
export interface Session {
  readonly sessionKey: string
  /** the client's name@version, once it said */
  readonly agentId: () => string | undefined
  readonly occurrences: CallIds.Occurrences
  /** whether the client said it can ask its user (elicitation) */
  readonly canElicit: () => boolean
}

/** What the SDK hands a request handler that this module uses. */
export interface Extra {
  readonly signal: AbortSignal
  readonly _meta?: { readonly progressToken?: string | number | undefined } | undefined
  readonly sendNotification: (notification: {
    readonly method: "notifications/progress"
    readonly params: Progress & { readonly progressToken: string | number }
  }) => Promise<void>
  readonly elicit: Elicitation.Elicit
}

/** Progress notifications of one call, numbered up (MCP wants each above the last). */
const progressOf = (extra: Extra) => {
  const token = extra._meta?.progressToken
  let count = 0
  return (message: string | undefined): Effect.Effect<void> =>
    token === undefined
      ? Effect.void
      : Effect.promise(() =>
        extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken: token, progress: ++count, ...(message === undefined ? {} : { message }) }
        }).catch(() => undefined)
      )
}

const waitingText = (pause: PauseSignal.PauseSignal) =>
  `waiting for a person to approve this call (tool-gate request ${pause.requestId}, until ${
    new Date(pause.expiresAt).toISOString()
  }; timeout means deny)`

/** Runs the allowed call on the downstream server, forwarding its progress. */
const forward = (
  gateway: Gateway,
  known: KnownTool,
  allowed: ToolGate.Allowed,
  progress: (message: string | undefined) => Effect.Effect<void>
): Effect.Effect<CallToolResult, McpError> => {
  const args = allowed.call.args
  // an approver's edit was never checked against the tool's schema
  if (allowed.request?.resolution?.editedArgs !== undefined && known.validator._tag === "Compiled") {
    const check = known.validator.check(args)
    if (check._tag === "Invalid") return Effect.succeed(Results.invalidArguments(check.problems))
  }
  return Effect.tryPromise({
    try: (signal) =>
      gateway.downstream.client.callTool({ name: known.tool.name, arguments: args }, undefined, {
        // the client cancelling the call interrupts this effect, which aborts `signal`
        signal,
        timeout: Duration.toMillis(gateway.callTimeout),
        resetTimeoutOnProgress: true,
        onprogress: (update) => Effect.runFork(progress(update.message))
      }) as Promise<CallToolResult>,
    catch: (error) => error
  }).pipe(
    Effect.catchAll((error) =>
      // a protocol error of the downstream server is its answer, passed on as it is
      error instanceof McpError && error.code !== ErrorCode.RequestTimeout
        ? Effect.fail(error)
        : Effect.succeed(Results.downstreamFailed(error instanceof Error ? error.message : String(error)))
    )
  )
}

/** Waits for the answer to a paused call, keeping the client informed, then asks the gate again. */
const awaitAnswer = (
  gateway: Gateway,
  session: Session,
  call: ToolCall.ToolCallInput,
  pause: PauseSignal.PauseSignal,
  extra: Extra,
  progress: (message: string | undefined) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    yield* progress(waitingText(pause)).pipe(
      Effect.repeat(Schedule.spaced(gateway.progressInterval)),
      Effect.forkScoped
    )
    if (gateway.ask !== "operators" && session.canElicit()) {
      yield* Elicitation.ask(extra.elicit, {
        gate: gateway.gate,
        pause,
        call,
        agentId: session.agentId(),
        // only the client answers: its user's refusal is the answer
        declineDenies: gateway.ask === "client"
      }).pipe(Effect.forkScoped)
    }
    yield* gateway.gate.awaitDecision(pause.requestId as ApprovalRequest.RequestId)
  }).pipe(Effect.scoped, Effect.zipRight(gateway.gate.authorize(call)))

/** Handles one `tools/call` of `session`. */
export const handle = (
  gateway: Gateway,
  session: Session,
  params: CallToolRequest["params"],
  extra: Extra
): Effect.Effect<CallToolResult, McpError> => {
  const known = gateway.downstream.tools().get(params.name)
  if (known === undefined) return Effect.succeed(Results.unknownTool(params.name))
  if (known.validator._tag === "Unusable") return Effect.succeed(Results.unusableSchema(known.validator.reason))
  const bounded = ToolCall.decodeArgs(params.arguments ?? {})
  if (Either.isLeft(bounded)) {
    return Effect.succeed(Results.invalidArguments(bounded.left.map((problem) => `${problem.path} ${problem.message}`)))
  }
  const args = bounded.right
  const check = known.validator.check(args)
  if (check._tag === "Invalid") return Effect.succeed(Results.invalidArguments(check.problems))

  const name = gateway.judgedName(known.tool.name)
  const key = CallIds.digest(name, args, gateway.gate.policy.version)
  const progress = progressOf(extra)
  const agentId = session.agentId()

  const attempt = (n: number): Effect.Effect<CallToolResult, McpError> => {
    const call: ToolCall.ToolCallInput = {
      id: CallIds.idOf(key, n),
      name,
      args,
      sessionKey: session.sessionKey,
      ...(agentId === undefined ? {} : { agentId })
    }
    const done = Effect.sync(() => CallIds.finished(session.occurrences, key, n))
    return gateway.gate.authorize(call).pipe(
      Effect.flatMap((outcome) =>
        PauseSignal.isPauseSignal(outcome)
          ? awaitAnswer(gateway, session, call, outcome, extra, progress)
          : Effect.succeed(outcome)
      ),
      Effect.flatMap((outcome) =>
        PauseSignal.isPauseSignal(outcome)
          // answered, yet the record still pauses: nothing runs, and the client may retry
          ? Effect.succeed(Results.refused(`approval request ${outcome.requestId} is still pending`))
          : Effect.zipRight(done, forward(gateway, known, outcome, progress))
      ),
      Effect.catchTags({
        ToolDenied: (error: ToolGateError.ToolDenied) => Effect.as(done, Results.denied(error)),
        // that occurrence ran already (an identical call finished first): this is the next one
        CallAlreadyExecuted: () => attempt(n + 1),
        InvalidToolCall: (error: ToolGateError.InvalidToolCall) => Effect.succeed(Results.refused(error.message)),
        RequestNotFound: (error: ToolGateError.RequestNotFound) => Effect.succeed(Results.refused(error.message)),
        PersistenceError: (error: ToolGateError.PersistenceError) => Effect.succeed(Results.storeUnavailable(error))
      })
    )
  }
  return attempt(CallIds.current(session.occurrences, key))
}
