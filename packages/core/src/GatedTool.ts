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
import { Effect, Schema } from "effect"
import * as PauseSignal from "./PauseSignal.js"
import type * as ToolCall from "./ToolCall.js"
import { type Allowed, type CallError, ToolGate } from "./ToolGate.js"
import { type CallAlreadyExecuted, InvalidToolCall, problemsOf, type ToolDenied } from "./ToolGateError.js"

/**
 * Who makes the call and where: everything of a `ToolCall` but the tool's name and arguments.
 * `id` is the caller's id for this call (an LLM's tool-call id); asking again with it returns
 * the recorded answer.
 *
 * @since 0.1.0
 * @category models
 */
export type CallContext = Omit<ToolCall.ToolCallInput, "name" | "args">

/**
 * @since 0.1.0
 * @category models
 */
export interface GatedTool<in I, out A, out E, out R> {
  (args: I, context: CallContext): Effect.Effect<
    A | PauseSignal.PauseSignal,
    E | ToolDenied | CallAlreadyExecuted | CallError,
    R | ToolGate
  >
}

const decodeArgs = <P, I>(parameters: Schema.Schema<P, I>) => {
  const decode = Schema.decodeUnknown(parameters, { errors: "all" })
  return (args: unknown): Effect.Effect<P, InvalidToolCall> =>
    Effect.mapError(decode(args), (error) =>
      new InvalidToolCall({
        problems: problemsOf(error).map((problem) => ({
          path: problem.path === "" ? "args" : `args.${problem.path}`,
          message: problem.message
        }))
      }))
}

// The implementation's view of both overloads' `run`; the overloads keep callers typed.
type AnyRun = (params: any, allowed: Allowed) => Effect.Effect<unknown, unknown, unknown>

/**
 * Wraps `run` under the tool name `name`. With a `parameters` schema, the arguments are checked
 * before anyone is asked (a malformed call fails with `InvalidToolCall`, no human bothered) and
 * the arguments that run, possibly edited by the approver, are decoded with it again.
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
  const [decode, run] = rest.length === 1 ? [Effect.succeed<unknown>, rest[0]] : [decodeArgs(rest[0]), rest[1]]
  return (args, context) =>
    Effect.flatMap(ToolGate, (gate) =>
      decode(args).pipe(
        Effect.zipRight(gate.authorize({ ...context, name, args })),
        Effect.flatMap((result) =>
          PauseSignal.isPauseSignal(result)
            ? Effect.succeed(result)
            : Effect.flatMap(decode(result.call.args), (params) => run(params, result))
        )
      ))
}
