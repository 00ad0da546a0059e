/**
 * `@tool-gate/pg`'s client keeps the statements it repeats prepared (named): the server parses
 * and plans a text once per connection. On Bun, `@tool-gate/sqlite` has bun:sqlite keep the
 * statements of the last 256 texts (20 by default), never fewer than the process asked for. What may not change with it: every statement still runs
 * and answers as before, whatever the server did to the tables in between (a later migration adds
 * a column, a table is dropped and made again, a statement failed to parse, its transaction rolled
 * back), and a connection holds a bounded number of statements.
 */
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { CheckpointStore, SqlCheckpointStore } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgSchema, tempDir } from "../../../support/sqlStores.js"

/** One connection of the client on a fresh schema, and a second client to change tables with. */
const connections = (url: string, preparedStatements?: boolean) =>
  Effect.gen(function*() {
    const schemaUrl = yield* pgSchema(url)
    const client = (prepared?: boolean) =>
      Effect.map(
        Layer.build(ToolGatePg.layerClient({ url: Redacted.make(schemaUrl), preparedStatements: prepared })),
        Context.get(SqlClient.SqlClient)
      )
    const conn = yield* Effect.flatMap(client(preparedStatements), (sql) => sql.reserve)
    const admin = yield* client(false)
    return { conn, admin }
  })

const run = (conn: Connection, text: string, params: ReadonlyArray<unknown> = []) =>
  conn.execute(text, params as ReadonlyArray<any>, undefined)

const preparedText = "SELECT statement FROM pg_prepared_statements ORDER BY statement"

/** The statements the connection holds prepared (but the query of this list, once it runs again). */
const prepared = (conn: Connection) =>
  Effect.map(
    run(conn, preparedText),
    (rows) => rows.map((row) => row.statement as string).filter((text) => text !== preparedText)
  )

describePostgres("prepared statements", (url) =>
  describe("@tool-gate/pg's client and prepared statements", () => {
    it.live("a text run again is prepared once on its connection, and answers each run", () =>
      Effect.gen(function*() {
        const { conn } = yield* connections(url)
        const text = "SELECT $1::int + 1 AS n"
        const answers = []
        for (const n of [1, 2, 3]) answers.push((yield* run(conn, text, [n]))[0]!.n)
        expect(answers).toEqual([2, 3, 4])
        expect(yield* prepared(conn)).toEqual([text])
      }))

    it.live("with preparedStatements: false nothing is prepared", () =>
      Effect.gen(function*() {
        const { conn } = yield* connections(url, false)
        for (const n of [1, 2]) yield* run(conn, "SELECT $1::int + 1 AS n", [n])
        expect(yield* prepared(conn)).toEqual([])
      }))

    it.live("a text with more than 64 parameters runs unnamed", () =>
      Effect.gen(function*() {
        const { conn } = yield* connections(url)
        const many = Array.from({ length: 65 }, (_, i) => i)
        const sum = `SELECT ${many.map((i) => `$${i + 1}::int`).join(" + ")} AS n`
        for (let run_ = 0; run_ < 2; run_++) expect((yield* run(conn, sum, many))[0]!.n).toBe(65 * 64 / 2)
        expect(yield* prepared(conn)).toEqual([])
      }))

    it.live("a query without parameters is prepared when it runs again; other statements, or several, never", () =>
      Effect.gen(function*() {
        const { admin, conn } = yield* connections(url)
        yield* admin`CREATE TABLE ended (a INT)`
        const once = "SELECT 40 + 1 AS n"
        const again = "SELECT 41 + 1 AS n"
        const several = "SELECT 1 AS n; SELECT 43 AS n"
        expect((yield* run(conn, once))[0]!.n).toBe(41)
        expect((yield* run(conn, again))[0]!.n).toBe(42)
        expect(yield* prepared(conn)).toEqual([])
        const answers = []
        for (let i = 0; i < 3; i++) answers.push((yield* run(conn, again))[0]!.n)
        expect(answers).toEqual([42, 42, 42])
        // a simple query of several statements gives one list of rows per statement
        for (let i = 0; i < 2; i++) expect(yield* run(conn, several)).toEqual([[{ n: 1 }], [{ n: 43 }]])
        for (const end of ["COMMIT", "ROLLBACK", "COMMIT"]) {
          yield* run(conn, "BEGIN")
          yield* run(conn, "INSERT INTO ended VALUES (1)")
          yield* run(conn, end)
        }
        expect(yield* run(conn, "SELECT a FROM ended")).toEqual([{ a: 1 }, { a: 1 }])
        expect(yield* prepared(conn)).toEqual([again, "INSERT INTO ended VALUES (1)"].sort())
      }))

    it.live("the first 256 texts are prepared, later ones run unnamed", () =>
      Effect.gen(function*() {
        const { conn } = yield* connections(url)
        const sums = []
        for (let i = 0; i < 300; i++) sums.push((yield* run(conn, `SELECT $1::int + ${i} AS n`, [1]))[0]!.n)
        expect(sums).toEqual(Array.from({ length: 300 }, (_, i) => i + 1))
        const texts = yield* prepared(conn)
        expect(texts.length).toBe(256)
        expect(texts).toContain("SELECT $1::int + 255 AS n")
        expect(texts).not.toContain("SELECT $1::int + 256 AS n")
      }))

    it.live("a prepared statement follows its table: a column added, the table made again", () =>
      Effect.gen(function*() {
        const { admin, conn } = yield* connections(url)
        yield* admin`CREATE TABLE kept (a INT)`
        yield* admin`INSERT INTO kept VALUES (1), (2)`
        const read = run(conn, "SELECT a FROM kept WHERE a >= $1 ORDER BY a", [1])
        expect(yield* read).toEqual([{ a: 1 }, { a: 2 }])
        yield* admin`ALTER TABLE kept ADD COLUMN b TEXT`
        yield* admin`INSERT INTO kept VALUES (3, 'x')`
        expect(yield* read).toEqual([{ a: 1 }, { a: 2 }, { a: 3 }])
        yield* admin`DROP TABLE kept`
        yield* admin`CREATE TABLE kept (a INT)`
        yield* admin`INSERT INTO kept VALUES (5)`
        expect(yield* read).toEqual([{ a: 5 }])
      }))

    it.live("a text that failed to prepare, or was prepared in a transaction rolled back, runs later", () =>
      Effect.gen(function*() {
        const { admin, conn } = yield* connections(url)
        const read = run(conn, "SELECT a FROM later WHERE a >= $1", [0])
        const failed = yield* Effect.flip(read)
        expect(String(failed.cause)).toContain("later")
        yield* admin`CREATE TABLE later (a INT)`
        yield* admin`INSERT INTO later VALUES (7)`
        expect(yield* read).toEqual([{ a: 7 }])

        const other = run(conn, "SELECT a + $1::int AS a FROM later", [1])
        yield* run(conn, "BEGIN")
        expect(yield* other).toEqual([{ a: 8 }])
        yield* run(conn, "ROLLBACK")
        expect(yield* other).toEqual([{ a: 8 }])
      }))

    it.live("the checkpoint store reads its rows after a later migration adds a column to its table", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        // one connection: each read runs again where it was prepared
        const client = ToolGatePg.layerClient({ url: Redacted.make(schemaUrl), client: { maxConnections: 1 } })
        const checkpoints = yield* Effect.map(
          Layer.build(SqlCheckpointStore.layer().pipe(Layer.provide(client))),
          Context.get(CheckpointStore.CheckpointStore)
        )
        const saved = { token: "t1", name: "agent", state: "{}", requestIds: ["r1"], createdAt: 1 }
        expect(yield* checkpoints.save(saved)).toBe(true)
        const found = () =>
          Effect.all([
            checkpoints.find({ token: "t1" }),
            checkpoints.find({ requestId: "r1" }),
            checkpoints.open("agent")
          ])
        const before = yield* found()
        const admin = yield* Effect.map(
          Layer.build(ToolGatePg.layerClient({ url: Redacted.make(schemaUrl), preparedStatements: false })),
          Context.get(SqlClient.SqlClient)
        )
        yield* admin`ALTER TABLE toolgate_checkpoints ADD COLUMN added_later TEXT`
        const after = yield* found()
        expect(after).toEqual(before)
        expect(Option.map(after[0], (row) => row.token)).toEqual(Option.some("t1"))
      }))
  }))

describe("@tool-gate/sqlite's client on Bun and bun:sqlite's statement cache", () => {
  /** Opens a client on a fresh file with the cache size set to `before` first; the size after. */
  const cacheAfterOpening = (before: number) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const kept = Database.MAX_QUERY_CACHE_SIZE
        Database.MAX_QUERY_CACHE_SIZE = before
        return kept
      }),
      () =>
        Effect.gen(function*() {
          const dir = yield* tempDir
          const sql = Context.get(
            yield* Layer.build(ToolGateSqlite.layerClient(join(dir, "t.db"))),
            SqlClient.SqlClient
          )
          expect(yield* sql`SELECT 41 + 1 AS n`).toEqual([{ n: 42 }])
          return Database.MAX_QUERY_CACHE_SIZE
        }),
      (kept) => Effect.sync(() => Database.MAX_QUERY_CACHE_SIZE = kept)
    )

  it.scoped("keeps the statements of 256 texts, not 20", () =>
    Effect.map(cacheAfterOpening(20), (after) => expect(after).toBe(256)))

  it.scoped("never fewer than the process set", () =>
    Effect.map(cacheAfterOpening(1_000), (after) => expect(after).toBe(1_000)))
})
