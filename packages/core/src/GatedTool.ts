/**
 * Any `Effect` tool function behind the gate, for pipelines that call their tools themselves
 * (no `@effect/ai` needed). The gated function takes the tool's arguments and the call's context
 * (its id, session, agent, intent): an allowed call runs; a call that needs a human returns the
 * `PauseSignal` instead of running; a denied one fails with `ToolDenied`.
 *
 * After the human answers, call it again with the same call id: an approved call runs once, with
 * the approver's edited arguments if they edited them (a third try fails with
 * `CallAlreadyExecuted`); a denied or expired one fails with `ToolDenied`.
 *
 * @example
 * import { GatedTool, PauseSignal } from "@tool-gate/core"
 * import { Effect, Schema } from "effect"
 *
 * const deploy = GatedTool.make(
 *   "deploy",
 *   Schema.Struct({ env: Schema.String }),
 *   ({ env }) => Effect.succeed(`deployed to ${env}`)
 * )
 *
 * const step = deploy({ env: "production" }, { id: "call-1", sessionKey: "s-1", agentId: "release-bot" }).pipe(
 *   Effect.map((result) => PauseSignal.isPauseSignal(result) ? `waiting for ${result.requestId}` : result)
 * )
 *
 * @since 0.1.0
 */
import { Effect, ParseResult, Schema } from "effect"
import * as PauseSignal from "./PauseSignal.js"
import * as ToolCall from "./ToolCall.js"
import { type Allowed, type CallError, ToolGate } from "./ToolGate.js"
import { type CallAlreadyExecuted, InvalidToolCall, problemsOf, ToolDenied } from "./ToolGateError.js"

/**
 * A gated tool function: the call's arguments, and its context with `id`, the caller's id for
 * this call (an LLM's tool-call id); asking again with it returns the recorded answer.
 *
 * @since 0.1.0
 * @category models
 */
export interface GatedTool<in I, out A, out E, out R> {
  (args: I, context: ToolCall.CallContext & { readonly id: string }): Effect.Effect<
    A | PauseSignal.PauseSignal,
    E | ToolDenied | CallAlreadyExecuted | CallError,
    R | ToolGate
  >
}

/**
 * Arguments as a tool with a parameter schema sees them: `params` decoded by the schema, and
 * `args` their encoding, the canonical form the gate judges. A schema that normalizes
 * (`Schema.Trim`, `Schema.Lowercase`) makes `" rm -rf /"` into `"rm -rf /"`: the gate must judge
 * the latter, since that is what runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface Judged<P, I> {
  readonly params: P
  readonly args: I
}

const canonicalize = <P, I>(parameters: Schema.Schema<P, I>) => {
  const decode = Schema.decodeUnknown(parameters, { errors: "all" })
  const encode = Schema.encode(parameters, { errors: "all" })
  return (args: unknown): Effect.Effect<Judged<P, I>, ParseResult.ParseError> =>
    Effect.flatMap(decode(args), (params) => Effect.map(encode(params), (encoded) => ({ params, args: encoded })))
}

const invalid = (error: ParseResult.ParseError) =>
  new InvalidToolCall({
    problems: problemsOf(error).map((problem) => ({
      path: problem.path === "" ? "args" : `args.${problem.path}`,
      message: problem.message
    }))
  })

/**
 * Decodes a call's arguments with the tool's parameter schema and encodes them back: what the gate
 * judges. Arguments that do not fit fail with `InvalidToolCall`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const judge = <P, I>(parameters: Schema.Schema<P, I>) => {
  const canonical = canonicalize(parameters)
  return (args: unknown): Effect.Effect<Judged<P, I>, InvalidToolCall> => Effect.mapError(canonical(args), invalid)
}

const canonicalOf = (args: unknown) => ToolCall.canonicalArgs(args as ToolCall.ToolArgs)

/**
 * The parameters an allowed call runs with: the arguments the gate judged (`allowed.call.args`,
 * the approver's edit if there was one) decoded, provided their encoding is exactly those
 * arguments. Arguments that do not decode fail with the `ParseError`; arguments the schema would
 * turn into another value (an edit `{ env: "PRODUCTION" }` of a `Schema.Lowercase` parameter runs
 * as `"production"`, which nobody judged) fail closed with `ToolDenied`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const paramsToRun = <P, I>(parameters: Schema.Schema<P, I>) => {
  const canonical = canonicalize(parameters)
  return (allowed: Allowed): Effect.Effect<P, ParseResult.ParseError | ToolDenied> =>
    Effect.flatMap(canonical(allowed.call.args), (judged) =>
      canonicalOf(judged.args) === canonicalOf(allowed.call.args)
        ? Effect.succeed(judged.params)
        : Effect.fail(
          new ToolDenied({
            toolCallId: allowed.call.id,
            toolName: allowed.call.name,
            sessionKey: allowed.call.sessionKey,
            // Not quoted: arguments may be large, and the request keeps both versions.
            ...(allowed.request !== undefined
              ? {
                outcome: "denied" as const,
                reason:
                  "the edited arguments are not in the tool's canonical form: the tool would run other values than were approved",
                requestId: allowed.request.requestId
              }
              : {
                outcome: "policy" as const,
                reason:
                  "the arguments are not in the tool's canonical form: the tool would run other values than were judged"
              })
          })
        ))
}

// The implementation's view of both overloads' `run`; the overloads keep callers typed.
type AnyRun = (params: any, allowed: Allowed) => Effect.Effect<unknown, unknown, unknown>

/**
 * Wraps `run` under the tool name `name`. With a `parameters` schema, the arguments are decoded
 * before anyone is asked (a malformed call fails with `InvalidToolCall`, no human bothered), the
 * gate judges their encoding, and `run` gets the decoded value whose encoding was judged. An
 * approver's edit is decoded with the schema too; one that does not fit fails with
 * `InvalidToolCall`, one that is not in the schema's canonical form with `ToolDenied`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: {
  <P, I extends ToolCall.ToolArgs, A, E, R>(
    name: string,
    parameters: Schema.Schema<P, I>,
    run: (params: P, allowed: Allowed) => Effect.Effect<A, E, R>
  ): GatedTool<I, A, E, R>
  <A, E, R>(
    name: string,
    run: (args: ToolCall.ToolArgs, allowed: Allowed) => Effect.Effect<A, E, R>
  ): GatedTool<ToolCall.ToolArgs, A, E, R>
} = (
  name: string,
  ...rest: [Schema.Schema<unknown, ToolCall.ToolArgs>, AnyRun] | [AnyRun]
): GatedTool<ToolCall.ToolArgs, unknown, unknown, unknown> => {
  if (rest.length === 1) {
    const [run] = rest
    return (args, context) =>
      Effect.flatMap(ToolGate, (gate) =>
        Effect.flatMap(
          gate.authorize({ ...context, name, args }),
          (result) => PauseSignal.isPauseSignal(result) ? Effect.succeed(result) : run(result.call.args, result)
        ))
  }
  const [parameters, run] = rest
  const canonical = judge(parameters)
  const edited = paramsToRun(parameters)
  return (args, context) =>
    Effect.gen(function*() {
      const gate = yield* ToolGate
      const asked = yield* canonical(args)
      const result = yield* gate.authorize({ ...context, name, args: asked.args })
      if (PauseSignal.isPauseSignal(result)) return result
      // Allowed as asked: the decoded value whose encoding was judged. Otherwise the approver's edit.
      const params = canonicalOf(result.call.args) === canonicalOf(asked.args)
        ? asked.params
        : yield* Effect.mapError(
          edited(result),
          (error) => ParseResult.isParseError(error) ? invalid(error) : error
        )
      return yield* run(params, result)
    })
}
