import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/** The prefixed table names of one store. */
export interface Tables {
  readonly prefix: string
  readonly migrations: string
  readonly events: string
  readonly requests: string
  readonly sessionApprovals: string
  readonly decisions: string
}

export const tables = (prefix: string): Tables => ({
  prefix,
  migrations: `${prefix}migrations`,
  events: `${prefix}events`,
  requests: `${prefix}requests`,
  sessionApprovals: `${prefix}session_approvals`,
  decisions: `${prefix}decisions`
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
    })
  })
