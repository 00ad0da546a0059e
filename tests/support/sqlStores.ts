/**
 * SQL stores for tests: SQLite files in scoped temp dirs, and PostgreSQL (when `TOOLGATE_PG_URL`
 * is set) in a fresh schema per store, so tests never see each other's rows.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import type { SqlError } from "@effect/sql/SqlError"
import { SqlApprovalStore } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A fresh directory, removed with everything in it when the scope closes. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "toolgate-test-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** One connection to a SQLite file, as one process would hold (WAL is switched on by the store). */
export const sqliteClient = (filename: string) => SqliteClient.layer({ filename, disableWAL: true })

/**
 * Test stores judge deadlines at the time the gate passes in (its `TestClock`), unless a test asks
 * for the database's clock: the TestClock starts at the epoch, where every deadline has passed. On
 * PostgreSQL they keep their connections, as `@tool-gate/pg` does with its default pool (the
 * tests' pools have the default size).
 */
const testOptions = (options?: SqlApprovalStore.Options): SqlApprovalStore.Options => ({
  clock: "caller",
  keepConnections: true,
  ...options
})

/** A store over `client` with the polling feed (the client stays in the output, for inspecting tables). */
export const storeOver = <E, R>(
  client: Layer.Layer<SqlClient.SqlClient, E, R>,
  options?: SqlApprovalStore.Options
) =>
  SqlApprovalStore.layer(testOptions(options)).pipe(
    Layer.provide(SqlApprovalStore.layerPollingFeed()),
    Layer.provideMerge(client)
  )

/** A store on a SQLite file in a fresh temp dir. */
export const sqliteStore = (options?: SqlApprovalStore.Options) =>
  Layer.unwrapScoped(Effect.map(tempDir, (dir) => storeOver(sqliteClient(join(dir, "toolgate.db")), options)))

export const pgUrl = process.env.TOOLGATE_PG_URL

/** The client `@tool-gate/pg` opens (its statements kept prepared) on `url`. */
export const pgClient = (url: string) => ToolGatePg.layerClient({ url: Redacted.make(url) })

let schemas = 0

/**
 * A fresh PostgreSQL schema, dropped with everything in it when the scope closes; returns a URL
 * whose connections use it (`search_path`), so every store opened on it sees only its own rows.
 */
export const pgSchema = (url: string) => {
  const admin = (statement: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, SqlError>) =>
    Effect.flatMap(SqlClient.SqlClient, statement).pipe(Effect.provide(pgClient(url)), Effect.orDie)
  const schema = `tg_${Date.now().toString(36)}_${(schemas++).toString(36)}`
  return Effect.acquireRelease(
    Effect.as(
      admin((sql) => sql`CREATE SCHEMA ${sql(schema)}`),
      `${url}${url.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`
    ),
    () => admin((sql) => sql`DROP SCHEMA ${sql(schema)} CASCADE`).pipe(Effect.ignore)
  )
}

/** A store over `client`, woken by LISTEN/NOTIFY on `channel` (the client stays in the output). */
export const pgStoreOver = <E, R>(
  client: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, E, R>,
  channel: string,
  options?: SqlApprovalStore.Options
) =>
  SqlApprovalStore.layer(testOptions(options)).pipe(
    Layer.provide(SqlApprovalStore.layerNotifyFeed(PgClient.PgClient, { channel })),
    Layer.provideMerge(client)
  )

let channels = 0

/** A store on PostgreSQL in a fresh schema of its own (default table prefix). */
export const pgStore = (url: string, options?: SqlApprovalStore.Options) =>
  Layer.unwrapScoped(
    Effect.map(pgSchema(url), (schemaUrl) => pgStoreOver(pgClient(schemaUrl), `toolgate_test_${channels++}`, options))
  )
