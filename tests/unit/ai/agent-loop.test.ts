import { AgentLoop } from "@tool-gate/ai"
import { type ApprovalRequest, ApprovalStore, ToolCall, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Deferred, Effect, Exit, Fiber, TestClock } from "effect"
import { describe, it } from "../../support/effectTest.js"
import { call, deploy, policy, reportSeen, seen, Tools, userText, world } from "./fixtures.js"

const agent = AgentLoop.make({ toolkit: Tools })
const session = { sessionKey: "s-1", agentId: "release-bot", intentId: "ship-1.2.0" }

const completed = (result: AgentLoop.Result) => {
  if (result._tag !== "Completed") throw new Error(`expected Completed, got ${result._tag}`)
  return result
}
const paused = (result: AgentLoop.Result) => {
  if (result._tag !== "Paused") throw new Error(`expected Paused, got ${result._tag}`)
  return result
}

/** A turn with one deploy call, paused, answered with `answer`, resumed: the result the model read back. */
const answeredDeploy = (answer: typeof ApprovalRequest.ApprovalResponse.Encoded) => {
  const { layer, ran } = world([{ toolCalls: [deploy("c1", "production")] }, reportSeen])
  const resumed = Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const { requests, token } = paused(yield* agent.run("ship it", session))
    yield* gate.respond(requests[0]!.requestId, answer)
    const [result] = seen(completed(yield* agent.resume(token)).text)
    return { result: result!, token }
  })
  return { layer, ran, resumed }
}

describe("AgentLoop over a gated toolkit", () => {
  it.scoped("an allowed call runs and the model reads its result", () => {
    const { layer, ran } = world([{ toolCalls: [call("c1", "read_file", { path: "README.md" })] }, reportSeen])
    return Effect.gen(function*() {
      const result = completed(yield* agent.run("read the readme", session))
      expect(seen(result.text)).toEqual([
        { id: "c1", name: "read_file", isFailure: false, result: "contents of README.md" }
      ])
      expect(result.turns).toBe(2)
      expect(ran).toEqual([{ tool: "read_file", params: { path: "README.md" } }])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a call denied by policy never runs; the model reads the policy's reason", () => {
    const { layer, ran } = world([{ toolCalls: [call("c1", "drop_database", { name: "staging" })] }, reportSeen])
    return Effect.gen(function*() {
      const [result] = seen(completed(yield* agent.run("clean up", session)).text)
      expect(result).toMatchObject({ id: "c1", name: "drop_database", isFailure: true })
      expect(result!.result).toMatchObject({
        denied: true,
        outcome: "policy",
        reason: "Databases are dropped by a person."
      })
      expect(result!.result.message).toContain("denied by policy rule no-drops")
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a requireApproval call pauses the loop: a pause signal with tool, intent and agent, the policy's TTL, a checkpoint", () => {
    const { layer, ran } = world([{ toolCalls: [deploy("c1", "production")] }, reportSeen])
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const result = paused(yield* agent.run("ship it", session))
      expect(result.token).toMatch(/^cp_/)
      expect(result.requests).toHaveLength(1)
      const [signal] = result.requests
      // The loop hands the session's agent and intent to the gate, keyed by the model's call id.
      const { agentId, intentId, toolCallId, toolId } = signal!.metadata
      expect([toolId, toolCallId, agentId, intentId, signal!.ttlMs]).toEqual([
        "deploy",
        "c1",
        "release-bot",
        "ship-1.2.0",
        policy.ttlMs
      ])
      const [request] = yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("s-1") })
      expect(request!.requestId).toBe(signal!.requestId)
      expect(request!.expiresAt - request!.createdAt).toBe(90_000)
      expect(ran).toEqual([])
      // Not answered yet: resuming is refused and the checkpoint stays.
      const early = yield* Effect.exit(agent.resume(result.token))
      expect(early).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "RequestPending" } } })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("approved: resume runs the call once and the loop completes; resuming twice is refused", () => {
    const { layer, ran, resumed } = answeredDeploy({ decision: "approve_once", respondedBy: "ana" })
    return Effect.gen(function*() {
      const { result, token } = yield* resumed
      expect(result).toEqual({ id: "c1", name: "deploy", isFailure: false, result: "deployed 1.2.0 to production" })
      const again = yield* Effect.exit(agent.resume(token))
      expect(again).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "AlreadyResumed" } } })
      expect(ran).toEqual([{ tool: "deploy", params: { env: "production", version: "1.2.0" } }])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a resume that dies after the calls ran is retried after its lease with their results; nothing runs twice", () => {
    let crashes = 1
    const { layer, ran } = world([{ toolCalls: [deploy("c1", "production")] }, (prompt) => {
      // the model's reply after the deploy: the first attempt dies here, as a process would
      if (crashes-- > 0) throw new Error("process died")
      return reportSeen(prompt)
    }])
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const { requests, token } = paused(yield* agent.run("ship it", session))
      yield* gate.respond(requests[0]!.requestId, { decision: "approve_once" })
      const died = yield* Effect.exit(agent.resume(token, { owner: "worker-a", lease: "1 minute" }))
      expect(died).toMatchObject({ _tag: "Failure", cause: { _tag: "Die" } })
      expect(ran).toHaveLength(1)
      // Not completed: while worker-a's lease runs, others are told who holds it; after it, one takes over.
      const waiting = yield* Effect.exit(agent.resume(token, { owner: "worker-b" }))
      expect(waiting).toMatchObject({
        _tag: "Failure",
        cause: { error: { _tag: "CheckpointClaimed", owner: "worker-a" } }
      })
      yield* TestClock.adjust("61 seconds")
      // the turn's results were recorded before the model went on: the retry reads the deploy's
      const [result] = seen(completed(yield* agent.resume(token, { owner: "worker-b" })).text)
      expect(result).toEqual({ id: "c1", name: "deploy", isFailure: false, result: "deployed 1.2.0 to production" })
      expect(ran).toHaveLength(1)
      const again = yield* Effect.exit(agent.resume(token, { owner: "worker-b" }))
      expect(again).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "AlreadyResumed" } } })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a resumed turn that outlasts its lease renews it: no other owner takes it over meanwhile", () => {
    const release = Effect.runSync(Deferred.make<void>())
    const { layer, ran } = world([{ toolCalls: [deploy("c1", "production")] }, reportSeen], {
      deployTakes: Deferred.await(release)
    })
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const { requests, token } = paused(yield* agent.run("ship it", session))
      yield* gate.respond(requests[0]!.requestId, { decision: "approve_once" })
      const slow = yield* Effect.fork(agent.resume(token, { owner: "worker-a", lease: "1 minute" }))
      // five leases long, the deploy still running
      for (let i = 0; i < 30; i++) yield* TestClock.adjust("10 seconds")
      const other = yield* Effect.exit(agent.resume(token, { owner: "worker-b" }))
      expect(other).toMatchObject({
        _tag: "Failure",
        cause: { error: { _tag: "CheckpointClaimed", owner: "worker-a" } }
      })
      yield* Deferred.succeed(release, undefined)
      const [result] = seen(completed(yield* Fiber.join(slow)).text)
      expect(result).toEqual({ id: "c1", name: "deploy", isFailure: false, result: "deployed 1.2.0 to production" })
      expect(ran).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a human's denial reaches the model with the human's reason; the tool never runs", () => {
    const { layer, ran, resumed } = answeredDeploy({ decision: "deny", reason: "Freeze until Monday." })
    return Effect.gen(function*() {
      const { result } = yield* resumed
      expect(result).toMatchObject({ id: "c1", isFailure: true })
      expect(result.result).toMatchObject({ denied: true, outcome: "denied", reason: "Freeze until Monday." })
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("edited arguments reach the tool", () => {
    const { layer, ran, resumed } = answeredDeploy({
      decision: "approve_once",
      editedArgs: { env: "staging", version: "1.2.0" }
    })
    return Effect.gen(function*() {
      expect((yield* resumed).result.result).toBe("deployed 1.2.0 to staging")
      expect(ran).toEqual([{ tool: "deploy", params: { env: "staging", version: "1.2.0" } }])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("an edit that does not fit the tool's parameters is refused; the model reads why and the loop goes on", () => {
    const { layer, ran, resumed } = answeredDeploy({
      decision: "approve_once",
      editedArgs: { env: 42, version: "1.2.0" }
    })
    return Effect.gen(function*() {
      const { result } = yield* resumed
      expect(result.result).toMatchObject({ denied: true, outcome: "denied" })
      expect(result.result.reason).toStartWith(
        "the approver's edited arguments do not fit the tool: env: Expected string"
      )
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("an expired request resumes as expired: the model reads that approval timed out", () => {
    const { layer, ran } = world([{ toolCalls: [deploy("c1", "production")] }, reportSeen])
    return Effect.gen(function*() {
      const { token } = paused(yield* agent.run("ship it", session))
      yield* TestClock.adjust("91 seconds")
      const [result] = seen(completed(yield* agent.resume(token)).text)
      expect(result!.result).toMatchObject({ denied: true, outcome: "expired" })
      expect(result!.result.message).toContain("approval expired (timeout means deny)")
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("several calls in one turn: each its own request; partial answers stay pending; all answered, the turn resumes", () => {
    const { layer, ran } = world([
      {
        toolCalls: [
          deploy("c-prod", "production"),
          call("c-read", "read_file", { path: "CHANGELOG.md" }),
          deploy("c-eu", "production-eu"),
          call("c-drop", "drop_database", { name: "staging" })
        ]
      },
      reportSeen
    ])
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const { requests, token } = paused(yield* agent.run("ship everywhere", session))
      expect(requests.map((r) => r.metadata.toolCallId)).toEqual(["c-prod", "c-eu"])
      expect(new Set(requests.map((r) => r.requestId)).size).toBe(2)
      // The allowed call ran before the pause; the denied one never will.
      expect(ran).toEqual([{ tool: "read_file", params: { path: "CHANGELOG.md" } }])

      // Answer the second request only: the turn stays paused, the checkpoint resumable.
      yield* gate.respond(requests[1]!.requestId, { decision: "deny", reason: "EU is frozen." })
      const partial = yield* Effect.exit(agent.resume(token))
      expect(partial).toMatchObject({
        _tag: "Failure",
        cause: { error: { _tag: "RequestPending", requestId: requests[0]!.requestId } }
      })
      expect((yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("s-1") })).map((r) => String(r.toolCall.id)))
        .toEqual(["c-prod"])

      yield* gate.respond(requests[0]!.requestId, { decision: "approve_once" })
      const results = seen(completed(yield* agent.resume(token)).text)
      // The model reads every result in the order it made the calls.
      expect(results.map((r) => [r.id, r.isFailure])).toEqual([
        ["c-prod", false],
        ["c-read", false],
        ["c-eu", true],
        ["c-drop", true]
      ])
      expect(results[2]!.result.reason).toBe("EU is frozen.")
      expect(ran.map((r) => r.tool)).toEqual(["read_file", "deploy"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("approve for the session: the same call in a new conversation of that session runs unasked; another session asks", () => {
    // The call id comes from the user's message, as a real model's ids differ between conversations.
    const { layer, ran } = world([
      (prompt) => ({ toolCalls: [deploy(`call-${userText(prompt)}`, "production")] }),
      reportSeen
    ])
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      const first = paused(yield* agent.run("one", session))
      yield* gate.respond(first.requests[0]!.requestId, { decision: "approve_session", respondedBy: "ana" })
      completed(yield* agent.resume(first.token))

      const second = completed(yield* agent.run("two", session))
      expect(seen(second.text)[0]!.result).toBe("deployed 1.2.0 to production")
      expect(ran).toHaveLength(2)
      const decisions = (yield* store.events({ sessionKey: "s-1" })).filter((e) => e.type === "decision")
      expect(decisions.map((e) => [e.toolCallId, e.outcome, e.via])).toEqual<unknown>([[
        "call-two",
        "allow",
        "sessionApproval"
      ]])

      const elsewhere = paused(yield* agent.run("three", { ...session, sessionKey: "s-2" }))
      expect(elsewhere.requests[0]!.metadata).toMatchObject({ sessionKey: "s-2", toolCallId: "call-three" })
      expect(ran).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a model that never stops calling tools ends with MaxTurnsExceeded", () => {
    const readForever = { toolCalls: [call("c", "read_file", { path: "a" })] }
    const { layer } = world([readForever, readForever, readForever])
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(AgentLoop.make({ toolkit: Tools, maxTurns: 2 }).run("loop", session))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(exit).toMatchObject({ cause: { error: { _tag: "MaxTurnsExceeded", maxTurns: 2 } } })
    }).pipe(Effect.provide(layer))
  })
})
