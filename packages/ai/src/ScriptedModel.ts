/**
 * A `LanguageModel` that plays a script instead of calling a provider: no network, the same
 * replies on every run. For tests and demos of agent loops.
 *
 * The reply to a request is chosen by how many assistant messages its prompt already holds, not
 * by how many requests this process has made: a conversation resumed in another process gets the
 * reply that comes next. A step may be a function of the prompt, to answer what the model saw
 * (say, a denial's reason).
 *
 * @example
 * import { LanguageModel } from "@effect/ai"
 * import { ScriptedModel } from "@tool-gate/ai"
 * import { Effect } from "effect"
 *
 * const Model = ScriptedModel.layer([
 *   { toolCalls: [{ id: "call-1", name: "read_file", params: { path: "README.md" } }] },
 *   (prompt) => ({ text: `read ${ScriptedModel.lastToolResults(prompt).length} file(s)` })
 * ])
 *
 * const program = LanguageModel.generateText({ prompt: "summarize the README" }).pipe(Effect.provide(Model))
 *
 * @since 0.1.0
 */
import { AiError, LanguageModel, type Prompt, type Response } from "@effect/ai"
import { Effect, Layer, Stream } from "effect"

/**
 * One tool call the scripted model makes; `params` as a provider would send them (JSON).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedCall {
  readonly id: string
  readonly name: string
  readonly params: unknown
}

/**
 * What the model answers in one turn: text, tool calls, or both.
 *
 * @since 0.1.0
 * @category models
 */
export interface Reply {
  readonly text?: string | undefined
  readonly toolCalls?: ReadonlyArray<ScriptedCall> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export type Step = Reply | ((prompt: Prompt.Prompt) => Reply)

const usage = { inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }

const toolCallParts = (reply: Reply): Array<Response.ToolCallPartEncoded> =>
  (reply.toolCalls ?? []).map((call) => ({
    type: "tool-call",
    id: call.id,
    name: call.name,
    params: call.params,
    providerExecuted: false
  }))

const finishPart = (reply: Reply): Response.FinishPartEncoded => ({
  type: "finish",
  reason: (reply.toolCalls ?? []).length > 0 ? "tool-calls" : "stop",
  usage
})

/**
 * The tool results of the prompt's last tool message: what the model just learned from its tools.
 *
 * @since 0.1.0
 * @category utils
 */
export const lastToolResults = (prompt: Prompt.Prompt): ReadonlyArray<Prompt.ToolResultPart> => {
  for (let i = prompt.content.length - 1; i >= 0; i--) {
    const message = prompt.content[i]!
    if (message.role === "tool") return message.content
  }
  return []
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (script: ReadonlyArray<Step>): Effect.Effect<LanguageModel.Service> => {
  const replyTo = (options: LanguageModel.ProviderOptions, method: string): Effect.Effect<Reply, AiError.AiError> => {
    const turn = options.prompt.content.filter((message) => message.role === "assistant").length
    const step = script[turn]
    return step === undefined
      ? Effect.fail(
        new AiError.UnknownError({
          module: "ScriptedModel",
          method,
          description: `the script has ${script.length} replies; none for turn ${turn + 1}`
        })
      )
      : Effect.succeed(typeof step === "function" ? step(options.prompt) : step)
  }
  return LanguageModel.make({
    generateText: (options) =>
      Effect.map(replyTo(options, "generateText"), (reply): Array<Response.PartEncoded> => [
        ...(reply.text !== undefined ? [{ type: "text" as const, text: reply.text }] : []),
        ...toolCallParts(reply),
        finishPart(reply)
      ]),
    streamText: (options) =>
      Stream.fromIterableEffect(
        Effect.map(replyTo(options, "streamText"), (reply): Array<Response.StreamPartEncoded> => [
          ...(reply.text !== undefined
            ? [
              { type: "text-start" as const, id: "text-0" },
              { type: "text-delta" as const, id: "text-0", delta: reply.text },
              { type: "text-end" as const, id: "text-0" }
            ]
            : []),
          ...toolCallParts(reply),
          finishPart(reply)
        ])
      )
  })
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (script: ReadonlyArray<Step>): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, make(script))
