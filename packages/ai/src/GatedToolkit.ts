/**
 * The tool calls an `@effect/ai` model makes, run through the gate one by one, keyed by the
 * model's tool-call ids.
 *
 * `@effect/ai`'s own resolution (`generateText` with a toolkit) hands a handler only the
 * parameters, never the call's id, and a handler cannot stop the turn. So the model is asked with
 * `disableToolCallResolution: true` and each of `response.toolCalls` is handled here. The gate
 * judges the parameters as the tool's schema decodes them (encoded back), and an allowed call
 * runs its toolkit handler with exactly those; a denied one becomes a failed tool result the model
 * reads (with the human's or the policy's reason); one that needs a human comes back `Pending`
 * with its `PauseSignal`. `AgentLoop` builds on this; use it directly to write your own loop.
 *
 * @example
 * import { LanguageModel, Tool, Toolkit } from "@effect/ai"
 * import { GatedToolkit } from "@tool-gate/ai"
 * import { Effect, Schema } from "effect"
 *
 * const Deploy = Tool.make("deploy", { parameters: { env: Schema.String }, success: Schema.String })
 * const Tools = Toolkit.make(Deploy)
 * const ToolsLive = Tools.toLayer({ deploy: ({ env }) => Effect.succeed(`deployed to ${env}`) })
 *
 * const turn = Effect.gen(function*() {
 *   const toolkit = yield* Tools
 *   const response = yield* LanguageModel.generateText({ prompt: "ship it", toolkit, disableToolCallResolution: true })
 *   return yield* Effect.forEach(response.toolCalls, (call) =>
 *     GatedToolkit.authorize(toolkit, { id: call.id, name: call.name, params: call.params }, { sessionKey: "s-1" }))
 * }).pipe(Effect.provide(ToolsLive))
 *
 * @since 0.1.0
 */
import { AiError, type Tool, type Toolkit } from "@effect/ai"
import type { ToolCall } from "@tool-gate/core"
import { GatedTool, PauseSignal, ToolGate, ToolGateError } from "@tool-gate/core"
import { Data, Effect, ParseResult, Schema } from "effect"

/**
 * A tool call as the model made it: the model's id, the tool's name, the parameters as JSON.
 *
 * @since 0.1.0
 * @category models
 */
export const ModelCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  params: Schema.Unknown
})
/**
 * @since 0.1.0
 * @category models
 */
export interface ModelCall extends Schema.Schema.Type<typeof ModelCall> {}

/**
 * What the model reads back for one call: the handler's encoded result, or a `Denial`.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolResult = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  isFailure: Schema.Boolean,
  result: Schema.Unknown
})
/**
 * @since 0.1.0
 * @category models
 */
export interface ToolResult extends Schema.Schema.Type<typeof ToolResult> {}

/**
 * The result a denied call gives the model: who said no (`policy`, a human: `denied`, nobody in
 * time: `expired`, or the gate, because the call cannot be judged as made: `refused`, say a
 * tool-call id the session already used) and why, so it can change course instead of retrying
 * blindly.
 *
 * @since 0.1.0
 * @category models
 */
export const Denial = Schema.Struct({
  denied: Schema.Literal(true),
  outcome: Schema.Literal("policy", "denied", "expired", "refused"),
  reason: Schema.String,
  message: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type Denial = typeof Denial.Type

/**
 * What became of one call: it ran, it was denied (the result says why), or it waits for a human.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = Data.TaggedEnum<{
  Ran: { readonly result: ToolResult }
  Denied: { readonly result: ToolResult; readonly denied: ToolGateError.ToolDenied }
  Pending: { readonly signal: PauseSignal.PauseSignal }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Outcome = Data.taggedEnum<Outcome>()

/**
 * An outcome that needs nobody any more.
 *
 * @since 0.1.0
 * @category models
 */
export type Settled = Exclude<Outcome, { readonly _tag: "Pending" }>

/**
 * @since 0.1.0
 * @category models
 */
export type Error<Tools extends Record<string, Tool.Any>> =
  | AiError.AiError
  | Tool.Failure<Tools[keyof Tools]>
  | ToolGateError.CallAlreadyExecuted
  | ToolGate.CallError

const denial = (
  call: ModelCall,
  denied: ToolGateError.ToolDenied,
  shown: Pick<Denial, "outcome" | "message"> = denied
) =>
  Outcome.Denied({
    denied,
    result: {
      id: call.id,
      name: call.name,
      isFailure: true,
      result: { denied: true, outcome: shown.outcome, reason: denied.reason, message: shown.message } satisfies Denial
    }
  })

/**
 * A call refused before it could be judged as made (`outcome: "refused"`), say because its
 * tool-call id was already used in the session: it does not run, and the model reads `reason`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const refused = (call: ModelCall, session: ToolCall.CallContext, reason: string): Settled =>
  denial(
    call,
    new ToolGateError.ToolDenied({
      toolCallId: call.id,
      toolName: call.name,
      sessionKey: session.sessionKey,
      outcome: "policy",
      reason
    }),
    {
      outcome: "refused",
      message: `Tool call ${call.id} (${call.name}) did not run: ${reason}. Call the tool again with a new id.`
    }
  )

const parametersOf = <Tools extends Record<string, Tool.Any>>(toolkit: Toolkit.WithHandler<Tools>, name: string) =>
  toolkit.tools[name]?.parametersSchema as unknown as Schema.Schema<unknown, ToolCall.ToolArgs> | undefined

/**
 * The call as the gate judges it: the parameters decoded by the tool's schema and encoded back,
 * so a deny rule sees `"rm -rf /"` where the model sent `" rm -rf /"` to a `Schema.Trim` parameter.
 */
const judged = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.WithHandler<Tools>,
  call: ModelCall,
  session: ToolCall.CallContext
): Effect.Effect<ToolCall.ToolCallInput, AiError.AiError | ToolGateError.InvalidToolCall> => {
  const parameters = parametersOf(toolkit, call.name)
  if (parameters === undefined) {
    return Effect.fail(
      new AiError.MalformedOutput({
        module: "GatedToolkit",
        method: "authorize",
        description: `Failed to find tool with name '${call.name}' in toolkit - available tools: ${
          Object.keys(toolkit.tools).join(",")
        }`
      })
    )
  }
  return Effect.map(
    GatedTool.judge(parameters)(call.params),
    (asked) => ({ ...session, id: call.id, name: call.name, args: asked.args })
  )
}

/**
 * Runs an allowed call's handler with exactly the arguments the gate judged (the approver's edit,
 * if any): the toolkit decodes them, and they must be the encoding of what it decodes.
 */
const handler = <Tools extends Record<string, Tool.Any>>(toolkit: Toolkit.WithHandler<Tools>, call: ModelCall) =>
(
  allowed: ToolGate.Allowed
): Effect.Effect<Settled, Error<Tools> | ToolGateError.ToolDenied, Tool.Requirements<Tools[keyof Tools]>> =>
  GatedTool.paramsToRun(parametersOf(toolkit, call.name)!)(allowed).pipe(
    // The gate checks an edit against the policy, not against the tool's parameters: an edit that
    // does not fit is refused here, as a denial the model reads, rather than failing the loop.
    Effect.catchIf(ParseResult.isParseError, (error) =>
      Effect.fail(
        new ToolGateError.ToolDenied({
          toolCallId: call.id,
          toolName: call.name,
          sessionKey: allowed.call.sessionKey,
          outcome: "denied",
          reason: `the approver's edited arguments do not fit the tool: ${
            ToolGateError.problemsOf(error).map((p) => `${p.path}: ${p.message}`).join("; ")
          }`,
          ...(allowed.request !== undefined ? { requestId: allowed.request.requestId } : {})
        })
      )),
    Effect.zipRight(toolkit.handle(call.name, allowed.call.args as Tool.Parameters<Tools[keyof Tools]>)),
    Effect.map((handled): Settled =>
      Outcome.Ran({
        result: { id: call.id, name: call.name, isFailure: handled.isFailure, result: handled.encodedResult }
      })
    )
  )

/**
 * Asks the gate about the call, without waiting: runs it when allowed (or approved earlier under
 * the same id, with the approver's edit), returns the denial result when denied, and `Pending`
 * with the `PauseSignal` when a human must answer first.
 *
 * @since 0.1.0
 * @category handlers
 */
export const authorize = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.WithHandler<Tools>,
  call: ModelCall,
  session: ToolCall.CallContext
): Effect.Effect<Outcome, Error<Tools>, ToolGate.ToolGate | Tool.Requirements<Tools[keyof Tools]>> =>
  Effect.flatMap(ToolGate.ToolGate, (service) => Effect.flatMap(judged(toolkit, call, session), service.authorize))
    .pipe(
      Effect.flatMap((result) =>
        PauseSignal.isPauseSignal(result)
          ? Effect.succeed<Outcome>(Outcome.Pending({ signal: result }))
          : handler(toolkit, call)(result)
      ),
      Effect.catchTag("ToolDenied", (denied) => Effect.succeed(denial(call, denied)))
    )

/**
 * Runs the call through `ToolGate.gate`: when it needs a human, waits (up to the TTL) for the
 * answer from any process, then runs it or returns the denial result (timeout means deny). Used
 * to finish calls whose requests are answered: an approved call runs once.
 *
 * @since 0.1.0
 * @category handlers
 */
export const gate = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.WithHandler<Tools>,
  call: ModelCall,
  session: ToolCall.CallContext
): Effect.Effect<
  Settled,
  Error<Tools>,
  ToolGate.ToolGate | Tool.Requirements<Tools[keyof Tools]>
> =>
  Effect.flatMap(
    ToolGate.ToolGate,
    (service) => Effect.flatMap(judged(toolkit, call, session), (input) => service.gate(input, handler(toolkit, call)))
  ).pipe(
    Effect.catchTag("ToolDenied", (denied) => Effect.succeed(denial(call, denied)))
  )
