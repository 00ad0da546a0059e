/**
 * The audit fan-out's replays with few recent events kept (3): a client resuming after an event
 * older than them reads the store until they reach back far enough, then takes the rest from
 * them; one resuming among them, or past the head, reads nothing. Every client gets every event
 * after its start exactly once, in order, and then the live ones (SQLite file, the real gate).
 */
import { ApprovalStore, type AuditEvent, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Context, Effect, Exit, Fiber, Layer, Queue, Schedule, Scope } from "effect"
import { join } from "node:path"
import * as AuditFanout from "../../packages/server/src/internal/auditFanout.js"
import { describe, it } from "../support/effectTest.js"
import { tempDir } from "../support/sqlStores.js"

const policy = Policy.unsafeMake({})

/** A gate over a fresh SQLite file, and its store. */
const openGate = Effect.gen(function*() {
  const context = yield* Layer.build(ToolGateSqlite.layer({ filename: join(yield* tempDir, "fanout.db"), policy }))
  return { gate: Context.get(context, ToolGate.ToolGate), store: Context.get(context, ApprovalStore.ApprovalStore) }
})

/** `count` allowed decisions, an event each. */
const decideMany = (gate: ToolGate.ToolGate["Type"], count: number) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) => gate.evaluate({ id: `call-${Math.random()}-${i}`, name: "ls", sessionKey: "s1" }),
    { discard: true }
  )

/** The seqs in rendered batches. */
const seqsIn = (bytes: Uint8Array) =>
  new TextDecoder().decode(bytes).split(";").filter((batch) => batch !== "").flatMap((batch) =>
    batch.split(",").map(Number)
  )

/** Each batch as its seqs: `1,2,3;` */
const render: AuditFanout.Render = (events) => new TextEncoder().encode(`${events.map((e) => e.seq).join(",")};`)

describe("audit fan-out", () => {
  it.live("replays from the store, then from the recent events; each event once, in order", () =>
    Effect.gen(function*() {
      const { gate, store } = yield* openGate
      const decide = (count: number) =>
        Effect.forEach(
          Array.from({ length: count }, (_, i) => i),
          (i) => gate.evaluate({ id: `call-${Math.random()}-${i}`, name: "ls", sessionKey: "s1" }),
          { discard: true }
        )
      yield* decide(2)
      const fanout = yield* AuditFanout.make(gate, store, render, { recent: 3 })
      const through = (seq: number) =>
        Effect.retry(
          Effect.filterOrFail(Effect.sync(() => fanout.position()?.through), (through) => through === seq),
          Schedule.spaced("10 millis")
        )
      // started after the first 2 events; then live events it sees, more than it keeps
      yield* through(2)
      yield* decide(8)
      yield* through(10)

      const follow = (afterSeq: number) =>
        Effect.gen(function*() {
          const received: Array<number> = []
          yield* fanout.follow({
            query: { afterSeq },
            keep: () => true,
            push: (bytes) => {
              for (const batch of new TextDecoder().decode(bytes).split(";")) {
                if (batch !== "") received.push(...batch.split(",").map(Number))
              }
              return true
            },
            drained: Effect.void,
            fail: () => received.push(-1)
          })
          return received
        })
      const clients = yield* Effect.forEach(
        [0, 1, 5, 6, 7, 8, 10, 12],
        (afterSeq) => Effect.map(follow(afterSeq), (received) => ({ afterSeq, received }))
      )
      yield* decide(2)
      const expected = (afterSeq: number) =>
        Array.from({ length: Math.max(0, 12 - afterSeq) }, (_, i) => afterSeq + 1 + i)
      yield* Effect.retry(
        Effect.filterOrFail(
          Effect.sync(() => clients),
          (clients) => clients.every(({ afterSeq, received }) => received.length >= expected(afterSeq).length)
        ),
        Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds"))
      ).pipe(Effect.ignore)
      for (const { afterSeq, received } of clients) {
        expect({ afterSeq, received }).toEqual({ afterSeq, received: expected(afterSeq) })
      }
    }).pipe(Effect.scoped))

  it.live("a client whose scope closes, from a fiber of its own as a departing client's does, is sent nothing more", () =>
    Effect.gen(function*() {
      const { gate, store } = yield* openGate
      const fanout = yield* AuditFanout.make(gate, store, render, { recent: 3 })
      /** A client from the start, in a scope of its own; the seqs it was sent. */
      const follow = Effect.gen(function*() {
        const received: Array<number> = []
        const scope = yield* Scope.make()
        yield* Scope.extend(
          fanout.follow({
            query: { afterSeq: 0 },
            keep: () => true,
            push: (bytes) => {
              received.push(...seqsIn(bytes))
              return true
            },
            drained: Effect.void,
            fail: () => received.push(-1)
          }),
          scope
        )
        return { received, scope }
      })
      const until = (received: Array<number>, count: number) =>
        Effect.retry(
          Effect.filterOrFail(Effect.sync(() => received.length), (n) => n >= count),
          Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds"))
        )
      const leaving = yield* follow
      const staying = yield* follow
      yield* decideMany(gate, 2)
      yield* until(leaving.received, 2)
      yield* Fiber.join(Effect.runFork(Scope.close(leaving.scope, Exit.void)))
      yield* decideMany(gate, 3)
      // the fan-out sends each batch to every client it holds in one step: the one that stayed got them
      yield* until(staying.received, 5)
      expect({ leaving: leaving.received, staying: staying.received }).toEqual({
        leaving: [1, 2],
        staying: [1, 2, 3, 4, 5]
      })
    }).pipe(Effect.scoped))

  it.live("a replay goes at the client's pace: the next page of the log waits until it has taken the last", () =>
    Effect.gen(function*() {
      const { gate, store } = yield* openGate
      yield* decideMany(gate, 1_200)
      let pages = 0
      const counted = {
        ...store,
        events: (query?: AuditEvent.AuditQuery) => Effect.suspend(() => (pages++, store.events(query)))
      }
      const fanout = yield* AuditFanout.make(gate, counted, render)
      const received: Array<number> = []
      const taken = yield* Queue.unbounded<void>()
      yield* fanout.follow({
        query: { afterSeq: 0 },
        keep: () => true,
        push: (bytes) => {
          received.push(...seqsIn(bytes))
          return false // it holds as much as it should: each page waits for it
        },
        drained: Queue.take(taken),
        fail: () => received.push(-1)
      })
      const settled = (count: number) =>
        Effect.retry(
          Effect.filterOrFail(Effect.sync(() => received.length), (length) => length === count),
          Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds"))
        )
      yield* settled(500)
      yield* Effect.sleep("100 millis")
      expect({ received: received.length, pages }).toEqual({ received: 500, pages: 1 })
      yield* Queue.offer(taken, undefined)
      yield* settled(1_000)
      yield* Effect.sleep("100 millis")
      expect({ received: received.length, pages }).toEqual({ received: 1_000, pages: 2 })
      yield* Queue.offer(taken, undefined)
      yield* settled(1_200)
      expect(received).toEqual(Array.from({ length: 1_200 }, (_, i) => i + 1))
    }).pipe(Effect.scoped))

  it.live("a client that stops taking its replay while more live events arrive than are held for it is failed", () =>
    Effect.gen(function*() {
      const { gate, store } = yield* openGate
      yield* decideMany(gate, 600)
      const fanout = yield* AuditFanout.make(gate, store, render, { maxHeld: 20 })
      // started (reading live after the 600): the 30 to come arrive live
      yield* Effect.retry(
        Effect.filterOrFail(Effect.sync(() => fanout.position()?.through), (through) => through === 600),
        Schedule.spaced("10 millis")
      )
      const outcomes = { received: 0, failed: 0 }
      const follow = (drained: Effect.Effect<void>) =>
        fanout.follow({
          query: { afterSeq: 0 },
          keep: () => true,
          push: (bytes) => {
            outcomes.received += seqsIn(bytes).length
            return false
          },
          drained,
          fail: () => outcomes.failed++
        })
      // one that never takes its first page; one that keeps up (it is never failed)
      yield* follow(Effect.never)
      const keepingUp = { received: 0, failed: 0 }
      yield* fanout.follow({
        query: { afterSeq: 0 },
        keep: () => true,
        push: (bytes) => {
          keepingUp.received += seqsIn(bytes).length
          return true
        },
        drained: Effect.void,
        fail: () => keepingUp.failed++
      })
      yield* decideMany(gate, 30)
      yield* Effect.retry(
        Effect.filterOrFail(
          Effect.sync(() => outcomes.failed + keepingUp.received),
          () => outcomes.failed === 1 && keepingUp.received === 630
        ),
        Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds"))
      ).pipe(Effect.ignore)
      expect({ outcomes, keepingUp }).toEqual({
        outcomes: { received: 500, failed: 1 },
        keepingUp: { received: 630, failed: 0 }
      })
    }).pipe(Effect.scoped))
})
