/**
 * AgentLoop's spans under a recording tracer (ScriptedModel is the model, the gate on a SQLite
 * file): each model turn is a `toolgate.agent.turn` span holding the model's call and the gate's
 * spans of its tool calls; a resume is a `toolgate.agent.resume` span holding the resumed calls
 * and the turns after them.
 */
import { AgentLoop } from "@tool-gate/ai"
import { ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Option, type Tracer } from "effect"
import { describe, it } from "../../support/effectTest.js"
import * as Recording from "../core/observability/recordingTracer.js"
import { call, deploy, reportSeen, Tools, world } from "./fixtures.js"

const agent = AgentLoop.make({ toolkit: Tools })
const session = { sessionKey: "s-1", agentId: "release-bot" }

/** The names of a span's ancestors, nearest first. */
const ancestors = (span: Tracer.Span): Array<string> => {
  const names: Array<string> = []
  let parent = span.parent
  while (Option.isSome(parent) && parent.value._tag === "Span") {
    names.push(parent.value.name)
    parent = parent.value.parent
  }
  return names
}

describe("AgentLoop spans", () => {
  it.scoped("each turn is a span holding the model and the gate; a resume holds the resumed calls and the next turns", () => {
    const recording = Recording.make()
    const { layer, ran } = world([
      { toolCalls: [call("c1", "read_file", { path: "README.md" }), deploy("c2", "production")] },
      reportSeen
    ])
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const paused = yield* agent.run("ship it", session)
      if (paused._tag !== "Paused") throw new Error("expected a pause")
      yield* gate.respond(paused.requests[0]!.requestId, { decision: "approve_once", respondedBy: "ana" })
      const done = yield* agent.resume(paused.token)
      expect(done._tag).toBe("Completed")
      expect(ran.map((run) => run.tool)).toEqual(["read_file", "deploy"])

      const turns = Recording.named(recording, "toolgate.agent.turn")
      expect(turns.map(Recording.attributes)).toEqual([
        {
          "toolgate.session": "s-1",
          "toolgate.agent": "release-bot",
          "toolgate.turn": 1,
          "toolgate.tool_calls": 2,
          "toolgate.outcome": "paused"
        },
        {
          "toolgate.session": "s-1",
          "toolgate.agent": "release-bot",
          "toolgate.turn": 2,
          "toolgate.tool_calls": 0,
          "toolgate.outcome": "completed"
        }
      ])
      expect(turns.every(Recording.ended)).toBe(true)
      const [resume] = Recording.named(recording, "toolgate.agent.resume")
      expect(Recording.attributes(resume!)).toEqual({
        "toolgate.checkpoint": paused.token,
        "toolgate.outcome": "completed"
      })
      // the first turn stands alone; the second runs within the resume
      expect(ancestors(turns[0]!)).toEqual([])
      expect(ancestors(turns[1]!)).toEqual(["toolgate.agent.resume"])

      // the model's call of each turn, and the gate's spans of its tool calls, are within it
      const inTurn = (span: Tracer.Span) => ancestors(span).includes("toolgate.agent.turn")
      const generated = recording.spans.filter((span) => span.name === "LanguageModel.generateText")
      expect(generated.map(inTurn)).toEqual([true, true])
      const authorizations = Recording.named(recording, "toolgate.authorize")
      expect(
        authorizations.filter(inTurn).map((span) => [
          Recording.attributes(span)["toolgate.tool"],
          Recording.attributes(span)["toolgate.outcome"]
        ])
      ).toEqual([["read_file", "allow"], ["deploy", "pending"]])
      // the approved deploy runs on resume, under the resume's span, before the next turn
      const [resumedGate] = Recording.named(recording, "toolgate.gate").filter((span) =>
        Recording.attributes(span)["toolgate.tool"] === "deploy"
      )
      expect(ancestors(resumedGate!)).toEqual(["toolgate.agent.resume"])
      expect(Recording.attributes(resumedGate!)["toolgate.outcome"]).toBe("approved")
    }).pipe(Effect.provide(layer), Effect.withTracer(recording.tracer))
  })

  it.scoped("a turn that fails ends its span failed", () => {
    const recording = Recording.make()
    // the model repeats a call id within one turn: the loop refuses the turn
    const { layer } = world([{
      toolCalls: [call("c1", "read_file", { path: "a" }), call("c1", "read_file", { path: "b" })]
    }])
    return Effect.gen(function*() {
      const failed = yield* Effect.flip(agent.run("read", session))
      expect(failed._tag).toBe("MalformedOutput")
      const [turn] = Recording.named(recording, "toolgate.agent.turn")
      const status = turn!.status
      expect(status._tag === "Ended" && status.exit._tag).toBe("Failure")
      expect(Recording.attributes(turn!)["toolgate.outcome"]).toBeUndefined()
    }).pipe(Effect.provide(layer), Effect.withTracer(recording.tracer))
  })
})
