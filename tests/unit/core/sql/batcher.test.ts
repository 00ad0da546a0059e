/**
 * Group commit with merged calls (`internal/sqlBatcher.ts`) on a real SQLite file: calls that join
 * one group and are in flight together run as one body (one multi-row statement), each caller
 * still gets its own result, and a merged body that fails is retried call by call, so one caller's
 * bad input fails that caller alone and every other call commits.
 */
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { expect } from "bun:test"
import { Context, Deferred, Effect, Fiber, Layer, Option } from "effect"
import { join } from "node:path"
import { CALLS_BEFORE_TURN } from "../../../../packages/core/src/internal/eventLoopTurn.js"
import * as Batcher from "../../../../packages/core/src/internal/sqlBatcher.js"
import { describe, it } from "../../../support/effectTest.js"
import { watchLoop } from "../../../support/loopWatch.js"
import { sqliteClient, tempDir } from "../../../support/sqlStores.js"

const CALLERS = 64

/** A batcher over a fresh SQLite file with a table of unique keys; the inputs of each merged run. */
const setUp = Effect.gen(function*() {
  const dir = yield* tempDir
  const sql = Context.get(yield* Layer.build(sqliteClient(join(dir, "batcher.db"))), SqlClient.SqlClient)
  yield* sql`CREATE TABLE keys (k TEXT PRIMARY KEY)`
  // every statement the batcher's connections run, in order
  const texts: Array<string> = []
  const noted = (conn: Connection): Connection => ({
    ...conn,
    execute: (text, params, transform) =>
      Effect.zipRight(Effect.sync(() => texts.push(text)), conn.execute(text, params, transform)),
    executeUnprepared: (text, params, transform) =>
      Effect.zipRight(Effect.sync(() => texts.push(text)), conn.executeUnprepared(text, params, transform))
  })
  const batcher = yield* Batcher.make({
    reserve: Effect.map(sql.reserve, noted),
    begin: ["BEGIN IMMEDIATE"],
    synchronous: true
  })
  const runs: Array<number> = []
  /** The batch's connection, as the batcher gives it to bodies. */
  const on = <A>(body: (conn: Connection) => Effect.Effect<A, unknown>) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (held) => body(Option.getOrThrow(held)[0]))
  type Rows = ReadonlyArray<Record<string, unknown>>
  /** Inserts its keys in one statement (a duplicate key fails the statement); each gets its rowid. */
  const insert: Batcher.Group<string, number, unknown> = {
    write: true,
    run: (keys) =>
      on((conn) =>
        Effect.map(
          conn.execute(
            `INSERT INTO keys (k) VALUES ${keys.map(() => "(?)").join(", ")} RETURNING k, rowid AS id`,
            keys,
            undefined
          ),
          (rows: Rows) => {
            runs.push(keys.length)
            const ids = new Map(rows.map((row) => [row.k, Number(row.id)]))
            return keys.map((key) => ids.get(key)!)
          }
        )
      )
  }
  /** Reads whether each key is stored, in one statement. */
  const stored: Batcher.Group<string, boolean, unknown> = {
    write: false,
    run: (keys) =>
      on((conn) =>
        Effect.map(
          conn.execute(`SELECT k FROM keys WHERE k IN (${keys.map(() => "?").join(", ")})`, keys, undefined),
          (rows: Rows) => {
            runs.push(keys.length)
            const found = new Set(rows.map((row) => row.k))
            return keys.map((key) => found.has(key))
          }
        )
      )
  }
  /** `insert`, whose calls made `single` merge into its one statement with no transaction. */
  const insertSingle: Batcher.Group<string, number, unknown> = { ...insert, single: true }
  return { sql, batcher, runs, texts, insert, insertSingle, stored }
})

/** `CALLERS` fibers in flight at once, each yielding first as callers between their calls do. */
const inFlight = <A, E>(call: (i: number) => Effect.Effect<A, E>) =>
  Effect.forEach(
    Array.from({ length: CALLERS }, (_, i) => i),
    (i) =>
      Effect.zipRight(
        Effect.yieldNow(),
        Effect.match(call(i), { onFailure: (error) => ({ error }), onSuccess: (ok) => ({ ok }) })
      ),
    { concurrency: "unbounded" }
  )

describe("SQL group commit: merged calls", () => {
  it.scoped("calls in flight together run merged, and each caller gets its own result", () =>
    Effect.gen(function*() {
      const { batcher, insert, runs, sql } = yield* setUp
      const results = yield* inFlight((i) => batcher.join(insert, `k${i}`))
      const rows = yield* sql<{ k: string; id: number }>`SELECT k, rowid AS id FROM keys`
      const idOf = new Map(rows.map((row) => [row.k, Number(row.id)]))
      expect(rows).toHaveLength(CALLERS)
      results.forEach((result, i) => expect(result).toEqual({ ok: idOf.get(`k${i}`)! }))
      // fewer statements than calls: at least one run carried several calls
      expect(runs.reduce((a, b) => a + b, 0)).toBe(CALLERS)
      expect(Math.max(...runs)).toBeGreaterThan(1)
    }))

  it.scoped("a merged body that fails is retried call by call: only the bad call fails, the rest commit", () =>
    Effect.gen(function*() {
      const { batcher, insert, runs, sql } = yield* setUp
      yield* sql`INSERT INTO keys (k) VALUES ('taken')`
      const results = yield* inFlight((i) => batcher.join(insert, i === 40 ? "taken" : `k${i}`))
      expect(results.filter((result) => "error" in result)).toHaveLength(1)
      expect("error" in results[40]!).toBe(true)
      const keys = (yield* sql<{ k: string }>`SELECT k FROM keys`).map((row) => row.k)
      expect(keys.sort()).toEqual(
        ["taken", ...Array.from({ length: CALLERS }, (_, i) => `k${i}`)].filter((k) => k !== "k40").sort()
      )
      // the failed merged run left nothing behind (rolled back), so the keys of its calls came in one by one
      expect(runs.filter((n) => n === 1).length).toBeGreaterThan(1)
    }))

  it.scoped("single calls of a single group in flight together run merged as one statement, with no transaction", () =>
    Effect.gen(function*() {
      const { batcher, insertSingle, runs, sql, texts } = yield* setUp
      const results = yield* inFlight((i) => batcher.join(insertSingle, `k${i}`, true))
      const rows = yield* sql<{ k: string; id: number }>`SELECT k, rowid AS id FROM keys`
      const idOf = new Map(rows.map((row) => [row.k, Number(row.id)]))
      results.forEach((result, i) => expect(result).toEqual({ ok: idOf.get(`k${i}`)! }))
      expect(Math.max(...runs)).toBeGreaterThan(1)
      expect(texts.filter((text) => text.startsWith("BEGIN"))).toEqual([])
      // the same calls not made single take transactions
      yield* inFlight((i) => batcher.join(insertSingle, `again${i}`))
      expect(texts.filter((text) => text.startsWith("BEGIN")).length).toBeGreaterThan(0)
    }))

  it.scoped("a merged single statement that fails runs call by call, with no transaction: only the bad call fails", () =>
    Effect.gen(function*() {
      const { batcher, insertSingle, runs, sql, texts } = yield* setUp
      yield* sql`INSERT INTO keys (k) VALUES ('taken')`
      const results = yield* inFlight((i) => batcher.join(insertSingle, i === 40 ? "taken" : `k${i}`, true))
      expect(results.filter((result) => "error" in result)).toHaveLength(1)
      expect("error" in results[40]!).toBe(true)
      const keys = (yield* sql<{ k: string }>`SELECT k FROM keys`).map((row) => row.k)
      expect(keys).toHaveLength(CALLERS)
      expect(runs.filter((n) => n === 1).length).toBeGreaterThan(1)
      expect(texts.filter((text) => text.startsWith("BEGIN") || text === "ROLLBACK")).toEqual([])
    }))

  it.scoped("reads queued behind writes merge too, each caller getting the answer for its own key", () =>
    Effect.gen(function*() {
      const { batcher, insert, runs, stored } = yield* setUp
      yield* batcher.join(insert, "k1")
      runs.length = 0
      // a read that finds the store idle runs at once; these queue behind the writes in flight
      const found = yield* inFlight((i) =>
        Effect.zipRight(batcher.join(insert, `w${i}`), batcher.join(stored, `k${i % 4}`))
      )
      found.forEach((result, i) => expect(result).toEqual({ ok: i % 4 === 1 }))
      expect(runs.length).toBeLessThan(2 * CALLERS)
    }))

  it.scoped("callers that keep writing together keep committing together: none commits alone after the first call", () =>
    Effect.gen(function*() {
      const { batcher, insert, runs } = yield* setUp
      const ROUNDS = 4
      yield* Effect.forEach(
        Array.from({ length: CALLERS }, (_, i) => i),
        (i) =>
          Effect.forEach(
            Array.from({ length: ROUNDS }, (_, round) => round),
            (round) => Effect.zipRight(Effect.yieldNow(), batcher.join(insert, `k${i}-${round}`)),
            { discard: true }
          ),
        { concurrency: "unbounded", discard: true }
      )
      expect(runs.reduce((a, b) => a + b, 0)).toBe(CALLERS * ROUNDS)
      // the very first call finds the store idle and nobody else writing yet: it alone runs by itself
      // (fails when the caller that led a batch commits its next call alone, as it did every round)
      expect(runs.slice(1).filter((n) => n === 1)).toEqual([])
    }))

  it.scoped("callers started one after another in one turn (as a stream's mapEffect starts them) commit together", () =>
    Effect.gen(function*() {
      const { batcher, insert, runs, texts } = yield* setUp
      // the first write of a fresh store runs at once, alone; the callers below come after it
      yield* batcher.join(insert, "first")
      runs.length = 0
      texts.length = 0
      // one fiber starts the callers, yielding after each start: a caller that only yields once
      // finds the next ones not started yet
      const callers: Array<Fiber.RuntimeFiber<number, unknown>> = []
      for (let i = 0; i < CALLERS; i++) {
        callers.push(yield* Effect.fork(batcher.join(insert, `k${i}`)))
        yield* Effect.yieldNow()
      }
      const ids = yield* Fiber.joinAll(callers)
      expect(new Set(ids).size).toBe(CALLERS)
      expect(runs.reduce((a, b) => a + b, 0)).toBe(CALLERS)
      // the batch's first call yielded on while its yields brought callers, so a few transactions
      // took them all (fails when it yields once only: about one transaction per caller)
      expect(texts.filter((text) => text === "COMMIT").length).toBeLessThanOrEqual(2)
    }))

  it.scoped("a call interrupted while it waits in the queue never runs; the calls queued beside it do", () =>
    Effect.gen(function*() {
      const { batcher, insert, sql } = yield* setUp
      const release = yield* Deferred.make<void>()
      // a write that holds the store until released, so the calls below queue behind it
      const holding = yield* Effect.fork(batcher.write(Deferred.await(release)))
      yield* Effect.yieldNow()
      const dropped = yield* Effect.fork(batcher.join(insert, "dropped"))
      const kept = yield* Effect.fork(batcher.join(insert, "kept"))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(dropped)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      expect(yield* Fiber.join(kept)).toBeGreaterThan(0)
      const keys = (yield* sql<{ k: string }>`SELECT k FROM keys`).map((row) => row.k)
      expect(keys).toEqual(["kept"])
    }))

  it.scoped("a fiber making lone calls in a loop lets the event loop turn between them (other fibers, timers)", () =>
    Effect.gen(function*() {
      const { batcher, insert, stored } = yield* setUp
      const calls = 100
      const watch = yield* watchLoop(calls)
      for (let i = 0; i < calls; i++) {
        yield* i % 2 === 0 ? batcher.join(insert, `k${i}`) : batcher.join(stored, `k${i - 1}`)
        watch.made()
      }
      const { longest, timerAt } = yield* watch.end
      // each reserve resumes the caller at once, which restarts Effect's count of its steps: with
      // no turn of the batcher's own, the event loop would first turn once the loop had ended
      expect(longest).toBeLessThanOrEqual(CALLS_BEFORE_TURN)
      expect(timerAt).toBeGreaterThanOrEqual(0)
      expect(timerAt).toBeLessThan(calls)
    }))
})
