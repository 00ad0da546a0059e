/**
 * The approval store on `@effect/sql`: `ApprovalStore`'s typed logic over the SQL driver
 * (`internal/store/sqlDriver.ts`, its statements in `internal/store/sqlStatements.ts`), for SQLite
 * (the embedded default) and PostgreSQL (scale-out), with the migrations of every tool-gate table
 * shipped in `internal/sqlSchema.ts` and the tables under a configurable prefix. An append-only
 * event log (the audit trail) and two projections (requests, session approvals) are written in
 * one transaction per store call; "only if still pending" and "one request per tool call" are
 * decided by the database, so answers are exactly-once across processes. Writers are serialized
 * (SQLite by its write lock, PostgreSQL by an advisory lock), so sequence numbers commit in order
 * and a reader tailing `seq > last` never skips a row.
 *
 * Speed: statements run straight on the connection at hand (no per-statement span), rows are read
 * through a cache of their JSON text (what this process wrote reads back as the very value it
 * wrote; others' rows through a checked `JSON.parse`, the entity Schema decoding only what that
 * check cannot vouch for), and calls made while another runs are committed together (group
 * commit), each still all-or-nothing and exactly-once.
 *
 * Wake-ups: this process's own commits are hinted to `subscribe`rs at once; other processes'
 * commits arrive through a pluggable feed (module `SqlChangeFeed`: `layerPollingFeed` for any
 * database, `layerNotifyFeed` for PostgreSQL LISTEN/NOTIFY).
 *
 * @example
 * import { SqliteClient } from "@effect/sql-sqlite-bun"
 * import { Policy, SqlApprovalStore, ToolGate } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Store = SqlApprovalStore.layer({ tablePrefix: "toolgate_" }).pipe(
 *   Layer.provide(SqlApprovalStore.layerPollingFeed("50 millis")),
 *   // the store turns WAL on itself, so a damaged file is a PersistenceError, not a driver defect
 *   Layer.provide(SqliteClient.layer({ filename: "toolgate.db", disableWAL: true }))
 * )
 * const Gate = ToolGate.layer({ policy: Policy.allowAll }).pipe(Layer.provide(Store))
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import type * as Scope from "effect/Scope"
import { ApprovalStore, makeEncoded, type Service } from "./ApprovalStore.js"
import { lockKey, migrate, migrations, retryOpen, tables } from "./internal/sqlSchema.js"
import * as SqlDriver from "./internal/store/sqlDriver.js"
import { SqlChangeFeed } from "./SqlChangeFeed.js"
import { PersistenceError } from "./ToolGateError.js"

/**
 * The change feeds, from their own module (`SqlChangeFeed`), under the names they had here.
 *
 * @since 0.1.0
 * @category change feeds
 */
export {
  type ChangeFeed,
  layerNotifyFeed,
  layerPollingFeed,
  type Listener,
  makeNotifyFeed,
  type NotifyFeedOptions,
  SqlChangeFeed
} from "./SqlChangeFeed.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** prefix of every table (and index) name; lower-case letters, digits and `_` (default `toolgate_`) */
  readonly tablePrefix?: string | undefined
  /** SQLite: how long a write waits for another process's write lock (default 5000 ms) */
  readonly busyTimeoutMs?: number | undefined
  /**
   * SQLite durability (default `normal`). In WAL mode, `normal` survives a process crash or
   * `kill -9` with nothing lost; only a power loss or OS crash may drop the last commits (the file
   * stays consistent). `full` syncs the WAL on every commit and survives those too, slower.
   */
  readonly synchronous?: "normal" | "full" | undefined
  /**
   * SQLite: how many pages the write-ahead log may hold before it is copied back into the database
   * (default 10,000, about 40 MB). Each copy stalls the commit that triggers it; SQLite's own
   * default of 1,000 made those stalls 10 times as frequent (pause p99 4-5 ms instead of 0.7 ms in
   * W2) for a WAL a tenth the size. `@tool-gate/sqlite` can also run checkpoints in a background
   * thread at a quarter of this (its `checkpoints: "background"`), keeping this one as the backstop.
   */
  readonly walAutocheckpointPages?: number | undefined
  /**
   * Whose clock judges deadlines in the writing transactions: whether an answer or extension
   * comes too late, whether an expiry is due, whether a session approval is still active.
   * `database` (default): the database's own clock, so gate processes on hosts with skewed clocks
   * agree. `caller`: the time the gate passes in (its `Clock`), for tests on the `TestClock`.
   */
  readonly clock?: "database" | "caller" | undefined
  /**
   * PostgreSQL: keep two connections of the pool while the store is open, one for its writing
   * transactions and one for its reads while it is free, instead of taking one from the pool for
   * each. That costs the client less CPU per statement, and a waiter woken by an answer reads it
   * sooner. A connection is given back after a failure on it (a read, a `BEGIN` or a spend then runs
   * again once on a fresh one). Default `false`: this layer does not know the pool's size, and the two must
   * leave room for everything else using the pool (a pool they exhaust waits for ever).
   * `@tool-gate/pg` turns it on when its pool has at least 4 connections.
   */
  readonly keepConnections?: boolean | undefined
}

/**
 * Opens the store: sets SQLite up (busy timeout, WAL, temporary files in memory), runs the migrations, and returns the
 * service: the typed logic of `ApprovalStore.makeEncoded` over the SQL driver. Needs a `SqlClient`
 * and a `SqlChangeFeed`; the feed's fiber lives in the given scope and runs only while someone is
 * subscribed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<Service, PersistenceError, SqlClient.SqlClient | SqlChangeFeed | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const prefix = options.tablePrefix ?? "toolgate_"
    // lower case only: PostgreSQL folds unquoted names, and the Migrator probes its table unquoted
    if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) {
      return yield* Effect.dieMessage(`SqlApprovalStore: invalid table prefix ${JSON.stringify(prefix)}`)
    }
    const t = tables(prefix)
    const setUp: Effect.Effect<unknown, SqlError> = sql.onDialectOrElse({
      sqlite: () =>
        Effect.all([
          sql`PRAGMA busy_timeout = ${sql.literal(String(Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000))))}`,
          sql`PRAGMA journal_mode = WAL`,
          // a statement in a transaction journals the pages it rewrites, to be undone alone; past
          // 64 KiB SQLite spills that journal to a file it creates and deletes, for every batch of
          // answers (W7): kept in memory, only for the statement's span
          sql`PRAGMA temp_store = MEMORY`,
          sql`PRAGMA synchronous = ${sql.literal(options.synchronous === "full" ? "FULL" : "NORMAL")}`,
          sql`PRAGMA wal_autocheckpoint = ${
            sql.literal(String(Math.max(1, Math.trunc(options.walAutocheckpointPages ?? 10_000))))
          }`
        ], { discard: true }),
      orElse: () => Effect.void
    })
    // Processes opening one database at once wait for each other: the migrations run under the
    // writers' lock, and a busy database (or a lost DDL race with an older version) is retried.
    yield* retryOpen(Effect.zipRight(
      PersistenceError.refail("open")(setUp),
      PersistenceError.refail("migrate")(migrate({ loader: migrations(t), table: t.migrations, lock: lockKey(prefix) }))
    ))
    const driver = yield* SqlDriver.make({
      tables: t,
      feed: yield* SqlChangeFeed,
      clock: options.clock ?? "database",
      keepConnections: options.keepConnections ?? false
    })
    return yield* makeEncoded(driver)
  })

/**
 * The store as a layer. Migrations run when it is built (concurrent builders are serialized by the
 * Migrator); provide a `SqlClient` and a `SqlChangeFeed` (`layerPollingFeed` or `layerNotifyFeed`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: Options
): Layer.Layer<ApprovalStore, PersistenceError, SqlClient.SqlClient | SqlChangeFeed> =>
  Layer.scoped(ApprovalStore, make(options))
