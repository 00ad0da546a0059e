/**
 * An agent loop over `LanguageModel` and a toolkit whose calls go through the gate. It runs
 * model turns until the model answers with text (`Completed`) or a turn has calls that need a
 * human (`Paused`). A pause saves the loop's state (the conversation so far, the turn's calls,
 * the results already obtained) in a durable checkpoint, so the process may exit; `resume(token)`,
 * in any process sharing the store, picks it up once every request of the turn is answered:
 * approved calls run (once, with the approver's edited arguments if any), denied and expired
 * ones give the model a denial result saying why, and the loop goes on.
 *
 * Each call of a turn gets its own request, keyed by the model's tool-call id and answered on its
 * own; while any is unanswered, `resume` fails with `RequestPending` and the checkpoint stays
 * resumable. `resume` claims the checkpoint with a lease and completes it only once the resumed
 * turn has run to its result: if the process dies in between, the turn can be resumed again
 * after the lease. The turn's results are recorded in the checkpoint once its calls ran, so a
 * retry gives the model the same results; an approved call that started but whose result was not
 * recorded is not run twice (the model is told its result was lost). A completed checkpoint
 * refuses (`AlreadyResumed`), and so does one another owner is resuming (`CheckpointClaimed`).
 * Before each model turn and each tool call, the resumed turn renews its lease, which checks the
 * lease's fencing token: an owner that stalled past its lease and was taken over stops there with
 * `CheckpointClaimed` instead of acting a second time. Renewals that fail on the store are logged
 * and retried with backoff; a refused one is logged and stops the turn before its next act.
 *
 * Tool-call ids must be unique per session. A turn that repeats one fails with
 * `AiError.MalformedOutput` before anything is asked or run; a later turn that reuses one gives
 * the model a failed result for that call (it does not run) and goes on. A turn that fails after
 * a call asked for approval denies that request, so none is left without its checkpoint.
 *
 * @example
 * import { Tool, Toolkit } from "@effect/ai"
 * import { AgentLoop, ScriptedModel } from "@tool-gate/ai"
 * import { Policy } from "@tool-gate/core"
 * import { ToolGateSqlite } from "@tool-gate/sqlite"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const Deploy = Tool.make("deploy", { parameters: { env: Schema.String }, success: Schema.String })
 * const Tools = Toolkit.make(Deploy)
 *
 * const agent = AgentLoop.make({ toolkit: Tools })
 *
 * const program = Effect.gen(function*() {
 *   const result = yield* agent.run("ship it", { sessionKey: "s-1", agentId: "release-bot" })
 *   if (result._tag === "Paused") {
 *     // keep result.token; exit; later, once a human answered: agent.resume(result.token)
 *   }
 *   return result
 * })
 *
 * const Live = Layer.mergeAll(
 *   Tools.toLayer({ deploy: ({ env }) => Effect.succeed(`deployed to ${env}`) }),
 *   ScriptedModel.layer([{ toolCalls: [{ id: "c1", name: "deploy", params: { env: "prod" } }] }, { text: "done" }]),
 *   ToolGateSqlite.layer({ filename: ".toolgate/agent.db", policy: Policy.unsafeMake({ requireApproval: ["deploy"] }) })
 * )
 *
 * Effect.runPromise(program.pipe(Effect.provide(Live)))
 *
 * @since 0.1.0
 */
import { AiError, LanguageModel, Prompt, type Response, type Tool, type Toolkit } from "@effect/ai"
import type { ToolGate, ToolGateError } from "@tool-gate/core"
import { Checkpoint, type PauseSignal, ToolCall } from "@tool-gate/core"
import { Chunk, Data, Duration, Effect, Schema, Stream } from "effect"
import * as GatedToolkit from "./GatedToolkit.js"
import * as CallIds from "./internal/callIds.js"
import * as Lease from "./internal/lease.js"
import * as Turn from "./internal/turn.js"

/**
 * What a paused loop stores: the conversation up to and including the model's turn with the tool
 * calls, those calls, the results already obtained (allowed calls that ran, denials), and how
 * many turns were taken.
 *
 * @since 0.1.0
 * @category models
 */
export const State = Schema.Struct({
  session: ToolCall.CallContext,
  prompt: Prompt.Prompt,
  calls: Schema.Array(GatedToolkit.ModelCall),
  results: Schema.Array(GatedToolkit.ToolResult),
  turns: Schema.Number
})
/**
 * @since 0.1.0
 * @category models
 */
export interface State extends Schema.Schema.Type<typeof State> {}

/**
 * The model answered with text: the loop is done.
 *
 * @since 0.1.0
 * @category models
 */
export class Completed extends Data.TaggedClass("Completed")<{
  readonly text: string
  /** the whole conversation, the final answer included: continue it with another `run` */
  readonly prompt: Prompt.Prompt
  readonly turns: number
}> {}

/**
 * The turn waits for humans: answer `requests` (from any process), then `resume(token)`.
 *
 * @since 0.1.0
 * @category models
 */
export class Paused extends Data.TaggedClass("Paused")<{
  readonly token: Checkpoint.Token
  readonly requests: ReadonlyArray<PauseSignal.PauseSignal>
}> {}

/**
 * @since 0.1.0
 * @category models
 */
export type Result = Completed | Paused

/**
 * What the loop reports as it goes (for logs and demos): each model turn, and each tool call's
 * outcome.
 *
 * @since 0.1.0
 * @category models
 */
export type Step = Data.TaggedEnum<{
  ModelReplied: { readonly turn: number; readonly text: string; readonly calls: ReadonlyArray<GatedToolkit.ModelCall> }
  CallHandled: { readonly call: GatedToolkit.ModelCall; readonly outcome: GatedToolkit.Outcome }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Step = Data.taggedEnum<Step>()

/**
 * The model kept calling tools past `maxTurns`.
 *
 * @since 0.1.0
 * @category errors
 */
export class MaxTurnsExceeded extends Schema.TaggedError<MaxTurnsExceeded>()("MaxTurnsExceeded", {
  sessionKey: Schema.String,
  maxTurns: Schema.Number
}) {
  override get message(): string {
    return `The agent in session ${this.sessionKey} took ${this.maxTurns} turns without answering`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<Tools extends Record<string, Tool.Any>, E, R> {
  /** the toolkit (an `@effect/ai` `Toolkit`, whose handlers come from context) or its handled form */
  readonly toolkit: Toolkit.WithHandler<Tools> | Effect.Effect<Toolkit.WithHandler<Tools>, E, R>
  /** the checkpoint's name: tokens saved under another name do not resume here (default `@tool-gate/ai/AgentLoop`) */
  readonly name?: string | undefined
  /** model turns per conversation, resumes included (default 20) */
  readonly maxTurns?: number | undefined
  readonly onStep?: ((step: Step) => Effect.Effect<void>) | undefined
  /**
   * Given, the loop asks the model with `streamText` instead of `generateText` and reports each
   * piece of the model's text as it arrives (`turn` counts from 1, as `ModelReplied`'s). The turn
   * is judged once its stream ends, exactly as a generated one: tool calls are gated only when the
   * model's turn is complete, and `ModelReplied` follows with the whole text.
   */
  readonly onTextDelta?: ((delta: { readonly turn: number; readonly delta: string }) => Effect.Effect<void>) | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export type Error<Tools extends Record<string, Tool.Any>> =
  | GatedToolkit.Error<Tools>
  | MaxTurnsExceeded
  | ToolGateError.RequestNotFound
  | ToolGateError.CheckpointInvalid

/**
 * @since 0.1.0
 * @category models
 */
export type ResumeError =
  | ToolGateError.CheckpointNotFound
  | ToolGateError.RequestPending
  | ToolGateError.AlreadyResumed
  | ToolGateError.CheckpointClaimed

/**
 * @since 0.1.0
 * @category models
 */
export type Requirements<Tools extends Record<string, Tool.Any>> =
  | LanguageModel.LanguageModel
  | ToolGate.ToolGate
  | Checkpoint.Checkpoints
  | Tool.Requirements<Tools[keyof Tools]>

/**
 * @since 0.1.0
 * @category models
 */
export interface AgentLoop<Tools extends Record<string, Tool.Any>, E, R> {
  /** Starts a conversation (or continues one: pass a `Completed`'s prompt plus the next message). */
  readonly run: (
    prompt: Prompt.RawInput,
    session: ToolCall.CallContext
  ) => Effect.Effect<Result, Error<Tools> | E, Requirements<Tools> | R>
  /**
   * Continues a paused conversation once every request of its turn is answered or expired. The
   * options name the lease's owner and length (`Checkpoints.resume`); the same owner may retry.
   * The lease is renewed while the resumed turn runs, so only a stalled or dead owner loses it;
   * one that lost it stops with `CheckpointClaimed` before its next model turn or tool call.
   */
  readonly resume: (
    token: Checkpoint.Token,
    options?: Checkpoint.ResumeOptions
  ) => Effect.Effect<Result, Error<Tools> | ResumeError | E, Requirements<Tools> | R>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = <Tools extends Record<string, Tool.Any>, E = never, R = never>(
  options: Options<Tools, E, R>
): AgentLoop<Tools, E, R> => {
  const checkpoint = Checkpoint.make(options.name ?? "@tool-gate/ai/AgentLoop", { state: State })
  const maxTurns = options.maxTurns ?? 20
  const onStep = options.onStep ?? (() => Effect.void)
  const resolveToolkit: Effect.Effect<Toolkit.WithHandler<Tools>, E, R> = Effect.isEffect(options.toolkit)
    ? options.toolkit
    : Effect.succeed(options.toolkit)

  const report: Turn.Report = (call, outcome) => onStep(Step.CallHandled({ call, outcome }))

  /**
   * One model turn: generated, or streamed to its end with each text delta reported (then read
   * as a generated turn: its text, its tool calls and the parts the conversation keeps).
   */
  const ask = (
    model: LanguageModel.Service,
    prompt: Prompt.Prompt,
    toolkit: Toolkit.WithHandler<Tools>,
    turn: number
  ) => {
    const onTextDelta = options.onTextDelta
    if (onTextDelta === undefined) return model.generateText({ prompt, toolkit, disableToolCallResolution: true })
    return model.streamText({ prompt, toolkit, disableToolCallResolution: true }).pipe(
      Stream.tap((part) => part.type === "text-delta" ? onTextDelta({ turn, delta: part.delta }) : Effect.void),
      Stream.runCollect,
      Effect.map((chunk) => streamed(Chunk.toReadonlyArray(chunk)))
    )
  }

  // The gate and the checkpoint keep the parameters as JSON: encode back what @effect/ai decoded.
  const encodeCall = (
    toolkit: Toolkit.WithHandler<Tools>,
    call: { readonly id: string; readonly name: string; readonly params: unknown }
  ) =>
    Schema.encodeUnknown(toolkit.tools[call.name]!.parametersSchema as Schema.Schema<unknown, unknown>)(call.params)
      .pipe(
        Effect.map((params): GatedToolkit.ModelCall => ({ id: call.id, name: call.name, params })),
        Effect.mapError((error) =>
          AiError.MalformedOutput.fromParseError({ module: "AgentLoop", method: "run", error })
        )
      )

  /** One model turn: text ends the loop, calls that wait for a human pause it, results continue it. */
  const turn = <FE>(
    toolkit: Toolkit.WithHandler<Tools>,
    session: ToolCall.CallContext,
    prompt: Prompt.Prompt,
    turns: number,
    fence: Effect.Effect<void, FE>
  ) =>
    Effect.gen(function*() {
      const model = yield* LanguageModel.LanguageModel
      const checkpoints = yield* Checkpoint.Checkpoints
      yield* fence
      const response = yield* ask(model, prompt, toolkit, turns + 1)
      const calls = yield* Effect.forEach(
        response.toolCalls.filter((call) => !call.providerExecuted),
        (call) => encodeCall(toolkit, call)
      )
      yield* Effect.annotateCurrentSpan("toolgate.tool_calls", calls.length)
      // One id names one call: a turn that repeats one is refused whole, before anyone is asked
      // or anything runs, the same on every store.
      const repeated = CallIds.repeatedIds(calls)
      if (repeated.length > 0) {
        return yield* new AiError.MalformedOutput({
          module: "AgentLoop",
          method: "run",
          description: `the model's turn repeats tool-call id(s) ${
            repeated.join(", ")
          }; call ids must be unique per session, so none of the turn's calls was asked for or run`
        })
      }
      const history = Prompt.merge(prompt, Prompt.fromResponseParts(response.content))
      yield* onStep(Step.ModelReplied({ turn: turns + 1, text: response.text, calls }))
      if (calls.length === 0) return new Completed({ text: response.text, prompt: history, turns: turns + 1 })

      const { results, waiting } = yield* Turn.settle({
        toolkit,
        session,
        calls,
        fence,
        report,
        save: (results, pending) =>
          checkpoints.save(
            checkpoint,
            pending.map((signal) => signal.requestId),
            { session, prompt: history, calls, results, turns: turns + 1 }
          )
      })
      if (waiting !== undefined) return new Paused(waiting)
      return Prompt.merge(history, Turn.toolMessage(results))
    }).pipe(Turn.withTurnSpan(session, turns + 1))

  /** Model turns from `prompt` until text or a pause; `fence` goes before each model turn and tool call. */
  const continueFrom = <FE>(
    toolkit: Toolkit.WithHandler<Tools>,
    session: ToolCall.CallContext,
    start: Prompt.Prompt,
    turnsSoFar: number,
    fence: Effect.Effect<void, FE>
  ) =>
    Effect.gen(function*() {
      let prompt = start
      for (let turns = turnsSoFar;; turns++) {
        if (turns >= maxTurns) return yield* new MaxTurnsExceeded({ sessionKey: session.sessionKey, maxTurns })
        const next = yield* turn(toolkit, session, prompt, turns, fence)
        if (next instanceof Completed || next instanceof Paused) return next
        prompt = next
      }
    })

  const run = (prompt: Prompt.RawInput, session: ToolCall.CallContext) =>
    Effect.flatMap(resolveToolkit, (toolkit) => continueFrom(toolkit, session, Prompt.make(prompt), 0, Effect.void))

  const resume = (token: Checkpoint.Token, resumeOptions?: Checkpoint.ResumeOptions) =>
    Effect.gen(function*() {
      const toolkit = yield* resolveToolkit
      const checkpoints = yield* Checkpoint.Checkpoints
      const length = Duration.decode(resumeOptions?.lease ?? "5 minutes")
      const { lease, state } = yield* checkpoints.resume(checkpoint, token, { ...resumeOptions, lease: length })
      // Before each act the lease is renewed, which checks its fencing token (see internal/lease.ts).
      const fence = yield* Lease.keep(token, lease, length)
      const obtained = new Map(state.results.map((result) => [result.id, result]))
      // Every request of the turn is settled now, so gate() never waits: approved calls run (once),
      // denied and expired ones come back as denial results.
      const results = yield* Effect.forEach(state.calls, (call) => {
        const result = obtained.get(call.id)
        return result !== undefined
          ? Effect.succeed(result)
          : Effect.zipRight(fence, GatedToolkit.gate(toolkit, call, state.session)).pipe(
            Effect.tap((settled) => report(call, settled)),
            Effect.map((settled) => settled.result),
            Effect.catchTag("CallAlreadyExecuted", () => Effect.succeed(Turn.lostResult(call)))
          )
      })
      // Kept before the model goes on: a retry after a crash from here reads these results.
      yield* checkpoints.update(checkpoint, token, lease, { ...state, results })
      const next = yield* continueFrom(
        toolkit,
        state.session,
        Prompt.merge(state.prompt, Turn.toolMessage(results)),
        state.turns,
        fence
      )
      yield* checkpoints.complete(token, lease)
      return next
    }).pipe(Effect.scoped, Turn.withResumeSpan(token))

  return { run, resume }
}

/** A streamed turn read as a generated one: its text, its tool calls, and its parts. */
const streamed = <Tools extends Record<string, Tool.Any>>(parts: ReadonlyArray<Response.StreamPart<Tools>>) => ({
  text: parts.map((part) => part.type === "text-delta" ? part.delta : "").join(""),
  toolCalls: parts.filter((part): part is Response.ToolCallParts<Tools> => part.type === "tool-call"),
  content: parts
})
