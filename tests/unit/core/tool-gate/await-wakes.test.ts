/**
 * `awaitDecision` settles on its answer's `approval.resolved` without reading the request again:
 * the event carries the whole resolution, and what it returns is the request the store holds.
 * An answer with edited arguments (whose event keeps their canonical text, the row the approver's)
 * is read from the row. A warning of expiry that comes while it waits is in what it returns.
 */
import type { ApprovalRequest } from "@tool-gate/core"
import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Exit, Fiber, type Layer, Scope, Supervisor, TestClock } from "effect"
import { waitForPending } from "../../../contract/toolGateSuite.js"
import { describe, it } from "../../../support/effectTest.js"
import { sqliteStore } from "../../../support/sqlStores.js"

const policy = Policy.unsafeMake({ requireApproval: [{ tool: "bash", ttlMs: 10_000 }] })

const bash = (id: string) => ({ id, name: "bash", sessionKey: "s1", args: { command: `make ${id}`, n: 1 } })

/** `turns` turns of the event loop, or fewer when `done()`. */
const until = (done: () => boolean, turns = 10_000) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < turns && !done(); turn++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

/** The store with its reads of requests counted. */
const counted = (store: ApprovalStore.ApprovalStore["Type"]) => {
  const calls = { getRequest: 0 }
  const counting: ApprovalStore.ApprovalStore["Type"] = {
    ...store,
    getRequest: (requestId) => Effect.suspend(() => (calls.getRequest++, store.getRequest(requestId)))
  }
  return { calls, store: counting }
}

const answers: ReadonlyArray<readonly [string, ApprovalRequest.ApprovalResponse]> = [
  ["approve_once", { decision: "approve_once", respondedBy: "ana" }],
  ["approve_once with a reason, from no one named", { decision: "approve_once", reason: "fine" }],
  ["approve_session (exact, with a lifetime)", {
    decision: "approve_session",
    respondedBy: "ana",
    sessionTtlMs: 60_000
  }],
  ["approve_session (tool-wide)", { decision: "approve_session", scope: "tool" }],
  ["deny with a reason", { decision: "deny", respondedBy: "bo", reason: "not on a Friday" }],
  ["deny", { decision: "deny" }]
]

const stores: ReadonlyArray<readonly [string, () => Layer.Layer<ApprovalStore.ApprovalStore, unknown>]> = [
  ["memory", () => ApprovalStore.layerMemory],
  ["SQLite", () => sqliteStore()]
]

for (const [name, storeLayer] of stores) {
  describe(`awaitDecision wakes (${name})`, () => {
    const gateOver = (options: Partial<ToolGate.Options> = {}) =>
      Effect.gen(function*() {
        const { calls, store } = counted(yield* ApprovalStore.ApprovalStore)
        const gate = yield* ToolGate.make({ policy, ...options }).pipe(
          Effect.provideService(ApprovalStore.ApprovalStore, store)
        )
        return { calls, gate }
      })

    /** Waits on a fresh request, answers it with `response`; what the wait returned, and the reads it took. */
    const answered = (id: string, response: ApprovalRequest.ApprovalResponse) =>
      Effect.gen(function*() {
        const { calls, gate } = yield* gateOver()
        yield* gate.authorize(bash(id))
        const [pending] = yield* waitForPending(gate, 1)
        const waiting = yield* Effect.fork(gate.awaitDecision(pending!.requestId))
        // its one read, before it waits
        while (calls.getRequest < 1) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        const respondedWith = yield* gate.respond(pending!.requestId, response)
        const settled = yield* Fiber.join(waiting)
        const reads = calls.getRequest
        return { reads, respondedWith, settled, stored: yield* gate.getRequest(pending!.requestId) }
      })

    for (const [label, response] of answers) {
      it.scoped(`${label}: settled from the answer's event, no read after the wake, as the store holds it`, () =>
        Effect.gen(function*() {
          const { reads, respondedWith, settled, stored } = yield* answered("c1", response)
          expect(reads).toBe(1)
          expect(settled).toEqual(stored)
          expect(settled).toEqual(respondedWith)
        }).pipe(Effect.provide(storeLayer())))
    }

    it.scoped("the waits share one deadline timer, which ends with the gate: for awaitDecision and for gate", () =>
      Effect.gen(function*() {
        const gateScope = yield* Scope.make()
        const { gate } = yield* Scope.extend(gateOver(), gateScope)
        const supervisor = yield* Supervisor.track
        /** the fibers the supervised waits started that are still there */
        const left = Effect.map(supervisor.value, (fibers) => fibers.map((fiber) => fiber.id().id).sort())
        const waitBoth = (n: number) =>
          Effect.gen(function*() {
            yield* gate.authorize(bash(`c${n}`))
            const [first] = yield* waitForPending(gate, 1)
            const waiting = yield* Effect.fork(Effect.supervised(gate.awaitDecision(first!.requestId), supervisor))
            const gated = yield* Effect.fork(
              Effect.supervised(gate.gate(bash(`d${n}`), () => Effect.void), supervisor)
            )
            yield* waitForPending(gate, 2)
            yield* until(() => false, 20)
            for (const request of yield* gate.pending()) {
              yield* gate.respond(request.requestId, { decision: "approve_once" })
            }
            yield* Fiber.join(waiting)
            yield* Fiber.join(gated)
            yield* until(() => false, 20)
            return yield* left
          })
        const after = [yield* waitBoth(1), yield* waitBoth(2), yield* waitBoth(3)]
        // the timer (and, on the test clock, the fiber that warns of a sleep nobody adjusts), the same each time
        expect(after[0]!.length).toBeGreaterThan(0)
        expect(after).toEqual([after[0]!, after[0]!, after[0]!])
        yield* Scope.close(gateScope, Exit.void)
        yield* until(() => false, 20)
        expect(yield* left).toEqual([])
      }).pipe(Effect.provide(storeLayer())))

    it.scoped("an approval with edited arguments: read from the row after the wake", () =>
      Effect.gen(function*() {
        const editedArgs = { n: 2, command: "make c1 --dry-run" }
        const { reads, settled, stored } = yield* answered("c1", { decision: "approve_once", editedArgs })
        expect(reads).toBe(2)
        expect(settled).toEqual(stored)
        expect(settled.resolution?.editedArgs).toEqual(editedArgs)
      }).pipe(Effect.provide(storeLayer())))

    it.scoped("warned of its expiry while waited on, then answered: the warning is in what it returns", () =>
      Effect.gen(function*() {
        const { gate } = yield* gateOver({ warnBefore: "5 seconds", sweepInterval: "1 second" })
        yield* gate.authorize(bash("c1"))
        const [pending] = yield* waitForPending(gate, 1)
        const waiting = yield* Effect.fork(gate.awaitDecision(pending!.requestId))
        yield* TestClock.adjust("6 seconds")
        while ((yield* gate.getRequest(pending!.requestId)).warnedAt === undefined) {
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        }
        yield* gate.respond(pending!.requestId, { decision: "approve_once" })
        const settled = yield* Fiber.join(waiting)
        expect(settled.warnedAt).toBeDefined()
        expect(settled).toEqual(yield* gate.getRequest(pending!.requestId))
      }).pipe(Effect.provide(storeLayer())))
  })
}
