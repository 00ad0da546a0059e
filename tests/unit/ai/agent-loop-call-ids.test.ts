/**
 * Tool-call ids name one call per session. A model turn that repeats an id is refused before
 * anyone is asked; a turn that fails after asking leaves no request without its checkpoint; a
 * later turn that reuses an id of the session gets a failed result (the call does not run) and
 * the conversation goes on, in `run` and in `resume`. On every store.
 */
import { Tool, Toolkit } from "@effect/ai"
import { AgentLoop, ScriptedModel } from "@tool-gate/ai"
import { ApprovalRequest, ApprovalStore, Checkpoint, ToolCall, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Layer, Schema } from "effect"
import { describe, it } from "../../support/effectTest.js"
import { call, deploy, policy, reportSeen, seen, userText } from "./fixtures.js"
import { onEveryStore, type Stores } from "./stores.js"

const Tools = Toolkit.make(
  Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String }),
  Tool.make("deploy", { parameters: { env: Schema.String, version: Schema.String }, success: Schema.String }),
  Tool.make("drop_database", { parameters: { name: Schema.String }, success: Schema.String }),
  Tool.make("flaky", { parameters: { path: Schema.String }, success: Schema.String, failure: Schema.String })
)

const agent = AgentLoop.make({ toolkit: Tools })
const session = { sessionKey: ToolCall.SessionKey.make("s-1"), agentId: "release-bot" }

const world = (stores: Stores, script: ReadonlyArray<ScriptedModel.Step>) => {
  const ran: Array<string> = []
  const layer = Layer.mergeAll(
    Tools.toLayer({
      read_file: ({ path }) => Effect.sync(() => (ran.push(`read_file ${path}`), `contents of ${path}`)),
      deploy: ({ env }) => Effect.sync(() => (ran.push(`deploy ${env}`), `deployed to ${env}`)),
      drop_database: ({ name }) => Effect.sync(() => (ran.push(`drop ${name}`), `dropped ${name}`)),
      flaky: ({ path }) => Effect.zipRight(Effect.sync(() => ran.push(`flaky ${path}`)), Effect.fail("disk on fire"))
    }),
    ScriptedModel.layer(script),
    Checkpoint.layerWithGate({ policy, sweepInterval: "30 seconds" }).pipe(Layer.provideMerge(stores()))
  )
  return { ran, layer }
}

const paused = (result: AgentLoop.Result) => {
  if (result._tag !== "Paused") throw new Error(`expected Paused, got ${result._tag}`)
  return result
}
const completed = (result: AgentLoop.Result) => {
  if (result._tag !== "Completed") throw new Error(`expected Completed, got ${result._tag}`)
  return result
}

/** Every request of the session that is still pending has a checkpoint that waits for it. */
const pendingWithoutCheckpoint = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const checkpoints = yield* Checkpoint.Checkpoints
  const pending = yield* gate.pending({ sessionKey: session.sessionKey })
  const orphans = yield* Effect.filter(pending, (request) =>
    checkpoints.find(request.requestId).pipe(
      Effect.as(false),
      Effect.catchTag("CheckpointNotFound", () => Effect.succeed(true))
    ))
  return orphans.map((request) => String(request.toolCall.id))
})

const reusedResult = (id: string, name: string) => ({
  id,
  name,
  isFailure: true,
  result: expect.objectContaining({
    denied: true,
    outcome: "refused",
    message: expect.stringContaining(`tool-call id ${id} was already used in this session`)
  })
})

const suite = (name: string, stores: Stores) =>
  describe(`AgentLoop tool-call ids (${name})`, () => {
    it.scoped("a turn that repeats a call id is refused whole (MalformedOutput): nothing asked, nothing run", () => {
      const { layer, ran } = world(stores, [
        { toolCalls: [deploy("c1", "production"), call("c2", "read_file", { path: "a" }), deploy("c1", "staging")] },
        reportSeen
      ])
      return Effect.gen(function*() {
        const store = yield* ApprovalStore.ApprovalStore
        const error = yield* Effect.flip(agent.run("ship it", session))
        expect(error).toMatchObject({
          _tag: "MalformedOutput",
          module: "AgentLoop",
          description: expect.stringContaining("repeats tool-call id(s) c1")
        })
        expect(ran).toEqual([])
        expect(yield* (yield* ToolGate.ToolGate).pending({ sessionKey: session.sessionKey })).toEqual([])
        expect(yield* store.events({ sessionKey: session.sessionKey })).toEqual([])
      }).pipe(Effect.provide(layer))
    })

    it.scoped("a turn whose handler fails after a call asked for approval leaves no request without its checkpoint", () => {
      const { layer, ran } = world(stores, [
        { toolCalls: [deploy("c1", "production"), call("c2", "flaky", { path: "a" })] },
        reportSeen
      ])
      return Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const store = yield* ApprovalStore.ApprovalStore
        const error = yield* Effect.flip(agent.run("ship it", session))
        expect(error).toBe("disk on fire")
        expect(ran).toEqual(["flaky a"])
        expect(yield* pendingWithoutCheckpoint).toEqual([])
        // the request was denied through the gate, audited, saying why
        const resolved = (yield* store.events({ sessionKey: session.sessionKey })).filter((event) =>
          event.type === "approval.resolved"
        )
        expect(resolved).toHaveLength(1)
        expect(resolved[0]).toMatchObject({ toolCallId: "c1", outcome: "denied", actor: "@tool-gate/ai/AgentLoop" })
        const request = yield* gate.getRequest(ApprovalRequest.RequestId.make(resolved[0]!.requestId!))
        expect(request).toMatchObject({ status: "denied" })
        expect(request.resolution?.reason).toContain("the agent's turn failed")
      }).pipe(Effect.provide(layer))
    })

    it.scoped("a resumed conversation whose next turn repeats the executed call's id completes; the model reads why it did not run", () => {
      const { layer, ran } = world(stores, [
        { toolCalls: [deploy("c1", "production")] },
        // same call, same id: approved once and already run
        { toolCalls: [deploy("c1", "production"), call("c2", "read_file", { path: "a" })] },
        reportSeen
      ])
      return Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const { requests, token } = paused(yield* agent.run("ship it", session))
        yield* gate.respond(requests[0]!.requestId, { decision: "approve_once" })
        const results = seen(completed(yield* agent.resume(token)).text)
        expect(results).toEqual([
          reusedResult("c1", "deploy"),
          { id: "c2", name: "read_file", isFailure: false, result: "contents of a" }
        ])
        expect(ran).toEqual(["deploy production", "read_file a"])
        expect(yield* Effect.flip(agent.resume(token))).toMatchObject({ _tag: "AlreadyResumed" })
      }).pipe(Effect.provide(layer))
    })

    it.scoped("a resumed conversation whose next turn uses the resumed call's id for another call completes", () => {
      const { layer, ran } = world(stores, [
        { toolCalls: [deploy("c1", "production")] },
        { toolCalls: [call("c1", "read_file", { path: "a" })] },
        reportSeen
      ])
      return Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const { requests, token } = paused(yield* agent.run("ship it", session))
        yield* gate.respond(requests[0]!.requestId, { decision: "approve_once" })
        expect(seen(completed(yield* agent.resume(token)).text)).toEqual([reusedResult("c1", "read_file")])
        expect(ran).toEqual(["deploy production"])
      }).pipe(Effect.provide(layer))
    })

    it.scoped("in run too: a later turn reusing an id for another call gets a failed result and the loop goes on", () => {
      const { layer, ran } = world(stores, [
        { toolCalls: [call("c1", "read_file", { path: "a" })] },
        { toolCalls: [call("c1", "read_file", { path: "b" })] },
        reportSeen
      ])
      return Effect.gen(function*() {
        expect(seen(completed(yield* agent.run("read", session)).text)).toEqual([reusedResult("c1", "read_file")])
        expect(ran).toEqual(["read_file a"])
      }).pipe(Effect.provide(layer))
    })

    it.scoped("a second conversation whose turn repeats a call id pending in the first's checkpoint: that call is refused, the rest goes on, and the first still resumes", () => {
      const { layer, ran } = world(stores, [
        (prompt) =>
          userText(prompt) === "second"
            ? { toolCalls: [deploy("c1", "production"), call("c2", "read_file", { path: "a" })] }
            : { toolCalls: [deploy("c1", "production")] },
        reportSeen
      ])
      return Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const first = paused(yield* agent.run("first", session))
        expect(seen(completed(yield* agent.run("second", session)).text)).toEqual([
          reusedResult("c1", "deploy"),
          { id: "c2", name: "read_file", isFailure: false, result: "contents of a" }
        ])
        expect(ran).toEqual(["read_file a"])
        // the first conversation's request is untouched (not denied as an orphan) and resumes
        yield* gate.respond(first.requests[0]!.requestId, { decision: "approve_once" })
        expect(seen(completed(yield* agent.resume(first.token)).text)).toEqual([
          { id: "c1", name: "deploy", isFailure: false, result: "deployed to production" }
        ])
        expect(ran).toEqual(["read_file a", "deploy production"])
      }).pipe(Effect.provide(layer))
    })
  })

onEveryStore("AgentLoop tool-call ids", suite)
