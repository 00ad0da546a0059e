/**
 * A sweep expires a backlog of overdue requests together: the expiries it has in flight at once
 * commit in batches (the store's group commit), not in a transaction each, as a gate that was down
 * past its requests' deadlines finds on its first sweep. What may not change: each request expires
 * once, with one event, none is left pending, and the log stays numbered without a hole.
 */
import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Context, Effect, Layer, TestClock } from "effect"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgStore, sqliteStore } from "../../../support/sqlStores.js"
import type { Sent } from "./fixtures.js"
import { sqliteStatementsSent, statementsSent } from "./fixtures.js"

const policy = Policy.unsafeMake({ requireApproval: [{ tool: "bash", ttlMs: 60_000 }] })

const OVERDUE = 300

/** Sweeps `OVERDUE` overdue requests; the statements containing `marker` the sweep sent. */
const sweptBacklog = (store: Layer.Layer<ApprovalStore.ApprovalStore, unknown>, sent: Sent, marker: string) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      ToolGate.layer({ policy, sweepInterval: "1 hour" }).pipe(Layer.provideMerge(store))
    )
    const gate = Context.get(context, ToolGate.ToolGate)
    const log = Context.get(context, ApprovalStore.ApprovalStore)
    yield* Effect.forEach(
      Array.from({ length: OVERDUE }, (_, i) => i),
      (i) => gate.authorize({ id: `c${i}`, name: "bash", sessionKey: `s${i % 10}` }),
      { concurrency: "unbounded", discard: true }
    )
    yield* TestClock.adjust("61 seconds")

    const { result: swept, statements } = yield* sent(marker, gate.sweep)
    expect(swept).toHaveLength(OVERDUE)
    expect(new Set(swept.map((request) => request.status))).toEqual(new Set(["expired"]))
    const events = yield* log.events()
    const expiries = events.filter((event) => event.type === "approval.expired")
    expect(new Set(expiries.map((event) => event.requestId)).size).toBe(OVERDUE)
    expect(expiries).toHaveLength(OVERDUE)
    expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1))
    expect(yield* log.countPending).toEqual({ pending: 0, seq: events.length })
    return statements
  })

describe("a sweep of an overdue backlog (SQLite)", () => {
  it.scoped("expires 300 requests in batches: a few transactions, not one each", () =>
    Effect.gen(function*() {
      const transactions = yield* sweptBacklog(sqliteStore(), sqliteStatementsSent, "BEGIN IMMEDIATE")
      expect(transactions).toBeLessThan(OVERDUE / 10)
    }))
})

describePostgres("sweep of an overdue backlog", (url) => {
  describe("a sweep of an overdue backlog (PostgreSQL)", () => {
    it.scoped("expires 300 requests in batches: a few statements, not one each", () =>
      Effect.gen(function*() {
        const statements = yield* sweptBacklog(pgStore(url), statementsSent, "toolgate_requests")
        expect(statements).toBeLessThan(OVERDUE / 10)
      }))
  })
})
