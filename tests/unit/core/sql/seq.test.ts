/**
 * `seq` is gap-free, as the README promises (so a hole in it means a deletion): writes rolled back
 * by the caller's transaction, and on PostgreSQL writers whose connection is terminated in the
 * middle of their transaction, leave no hole between the committed events.
 */
import { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { SqlError } from "@effect/sql/SqlError"
import type { ApprovalStore as Store } from "@tool-gate/core"
import { expect } from "bun:test"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import { join } from "node:path"
import { migrations, tables } from "../../../../packages/core/src/internal/sqlSchema.js"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import { decision, open } from "./fixtures.js"

class Aborted {
  readonly _tag = "Aborted"
}

/** The seq column as stored. */
const seqColumn = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ seq: number | string }>`SELECT seq FROM toolgate_events ORDER BY seq`,
    (rows) => rows.map((row) => Number(row.seq))
  )

const oneTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1)

/** Writes that the caller's transaction rolls back, one event and several, between committed ones. */
const rolledBack = (store: Store.Service, sql: SqlClient.SqlClient, n: number) =>
  Effect.gen(function*() {
    let committed = 0
    for (let i = 0; i < n; i++) {
      yield* store.append([decision(100 * i)])
      committed++
      const aborted = yield* Effect.flip(sql.withTransaction(
        Effect.zipRight(store.append([decision(100 * i + 1), decision(100 * i + 2)]), Effect.fail(new Aborted()))
      ))
      expect(aborted).toBeInstanceOf(Aborted)
      yield* Effect.flip(
        sql.withTransaction(Effect.zipRight(store.append([decision(100 * i + 3)]), Effect.fail(new Aborted())))
      )
    }
    yield* store.append([decision(99_999), decision(99_998)])
    return committed + 2
  })

describe("gap-free seq (SQLite)", () => {
  it.live("writes rolled back by the caller's transaction leave no hole", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      const { sql, store } = yield* open(storeOver(sqliteClient(file)))
      const committed = yield* rolledBack(store, sql, 10)
      expect(yield* seqColumn(sql)).toEqual(oneTo(committed))
      expect(yield* store.lastSeq).toBe(committed)
    }))
})

const pgSuite = (url: string) =>
  describe("gap-free seq (postgres)", () => {
    it.live("writes rolled back by the caller's transaction leave no hole", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const { sql, store } = yield* open(pgStoreOver(pgClient(schemaUrl), "toolgate_test_seq"))
        const committed = yield* rolledBack(store, sql, 10)
        expect(yield* seqColumn(sql)).toEqual(oneTo(committed))
        expect(yield* store.lastSeq).toBe(committed)
      }))

    it.live("writers terminated by pg_terminate_backend mid-transaction leave no hole", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const { sql, store } = yield* open(pgStoreOver(pgClient(schemaUrl), "toolgate_test_seq_kill"))
        const admin = yield* Effect.map(Layer.build(pgClient(schemaUrl)), Context.get(SqlClient.SqlClient))
        let committed = 0
        for (let i = 0; i < 8; i++) {
          const inserted = yield* Deferred.make<number>()
          const release = yield* Deferred.make<void>()
          // inserts its events, tells which backend it is, then runs one more statement once killed
          const writer = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
            yield* store.append(i % 2 === 0 ? [decision(10 * i)] : [decision(10 * i), decision(10 * i + 1)])
            const [backend] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
            yield* Deferred.succeed(inserted, backend!.pid)
            yield* Deferred.await(release)
            yield* sql`SELECT 1`
          })))
          const pid = yield* Deferred.await(inserted)
          const [killed] = yield* admin<{ killed: boolean }>`SELECT pg_terminate_backend(${pid}) AS killed`
          expect(killed!.killed).toBe(true)
          yield* Deferred.succeed(release, undefined)
          yield* Effect.exit(Fiber.join(writer))
          yield* store.append([decision(10 * i + 5)])
          committed++
        }
        expect(yield* seqColumn(admin)).toEqual(oneTo(committed))
        expect(yield* store.lastSeq).toBe(committed)
      }))

    it.live("another table prefix: the counter numbers its events and no sequence is left behind", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const { sql, store } = yield* open(
          pgStoreOver(pgClient(schemaUrl), "toolgate_test_seq_prefix", { tablePrefix: "gate_" })
        )
        expect((yield* store.append([decision(1), decision(2)])).map((e) => e.seq)).toEqual([1, 2])
        expect(
          yield* sql`SELECT relname FROM pg_class WHERE relkind = 'S' AND relnamespace = current_schema()::regnamespace`
        )
          .toEqual([])
      }))

    it.live("a database from before the counter keeps its rows and numbers on from its highest seq", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const admin = yield* Effect.map(Layer.build(pgClient(schemaUrl)), Context.get(SqlClient.SqlClient))
        // the schema as the previous version left it: migrations 1 to 3, seq a BIGSERIAL
        yield* Migrator.make({})({
          loader: Effect.map(migrations(tables("toolgate_")), (all) => all.filter(([id]) => id <= 3)),
          table: "toolgate_migrations"
        }).pipe(Effect.provideService(SqlClient.SqlClient, admin))
        const oldInsert =
          admin`INSERT INTO toolgate_events (at, type, outcome, event) VALUES (1, 'decision', 'allow', '{}')`
        yield* oldInsert
        yield* oldInsert
        yield* Effect.flip(admin.withTransaction(Effect.zipRight(oldInsert, Effect.fail(new Aborted()))))
        expect(yield* seqColumn(admin)).toEqual([1, 2])

        const { store } = yield* open(pgStoreOver(pgClient(schemaUrl), "toolgate_test_seq_upgrade"))
        const appended = yield* store.append([decision(1), decision(2)])
        expect(appended.map((e) => e.seq)).toEqual([3, 4])
        expect(yield* seqColumn(admin)).toEqual([1, 2, 3, 4])
        // a writer of the previous version, leaving seq to the dropped default, fails instead of leaving a hole
        expect(yield* Effect.flip(oldInsert)).toBeInstanceOf(SqlError)
        expect(yield* store.lastSeq).toBe(4)
      }))
  })

describePostgres("seq tests", pgSuite)
