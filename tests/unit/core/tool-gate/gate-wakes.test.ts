/**
 * `gate` waits on its call (session and tool-call id), registered before the `authorize` that
 * pauses it (the policy asks a human for it) and before each later one, so it reads nothing
 * before it waits, and a wake only tells it to authorize again: between an answer's commit and the
 * run it reads the call's record once and spends the approval, and reads no request. What the call comes to is
 * always what the store holds: an event that looks like an answer (another session's call with the
 * same id, or an event written into the log by hand) never runs a call that is still pending, and
 * the store refuses to append one.
 */
import { SqlClient } from "@effect/sql"
import { ApprovalStore, AuditEvent, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Either, Fiber, type Layer, TestClock } from "effect"
import { waitForPending } from "../../../contract/toolGateSuite.js"
import { describe, it } from "../../../support/effectTest.js"
import { sqliteStore } from "../../../support/sqlStores.js"

const policy = Policy.unsafeMake({ requireApproval: [{ tool: "bash", ttlMs: 10_000 }] })

const bash = (id: string, sessionKey = "s1") => ({ id, name: "bash", sessionKey, args: { command: `make ${id}` } })

/** The store with its reads of requests and records, and its spends, counted. */
const counted = (store: ApprovalStore.ApprovalStore["Type"]) => {
  const calls = { getRequest: 0, findRecorded: 0, findByToolCall: 0, consume: 0 }
  const counting: ApprovalStore.ApprovalStore["Type"] = {
    ...store,
    getRequest: (requestId) => Effect.suspend(() => (calls.getRequest++, store.getRequest(requestId))),
    findByToolCall: (sessionKey, toolCallId) =>
      Effect.suspend(() => (calls.findByToolCall++, store.findByToolCall(sessionKey, toolCallId))),
    findRecorded: (sessionKey, toolCallId) =>
      Effect.suspend(() => (calls.findRecorded++, store.findRecorded(sessionKey, toolCallId))),
    consume: (requestId, at, event) => Effect.suspend(() => (calls.consume++, store.consume(requestId, at, event)))
  }
  return { calls, store: counting }
}

/** `n` turns of the event loop, each after the scheduler's own. */
const turns = (n: number) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < n; turn++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

/** Turns of the scheduler (and of the event loop, where a SQL store's work runs) until `done()`. */
const until = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 10_000 && !done(); turn++) {
      yield* turn % 10 === 9 ? Effect.promise(() => new Promise((resolve) => setImmediate(resolve))) : Effect.yieldNow()
    }
    expect(done()).toBe(true)
  })

const stores: ReadonlyArray<readonly [string, () => Layer.Layer<ApprovalStore.ApprovalStore, unknown>]> = [
  ["memory", () => ApprovalStore.layerMemory],
  ["SQLite", () => sqliteStore()]
]

for (const [name, storeLayer] of stores) {
  describe(`gate wakes (${name})`, () => {
    const gateOver = Effect.gen(function*() {
      const { calls, store } = counted(yield* ApprovalStore.ApprovalStore)
      const gate = yield* ToolGate.make({ policy }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))
      // the answers come from another gate on the store, as from a server: an answer the waiting
      // gate committed itself is taken as given, with no read (asked-calls.test.ts)
      const responder = yield* ToolGate.make({ policy })
      return { calls, gate, responder, store }
    })

    it.scoped("between the answer and the run: one read of the call's record and the spend, no read of the request", () =>
      Effect.gen(function*() {
        const { calls, gate, responder } = yield* gateOver
        let runs = 0
        const fiber = yield* Effect.fork(gate.gate(bash("c1"), () => Effect.sync(() => runs++)))
        const [pending] = yield* waitForPending(gate, 1)
        // the wake-up registered, then the pause (the request created: its insert finds any record
        // the call has), then the wait: no read before it (an answer after the pause still wakes it)
        yield* turns(20)
        expect(calls.findRecorded).toBe(0)
        expect(fiber.unsafePoll()).toBeNull()
        yield* responder.respond(pending!.requestId, { decision: "approve_once", respondedBy: "ana" })
        yield* Fiber.join(fiber)
        expect(runs).toBe(1)
        expect(calls).toEqual({ getRequest: 0, findRecorded: 1, findByToolCall: 0, consume: 1 })
      }).pipe(Effect.provide(storeLayer())))

    it.scoped("an answer to the same call id in another session wakes nothing and runs nothing", () =>
      Effect.gen(function*() {
        const { calls, gate, responder } = yield* gateOver
        const ran: Array<string> = []
        const mine = yield* Effect.fork(gate.gate(bash("c1", "s1"), () => Effect.sync(() => ran.push("s1"))))
        const theirs = yield* Effect.fork(gate.gate(bash("c1", "s2"), () => Effect.sync(() => ran.push("s2"))))
        const pending = yield* waitForPending(gate, 2)
        // both waiting: each registered, then paused, with no read
        yield* turns(20)
        const reads = calls.findRecorded
        expect(reads).toBe(0)
        const other = pending.find((request) => request.toolCall.sessionKey === "s2")!
        yield* responder.respond(other.requestId, { decision: "approve_once" })
        yield* Fiber.join(theirs)
        expect(ran).toEqual(["s2"])
        // the wake that ran s2 read s2's record once; s1 was not woken, so it read nothing
        expect(calls.findRecorded).toBe(reads + 1)
        expect(mine.unsafePoll()).toBeNull()
        const own = pending.find((request) => request.toolCall.sessionKey === "s1")!
        expect((yield* gate.getRequest(own.requestId)).status).toBe("pending")
        yield* responder.respond(own.requestId, { decision: "deny", reason: "not now" })
        const denied = yield* Effect.either(Fiber.join(mine))
        expect(Either.isLeft(denied) && denied.left).toMatchObject({ _tag: "ToolDenied", outcome: "denied" })
        expect(ran).toEqual(["s2"])
      }).pipe(Effect.provide(storeLayer())))

    it.scoped("an answer cannot be appended to the log: the store refuses it, writes nothing, and the gate waits on", () =>
      Effect.gen(function*() {
        const { calls, gate, store } = yield* gateOver
        let runs = 0
        const fiber = yield* Effect.fork(gate.gate(bash("c1"), () => Effect.sync(() => runs++)))
        const [pending] = yield* waitForPending(gate, 1)
        const last = yield* store.lastSeq
        // an `approval.resolved` that no answer committed
        const forged = yield* Effect.either(store.append([
          AuditEvent.approvalResolved(pending!, {
            status: "approved",
            decision: "approve_once",
            respondedBy: "mallory",
            resolvedAt: yield* TestClock.currentTimeMillis
          })
        ]))
        expect(Either.isLeft(forged) && forged.left._tag).toBe("PersistenceError")
        expect(yield* store.lastSeq).toBe(last)
        expect(fiber.unsafePoll()).toBeNull()
        expect((yield* gate.getRequest(pending!.requestId)).status).toBe("pending")
        // a real answer then runs it, once
        yield* gate.respond(pending!.requestId, { decision: "approve_once", respondedBy: "ana" })
        yield* Fiber.join(fiber)
        expect(runs).toBe(1)
        expect(calls.consume).toBe(1)
      }).pipe(Effect.provide(storeLayer())))

    it.scoped("a waiting gate waits on to a deadline an operator extends, then expires (timeout means deny)", () =>
      Effect.gen(function*() {
        const { gate } = yield* gateOver
        let runs = 0
        const fiber = yield* Effect.fork(gate.gate(bash("c1"), () => Effect.sync(() => runs++)))
        const [pending] = yield* waitForPending(gate, 1)
        yield* TestClock.adjust("6 seconds")
        // an operator gives it 20 more seconds: the gate waits on past its first deadline, to the new one
        yield* gate.extend(pending!.requestId, "20 seconds")
        yield* TestClock.adjust("6 seconds")
        expect(fiber.unsafePoll()).toBeNull()
        yield* TestClock.adjust("15 seconds")
        const expired = yield* Effect.either(Fiber.join(fiber))
        expect(Either.isLeft(expired) && expired.left).toMatchObject({ _tag: "ToolDenied", outcome: "expired" })
        expect(runs).toBe(0)
      }).pipe(Effect.provide(storeLayer())))
  })
}

describe("gate wakes (SQLite, the log written by hand)", () => {
  it.scoped("a forged answer written into the log wakes the waiting gate, which reads its record, finds it pending and waits on", () =>
    Effect.gen(function*() {
      const { calls, store } = counted(yield* ApprovalStore.ApprovalStore)
      const gate = yield* ToolGate.make({ policy }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))
      const sql = yield* SqlClient.SqlClient
      let runs = 0
      const fiber = yield* Effect.fork(gate.gate(bash("c1"), () => Effect.sync(() => runs++)))
      const [pending] = yield* waitForPending(gate, 1)
      yield* turns(20)
      const before = calls.findRecorded
      expect(before).toBe(0)
      // what someone who can write the database file could add: the request's event made an answer
      yield* sql`INSERT INTO toolgate_events
        (at, type, outcome, session_key, tool_call_id, tool_name, request_id, event, prev_hash, hash)
        SELECT at, 'approval.resolved', 'approved', session_key, tool_call_id, tool_name, request_id,
          json_set(json_remove(event, '$.expiresAt'), '$.type', 'approval.resolved', '$.outcome', 'approved',
            '$.decision', 'approve_once', '$.actor', 'mallory', '$.elapsedMs', 0),
          hash, 'forged'
        FROM toolgate_events WHERE type = 'approval.requested'`
      // the store's next commit hints the log to the tailer, which reads the forged event with it
      yield* gate.evaluate(bash("other"))
      yield* until(() => calls.findRecorded > before)
      yield* turns(20)
      expect(calls.findRecorded).toBe(before + 1)
      expect(calls.consume).toBe(0)
      expect(fiber.unsafePoll()).toBeNull()
      expect(runs).toBe(0)
      expect((yield* gate.getRequest(pending!.requestId)).status).toBe("pending")
      yield* gate.respond(pending!.requestId, { decision: "approve_once", respondedBy: "ana" })
      yield* Fiber.join(fiber)
      expect(runs).toBe(1)
    }).pipe(Effect.provide(sqliteStore())))
})
