/**
 * The audit fan-out's replays with few recent events kept (3): a client resuming after an event
 * older than them reads the store until they reach back far enough, then takes the rest from
 * them; one resuming among them, or past the head, reads nothing. Every client gets every event
 * after its start exactly once, in order, and then the live ones (SQLite file, the real gate).
 */
import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Context, Effect, Layer, Schedule } from "effect"
import { join } from "node:path"
import * as AuditFanout from "../../packages/server/src/internal/auditFanout.js"
import { describe, it } from "../support/effectTest.js"
import { tempDir } from "../support/sqlStores.js"

const policy = Policy.unsafeMake({})

/** Each batch as its seqs: `1,2,3;` */
const render: AuditFanout.Render = (events) => new TextEncoder().encode(`${events.map((e) => e.seq).join(",")};`)

describe("audit fan-out", () => {
  it.live("replays from the store, then from the recent events; each event once, in order", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        ToolGateSqlite.layer({ filename: join(yield* tempDir, "fanout.db"), policy })
      )
      const gate = Context.get(context, ToolGate.ToolGate)
      const store = Context.get(context, ApprovalStore.ApprovalStore)
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
            },
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
})
