import { LanguageModel, Prompt } from "@effect/ai"
import { ScriptedModel } from "@tool-gate/ai"
import { expect } from "bun:test"
import { Chunk, Effect, Stream } from "effect"
import { describe, it } from "../../support/effectTest.js"
import { Tools } from "./fixtures.js"

const Model = ScriptedModel.layer([
  { text: "reading", toolCalls: [{ id: "c1", name: "read_file", params: { path: "a.md" } }] },
  (prompt) => ({ text: `read ${ScriptedModel.lastToolResults(prompt).map((part) => part.result).join(", ")}` })
])

// A conversation after the first turn: the model's tool call and the tool's result.
const afterFirstTurn = Prompt.make([
  { role: "user", content: "read a.md" },
  { role: "assistant", content: [{ type: "tool-call", id: "c1", name: "read_file", params: { path: "a.md" } }] },
  {
    role: "tool",
    content: [{
      type: "tool-result",
      id: "c1",
      name: "read_file",
      isFailure: false,
      result: "# A",
      providerExecuted: false
    }]
  }
])

describe("ScriptedModel", () => {
  it.effect("replies by the number of assistant turns in the prompt, with @effect/ai's own parts", () =>
    Effect.gen(function*() {
      const toolkit = yield* Tools
      const first = yield* LanguageModel.generateText({ prompt: "read a.md", toolkit, disableToolCallResolution: true })
      expect(first.text).toBe("reading")
      expect(first.toolCalls.map((call) => [call.id, call.name, call.params])).toEqual([["c1", "read_file", {
        path: "a.md"
      }]])
      expect(first.finishReason).toBe("tool-calls")
      // Another process resuming this conversation gets the second reply, not the first.
      const second = yield* LanguageModel.generateText({ prompt: afterFirstTurn })
      expect(second.text).toBe("read # A")
      expect(second.finishReason).toBe("stop")
    }).pipe(
      Effect.provide(Model),
      Effect.provide(Tools.toLayer({
        read_file: () => Effect.succeed(""),
        deploy: () => Effect.succeed(""),
        drop_database: () => Effect.succeed("")
      }))
    ))

  it.effect("streams the same reply", () =>
    Effect.gen(function*() {
      const parts = Chunk.toArray(yield* Stream.runCollect(LanguageModel.streamText({ prompt: afterFirstTurn })))
      expect(parts.filter((part) => part.type === "text-delta").map((part) => part.delta)).toEqual(["read # A"])
      expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" })
    }).pipe(Effect.provide(Model)))

  it.effect("a turn past the end of the script fails with an AiError", () =>
    Effect.gen(function*() {
      const twoTurns = Prompt.merge(afterFirstTurn, [{ role: "assistant", content: "read # A" }])
      const error = yield* Effect.flip(LanguageModel.generateText({ prompt: twoTurns }))
      expect(error).toMatchObject({ _tag: "UnknownError", module: "ScriptedModel" })
      expect(error.message).toContain("none for turn 3")
    }).pipe(Effect.provide(Model)))
})
