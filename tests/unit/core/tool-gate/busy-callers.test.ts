/**
 * A fiber calling the gate in a loop does not hold up the others. On SQLite every store call
 * takes the client's semaphore, which resumes the caller at once; Effect counts a fiber's steps
 * towards its yield from its last resumption, so such a loop never yielded: the log tailer did not
 * run until it ended, so an auditor heard nothing of its decisions and the calls it answered did
 * not resume. The store's batcher now lets the event loop turn every few lone calls
 * (`internal/sqlBatcher.ts`), and the SQL checkpoint store likewise.
 * (The memory store resumes nothing at once: its callers yield by Effect's own count, after a few
 * hundred calls.)
 */
import { CheckpointStore, Policy, SqlCheckpointStore, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Fiber, Layer, Stream } from "effect"
import { CALLS_BEFORE_TURN } from "../../../../packages/core/src/internal/eventLoopTurn.js"
import { waitForPending } from "../../../contract/toolGateSuite.js"
import { describe, it } from "../../../support/effectTest.js"
import { watchLoop } from "../../../support/loopWatch.js"
import { sqliteStore } from "../../../support/sqlStores.js"

const policy = Policy.unsafeMake({ allow: ["read"], requireApproval: [{ tool: "bash", ttlMs: 600_000 }] })

const CALLS = 100

/** Yields until `done()`, failing after many tries. */
const until = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 10_000 && !done(); turn++) yield* Effect.yieldNow()
    expect(done()).toBe(true)
  })

describe("busy callers (SQLite)", () => {
  const withGate = <A, E>(use: (gate: ToolGate.Service) => Effect.Effect<A, E>) =>
    Effect.flatMap(ToolGate.ToolGate, use).pipe(
      Effect.provide(ToolGate.layer({ policy }).pipe(Layer.provide(sqliteStore()), Layer.orDie)),
      Effect.orDie
    )

  it.live("an auditor following the audit stream hears of a loop's decisions while it loops", () =>
    withGate((gate) =>
      Effect.gen(function*() {
        let made = 0
        // how many calls the loop had made when each event reached the auditor
        const heard: Array<number> = []
        const auditor = yield* Effect.fork(
          Stream.runForEach(gate.auditLog(), () => Effect.sync(() => heard.push(made)))
        )
        // listening once it hears a call made before the loop
        yield* gate.evaluate({ id: "before", name: "read", sessionKey: "s" })
        yield* until(() => heard.length > 0)
        for (let i = 0; i < CALLS; i++) {
          yield* gate.evaluate({ id: `c${i}`, name: "read", sessionKey: "s" })
          made++
        }
        yield* until(() => heard.length === CALLS + 1)
        yield* Fiber.interrupt(auditor)
        // the loop's first decision was heard long before its last call
        expect(heard[1]!).toBeLessThan(CALLS / 2)
      })
    ))

  it.live("calls a looping responder answers resume while it goes on answering", () =>
    withGate((gate) =>
      Effect.gen(function*() {
        let answered = 0
        // how many answers the responder had given when each call ran
        const ran: Array<number> = []
        const waiting = yield* Effect.fork(Effect.forEach(
          Array.from({ length: CALLS }, (_, i) => ({ id: `b${i}`, name: "bash", sessionKey: "s" })),
          (call) => gate.gate(call, () => Effect.sync(() => ran.push(answered))),
          { concurrency: "unbounded", discard: true }
        ))
        const pending = yield* waitForPending(gate, CALLS)
        for (const request of pending) {
          yield* gate.respond(request.requestId, { decision: "approve_once", respondedBy: "responder" })
          answered++
        }
        yield* Fiber.join(waiting)
        expect(ran).toHaveLength(CALLS)
        // the first call answered ran while most answers were still to come
        expect(ran[0]!).toBeLessThan(CALLS / 2)
      })
    ))

  it.live("a loop of checkpoint calls lets the event loop turn (other fibers, timers)", () =>
    Effect.gen(function*() {
      const checkpoints = yield* CheckpointStore.CheckpointStore
      yield* checkpoints.save({ token: "t1", name: "turn", state: "{}", requestIds: ["r1"], createdAt: 0 })
      const watch = yield* watchLoop(CALLS)
      for (let i = 0; i < CALLS; i++) {
        yield* checkpoints.find({ token: "t1" })
        watch.made()
      }
      const { longest, timerAt } = yield* watch.end
      expect(longest).toBeLessThanOrEqual(CALLS_BEFORE_TURN)
      expect(timerAt).toBeGreaterThanOrEqual(0)
      expect(timerAt).toBeLessThan(CALLS)
    }).pipe(Effect.provide(SqlCheckpointStore.layer().pipe(Layer.provideMerge(sqliteStore()), Layer.orDie))))
})
