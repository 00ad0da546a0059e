import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit, Schedule } from "effect"

/** The prefixed table names of one store. */
export interface Tables {
  readonly prefix: string
  readonly migrations: string
  readonly events: string
  readonly requests: string
  readonly sessionApprovals: string
  readonly decisions: string
  /** PostgreSQL: the last `seq` handed out (one row), moved on in the writing transaction */
  readonly eventSeq: string
  readonly checkpoints: string
  /** which checkpoint each request belongs to */
  readonly checkpointRequests: string
  /** the checkpoint store's own migrations table, before migration 0005 took its place */
  readonly legacyCheckpointMigrations: string
}

export const tables = (prefix: string): Tables => ({
  prefix,
  migrations: `${prefix}migrations`,
  events: `${prefix}events`,
  requests: `${prefix}requests`,
  sessionApprovals: `${prefix}session_approvals`,
  decisions: `${prefix}decisions`,
  eventSeq: `${prefix}event_seq`,
  checkpoints: `${prefix}checkpoints`,
  checkpointRequests: `${prefix}checkpoint_requests`,
  legacyCheckpointMigrations: `${prefix}checkpoint_migrations`
})

/**
 * The key of the PostgreSQL advisory lock that serializes the writers of one table set (FNV-1a of
 * the prefix), so sequence numbers commit in order and a tailer reading `seq > last` skips nothing.
 */
export const lockKey = (prefix: string): number => {
  let hash = 0x811c9dc5
  for (const char of `tool-gate:${prefix}`) {
    hash ^= char.codePointAt(0)!
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/**
 * The migrations of every tool-gate table under one prefix, in one migrations table: the approval
 * store and the checkpoint store both run all of them when they open, so either may open first.
 * One schema for SQLite and PostgreSQL; only the sequence column differs. Times are ms epoch in
 * BIGINT columns; each row also holds its entity encoded as JSON text (decoded with the entity's
 * Schema on read), and the columns exist for the indexes and the conditional updates.
 */
export const migrations = (t: Tables): Migrator.Loader =>
  Migrator.fromRecord({
    "0001_create_tables": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const seqColumn = sql.onDialectOrElse({
        pg: () => sql.literal("BIGSERIAL PRIMARY KEY"),
        orElse: () => sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
      })
      const index = (table: string, name: string, columns: string, where = "") =>
        sql`CREATE INDEX IF NOT EXISTS ${sql(`${table}_${name}_idx`)} ON ${sql(table)} (${sql.literal(columns)})${
          sql.literal(where)
        }`
      const pending = " WHERE status = 'pending'"

      yield* sql`CREATE TABLE IF NOT EXISTS ${sql(t.events)} (
        seq ${seqColumn},
        at BIGINT NOT NULL,
        type TEXT NOT NULL,
        outcome TEXT NOT NULL,
        session_key TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        request_id TEXT,
        event TEXT NOT NULL
      )`
      // Every index costs each decision's insert; these serve the audit query's filters (the
      // request index is dropped again by 0002). Type and outcome filters ride on the seq order.
      yield* index(t.events, "at", "at")
      yield* index(t.events, "session", "session_key, seq")
      yield* index(t.events, "tool_name", "tool_name, seq")
      yield* index(t.events, "request", "request_id")

      yield* sql`CREATE TABLE IF NOT EXISTS ${sql(t.requests)} (
        request_id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        requested_seq BIGINT,
        expires_at BIGINT NOT NULL,
        warned_at BIGINT,
        consumed_at BIGINT,
        request TEXT NOT NULL,
        UNIQUE (session_key, tool_call_id)
      )`
      yield* index(t.requests, "pending_session", "session_key, created_at, requested_seq", pending)
      yield* index(t.requests, "pending", "created_at, requested_seq", pending)
      yield* index(t.requests, "pending_expiry", "expires_at", pending)

      yield* sql`CREATE TABLE IF NOT EXISTS ${sql(t.sessionApprovals)} (
        id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        seq BIGINT NOT NULL,
        granted_seq BIGINT NOT NULL,
        revoked_at BIGINT,
        expires_at BIGINT,
        approval TEXT NOT NULL
      )`
      yield* index(t.sessionApprovals, "seq", "seq, granted_seq")
      yield* index(t.sessionApprovals, "session", "session_key, tool_name")
    }),
    // No query reads events by request id (waiters are woken from the tail by seq), and every
    // index costs each event's insert a page in the write-ahead log.
    "0002_drop_events_request_index": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      yield* sql`DROP INDEX IF EXISTS ${sql(`${t.events}_request_idx`)}`
    }),
    // Policy decisions by tool call id, so that asking again replays the decision (requests are
    // kept by call id in their own table).
    "0003_create_decisions": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      yield* sql`CREATE TABLE IF NOT EXISTS ${sql(t.decisions)} (
        session_key TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        decision TEXT NOT NULL,
        PRIMARY KEY (session_key, tool_call_id)
      )`
    }),
    // A gap-free seq on PostgreSQL. BIGSERIAL's nextval is not transactional: every rolled-back or
    // killed writer burned a number, and a hole could not be told from a deletion. The counter row
    // is updated in the writing transaction, so a rollback takes its number back; like SQLite's
    // AUTOINCREMENT counter (transactional already), it never hands a deleted tail's numbers out again.
    // Writers of an older version, which leave seq to the column default, now fail loudly.
    "0004_gap_free_seq": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      yield* sql.onDialectOrElse({
        pg: () =>
          Effect.gen(function*() {
            yield* sql`CREATE TABLE ${sql(t.eventSeq)} (
              id INTEGER PRIMARY KEY CHECK (id = 1),
              last BIGINT NOT NULL
            )`
            yield* sql`INSERT INTO ${sql(t.eventSeq)} (id, last) SELECT 1, COALESCE(MAX(seq), 0) FROM ${sql(t.events)}`
            // quoted, as the table was created
            const [serial] = yield* sql<
              { readonly name: string | null }
            >`SELECT pg_get_serial_sequence(${`"${t.events}"`}, 'seq') AS name`
            yield* sql`ALTER TABLE ${sql(t.events)} ALTER COLUMN seq DROP DEFAULT`
            if (serial?.name) yield* sql`DROP SEQUENCE ${sql.literal(serial.name)}`
          }),
        orElse: () => Effect.void
      })
    }),
    // Checkpoints, which kept their own migrations table (three steps) until now: the steps that
    // table does not record run here, and it goes.
    "0005_create_checkpoints": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const [legacy] = yield* sql.onDialectOrElse({
        pg: () =>
          sql<
            { readonly present: boolean }
          >`SELECT to_regclass(${t.legacyCheckpointMigrations}::text) IS NOT NULL AS present`,
        orElse: () =>
          sql<{ readonly present: number }>`SELECT COUNT(*) AS present FROM sqlite_master
            WHERE type = 'table' AND name = ${t.legacyCheckpointMigrations}`
      })
      let done = 0
      if (legacy?.present) {
        const [last] = yield* sql<{ readonly id: number | string | null }>`SELECT MAX(migration_id) AS id FROM ${
          sql(t.legacyCheckpointMigrations)
        }`
        done = Number(last?.id ?? 0)
      }
      if (done < 1) {
        yield* sql`CREATE TABLE IF NOT EXISTS ${sql(t.checkpoints)} (
          token TEXT PRIMARY KEY,
          name TEXT NOT NULL,
          state TEXT NOT NULL,
          request_ids TEXT NOT NULL,
          created_at BIGINT NOT NULL,
          resumed_at BIGINT
        )`
        yield* sql`CREATE TABLE IF NOT EXISTS ${sql(t.checkpointRequests)} (
          request_id TEXT PRIMARY KEY,
          token TEXT NOT NULL
        )`
      }
      // `resumed_at` (the first name) means "completed"; the lease says who is resuming it.
      if (done < 2) {
        yield* sql`ALTER TABLE ${sql(t.checkpoints)} ADD COLUMN claimed_by TEXT`
        yield* sql`ALTER TABLE ${sql(t.checkpoints)} ADD COLUMN claimed_until BIGINT`
        yield* sql`CREATE INDEX IF NOT EXISTS ${sql(`${t.checkpoints}_open`)} ON ${
          sql(t.checkpoints)
        } (name, created_at)
          WHERE resumed_at IS NULL`
      }
      // The fencing token: a lease is `(claimed_by, claims)`; every claim counts one up.
      if (done < 3) yield* sql`ALTER TABLE ${sql(t.checkpoints)} ADD COLUMN claims BIGINT NOT NULL DEFAULT 0`
      if (legacy?.present) yield* sql`DROP TABLE ${sql(t.legacyCheckpointMigrations)}`
    }),
    // The audit log's hash chain (AuditChain): each event's hash and the hash it is chained to.
    // Events written before this step keep neither; the chain starts after them.
    "0006_event_hash_chain": Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      yield* sql`ALTER TABLE ${sql(t.events)} ADD COLUMN prev_hash TEXT`
      yield* sql`ALTER TABLE ${sql(t.events)} ADD COLUMN hash TEXT`
    })
  })

/** Failures worth another try when opening: another process holds the lock, or won a DDL race. */
const transient = (error: unknown): boolean => {
  for (let cause = error, depth = 0; cause !== null && typeof cause === "object" && depth < 8; depth++) {
    const { code, message } = cause as { readonly code?: unknown; readonly message?: unknown }
    if (typeof code === "string" && /^(SQLITE_(BUSY|LOCKED)|23505|42P07|40P01|40001)/.test(code)) return true
    if (typeof message === "string" && /database (table )?is locked/.test(message)) return true
    cause = (cause as { readonly cause?: unknown }).cause
  }
  return false
}

/**
 * Retries `open` (set-up and migrations) while it fails for a transient reason, for up to about
 * half a minute: many processes opening one database at once wait on each other's locks.
 */
export const retryOpen = <A, E, R>(open: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(open, {
    schedule: Schedule.exponential("10 millis").pipe(
      Schedule.either(Schedule.spaced("1 second")),
      Schedule.jittered,
      Schedule.upTo("30 seconds")
    ),
    while: transient
  })

/**
 * Runs the migrations of `loader` under the writers' lock (SQLite `BEGIN IMMEDIATE`, which waits on
 * the busy timeout; PostgreSQL the advisory lock `lock`), so any number of processes may open one
 * database at once: each one either migrates it or, after waiting, finds it migrated. Left to
 * itself the Migrator reads the migrations table first and takes a busy error on its bookkeeping
 * insert for "another process is migrating", and returns before that process's tables exist.
 */
export const migrate = (options: {
  readonly loader: Migrator.Loader
  readonly table: string
  readonly lock: number
}): Effect.Effect<unknown, Migrator.MigrationError | SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    return yield* Effect.scoped(Effect.flatMap(sql.reserve, (conn) => {
      const statement = (text: string) => conn.executeUnprepared(text, [], undefined)
      const onConn = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0] as const)
      const begin = isPg
        ? Effect.zipRight(
          Effect.zipRight(statement("BEGIN"), statement(`SELECT pg_advisory_xact_lock(${options.lock})`)),
          // the Migrator probes for its table with a query that fails when it is missing, which
          // would abort this transaction: create it first (its shape is the Migrator's)
          onConn(sql`CREATE TABLE IF NOT EXISTS ${sql(options.table)} (
            migration_id integer primary key,
            created_at timestamp with time zone not null default now(),
            name text not null
          )`)
        )
        : statement("BEGIN IMMEDIATE")
      const rollback = Effect.ignore(statement("ROLLBACK"))
      return Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const run = yield* Effect.exit(restore(Effect.zipRight(
            begin,
            onConn(Migrator.make({})({ loader: options.loader, table: options.table }))
          )))
          const done = Exit.isSuccess(run) ? yield* Effect.exit(statement("COMMIT")) : run
          if (Exit.isFailure(done)) yield* rollback
          return yield* done
        })
      )
    }))
  })
