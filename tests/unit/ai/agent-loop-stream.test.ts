import { AiError, LanguageModel, type Response } from "@effect/ai"
import { AgentLoop } from "@tool-gate/ai"
import { ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Layer, Stream } from "effect"
import { describe, it } from "../../support/effectTest.js"
import { call, deploy, reportSeen, seen, Tools, world } from "./fixtures.js"

// AgentLoop with `onTextDelta` asks the model with streamText: the text comes piece by piece as
// it arrives, and the turn is judged, paused and resumed exactly as a generated one.

const session = { sessionKey: "s-1", agentId: "release-bot" }

const streaming = () => {
  const deltas: Array<{ readonly turn: number; readonly delta: string }> = []
  const agent = AgentLoop.make({
    toolkit: Tools,
    onTextDelta: (delta) => Effect.sync(() => void deltas.push(delta))
  })
  return { agent, deltas }
}

/**
 * A model that can only stream: each turn's text in several deltas, then its tool calls. Its
 * generateText fails, so a loop that does not stream cannot pass.
 */
const streamOnly = (
  turns: ReadonlyArray<
    { readonly deltas: ReadonlyArray<string>; readonly calls?: ReadonlyArray<ReturnType<typeof call>> }
  >
) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () =>
        Effect.fail(new AiError.UnknownError({ module: "test", method: "generateText", description: "streams only" })),
      streamText: (options) => {
        const turn = turns[options.prompt.content.filter((message) => message.role === "assistant").length]!
        const parts: Array<Response.StreamPartEncoded> = [
          { type: "text-start", id: "t" },
          ...turn.deltas.map((delta): Response.StreamPartEncoded => ({ type: "text-delta", id: "t", delta })),
          { type: "text-end", id: "t" },
          ...(turn.calls ?? []).map((c): Response.StreamPartEncoded => ({
            type: "tool-call",
            id: c.id,
            name: c.name,
            params: c.params,
            providerExecuted: false
          })),
          {
            type: "finish",
            reason: turn.calls === undefined ? "stop" : "tool-calls",
            usage: { inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }
          }
        ]
        return Stream.fromIterable(parts)
      }
    })
  )

describe("AgentLoop streaming (streamText)", () => {
  it.scoped("a streamed turn is gated as a generated one: allowed runs, denied is denied, deploy pauses and resumes", () => {
    const { layer, ran } = world([
      {
        text: "Reading, dropping and deploying.",
        toolCalls: [
          call("c1", "read_file", { path: "CHANGELOG.md" }),
          call("c2", "drop_database", { name: "staging" }),
          deploy("c3", "production")
        ]
      },
      reportSeen
    ])
    const { agent, deltas } = streaming()
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const first = yield* agent.run("ship it", session)
      if (first._tag !== "Paused") throw new Error("expected a pause")
      expect(first.requests.map((signal) => signal.metadata.toolId)).toEqual(["deploy"])
      expect(ran.map((r) => r.tool)).toEqual(["read_file"])
      expect(deltas).toEqual([{ turn: 1, delta: "Reading, dropping and deploying." }])

      yield* gate.respond(first.requests[0]!.requestId, { decision: "approve_once", respondedBy: "ana" })
      const done = yield* agent.resume(first.token)
      if (done._tag !== "Completed") throw new Error("expected Completed")
      expect(seen(done.text).map((r) => [r.id, r.isFailure])).toEqual([["c1", false], ["c2", true], ["c3", false]])
      expect(ran.map((r) => r.tool)).toEqual(["read_file", "deploy"])
      // the resumed turn streamed too: its text arrived as the second turn's delta
      expect(deltas.slice(1)).toEqual([{ turn: 2, delta: done.text }])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("the pieces arrive in order and make the turn's text; calls run only once the turn is complete", () => {
    const { layer, ran } = world([])
    const { deltas } = streaming()
    const model = streamOnly([
      { deltas: ["Let me ", "read ", "it."], calls: [call("c1", "read_file", { path: "README.md" })] },
      { deltas: ["Read ", "README.md."] }
    ])
    const seenBeforeRun: Array<number> = []
    return Effect.gen(function*() {
      const tracked = AgentLoop.make({
        toolkit: Tools,
        onTextDelta: (delta) => Effect.sync(() => void deltas.push(delta)),
        onStep: (step) =>
          Effect.sync(() => {
            if (step._tag === "CallHandled") seenBeforeRun.push(deltas.length)
          })
      })
      const result = yield* tracked.run("read the readme", session)
      if (result._tag !== "Completed") throw new Error("expected Completed")
      expect(result.text).toBe("Read README.md.")
      expect(deltas).toEqual([
        { turn: 1, delta: "Let me " },
        { turn: 1, delta: "read " },
        { turn: 1, delta: "it." },
        { turn: 2, delta: "Read " },
        { turn: 2, delta: "README.md." }
      ])
      // the call ran after its whole turn had arrived
      expect(seenBeforeRun).toEqual([3])
      expect(ran).toEqual([{ tool: "read_file", params: { path: "README.md" } }])
      // the conversation keeps the streamed turn as one assistant text
      const assistant = result.prompt.content.filter((message) => message.role === "assistant")
      expect(assistant[0]!.content.filter((part) => part.type === "text").map((part) => part.text)).toEqual([
        "Let me read it."
      ])
    }).pipe(Effect.provide(Layer.merge(layer, model)))
  })

  it.scoped("without onTextDelta the loop generates: a model that only streams fails", () => {
    const { layer } = world([])
    const generating = AgentLoop.make({ toolkit: Tools })
    return Effect.gen(function*() {
      const error = yield* Effect.flip(generating.run("hello", session))
      expect(error._tag).toBe("UnknownError")
    }).pipe(Effect.provide(Layer.merge(layer, streamOnly([{ deltas: ["hi"] }]))))
  })
})
