/**
 * Real Node processes opening one store at the same moment (a brand-new SQLite file, a new
 * PostgreSQL schema, one of the previous version): every one migrates or waits for the migrator,
 * then decides a call. And a
 * process killed with SIGKILL inside a writing transaction leaves no hole in `seq`.
 */
import { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { afterAll, describe, expect, test } from "bun:test"
import type { Layer } from "effect"
import { Effect } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { migrations, tables } from "../../packages/core/src/internal/sqlSchema.js"
import { postgresUrl } from "../support/postgresSuite.js"
import { pgClient, pgSchema, sqliteClient, storeOver } from "../support/sqlStores.js"
import { spawnWorker, type Worker } from "./support/nodeProcess.js"

const dir = mkdtempSync(join(tmpdir(), "toolgate-startup-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const fresh = (name: string) => join(dir, `${name}-${files++}`)

/**
 * Starts `n` processes that load everything and wait; then releases them together onto `db` and
 * returns each one's exit code and last line.
 */
const startTogether = async (n: number, db: string) => {
  const go = fresh("go")
  const workers: Array<Worker> = await Promise.all(
    Array.from({ length: n }, (_, i) => spawnWorker(["open", db, go, `call-${i}`], { entry: "storeWorker" }))
  )
  await Promise.all(workers.map((worker) => worker.next("ready", 120_000)))
  writeFileSync(go, "")
  return Promise.all(workers.map(async (worker) => {
    const code = await worker.exited
    return { code, last: worker.lines[worker.lines.length - 1], stderr: worker.stderr() }
  }))
}

/** The `seq` column in order, read by the test's own client. */
const seqs = (client: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Effect.runPromise(Effect.scoped(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ seq: number | string }>`SELECT seq FROM toolgate_events ORDER BY seq`
      return rows.map((row) => Number(row.seq))
    }).pipe(Effect.provide(client))
  ))

const oneToMax = (values: ReadonlyArray<number>) => Array.from({ length: values.length }, (_, i) => i + 1)

describe("processes opening a store at once", () => {
  test("60 Node processes opening one brand-new SQLite file together all open it and decide", async () => {
    const db = join(fresh("db"), "toolgate.db")
    const results = await startTogether(60, db)
    const failed = results.filter((r) => r.code !== 0 || r.last?.event !== "decided")
    expect(failed.map((r) => r.stderr.split("\n")[0])).toEqual([])
    const written = await seqs(storeOver(sqliteClient(db)))
    expect(written).toHaveLength(60)
    expect(written).toEqual(oneToMax(written))
  }, 240_000)

  test("a process killed inside its writing transaction leaves no hole in seq (SQLite)", async () => {
    const db = join(fresh("db"), "toolgate.db")
    for (let round = 0; round < 3; round++) {
      const writer = await spawnWorker(["hang", db, "3"], { entry: "storeWorker" })
      await writer.next("inserted", 60_000)
      writer.kill("SIGKILL")
      await writer.exited
      const go = fresh("go")
      writeFileSync(go, "")
      const committed = await spawnWorker(["open", db, go, `after-${round}`], { entry: "storeWorker" })
      expect(await committed.exited).toBe(0)
    }
    const written = await seqs(storeOver(sqliteClient(db)))
    expect(written).toHaveLength(3)
    expect(written).toEqual(oneToMax(written))
  }, 120_000)

  const url = postgresUrl("store start-up tests")
  const onPostgres = (previousVersion: boolean) => () =>
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const schemaUrl = yield* pgSchema(url!)
      if (previousVersion) {
        // the schema as the previous version left it (migrations 1 to 3), with one event in it
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* Migrator.make({})({
            loader: Effect.map(migrations(tables("toolgate_")), (all) => all.filter(([id]) => id <= 3)),
            table: "toolgate_migrations"
          })
          const event = JSON.stringify({ at: 1, type: "decision", outcome: "allow", sessionKey: "before" })
          yield* sql`INSERT INTO toolgate_events (at, type, outcome, session_key, event) VALUES (1, 'decision', 'allow', 'before', ${event})`
        }).pipe(Effect.provide(pgClient(schemaUrl)))
      }
      const results = yield* Effect.promise(() => startTogether(20, schemaUrl))
      const failed = results.filter((r) => r.code !== 0 || r.last?.event !== "decided")
      expect(failed.map((r) => r.stderr.split("\n")[0])).toEqual([])
      const written = yield* Effect.promise(() => seqs(pgClient(schemaUrl)))
      expect(written).toHaveLength(previousVersion ? 21 : 20)
      expect(written).toEqual(oneToMax(written))
    })))

  test.skipIf(url === undefined)(
    "20 Node processes opening one new PostgreSQL schema together all open it and decide",
    onPostgres(false),
    240_000
  )
  test.skipIf(url === undefined)(
    "20 Node processes upgrading a PostgreSQL schema of the previous version together all open it and decide",
    onPostgres(true),
    240_000
  )
})
