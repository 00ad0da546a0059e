/**
 * The SQL checkpoint driver, in the same database as the approval store (SQLite or PostgreSQL),
 * migrated with it. "A request belongs to one checkpoint", "one lease holder at a time" and
 * "completed once" are enforced by the database: a primary key on the request id and conditional
 * updates.
 *
 * @example
 * import { SqliteClient } from "@effect/sql-sqlite-bun"
 * import { SqlCheckpointStore } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Checkpoints = SqlCheckpointStore.layer().pipe(
 *   Layer.provide(SqliteClient.layer({ filename: "toolgate.db" }))
 * )
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option, Schema } from "effect"
import {
  CheckpointStore,
  type Encoded,
  type LeasedChange,
  makeEncoded,
  type Row,
  type Service
} from "./CheckpointStore.js"
import * as EventLoopTurn from "./internal/eventLoopTurn.js"
import * as LostConnection from "./internal/lostConnection.js"
import { lockKey, migrate, migrations, retryOpen, tables } from "./internal/sqlSchema.js"
import { PersistenceError } from "./ToolGateError.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** prefix of the table names, as for `SqlApprovalStore` (default `toolgate_`) */
  readonly tablePrefix?: string | undefined
}

const DbInt = Schema.Union(Schema.Number, Schema.NumberFromString)
const decodeRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  token: Schema.String,
  name: Schema.String,
  state: Schema.String,
  request_ids: Schema.parseJson(Schema.Array(Schema.String)),
  created_at: DbInt,
  claimed_by: Schema.NullOr(Schema.String),
  claimed_until: Schema.NullOr(DbInt),
  claims: DbInt,
  resumed_at: Schema.NullOr(DbInt)
})))
const decodeClaims = Schema.decodeUnknown(Schema.Array(Schema.Struct({ claims: DbInt })))

/** Signals, inside the transaction, that a request was taken: the transaction rolls back. */
class Taken {
  readonly _tag = "Taken"
}

/** The same ids, in any order (each list holds an id once). */
const sameIds = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => {
  const ids = new Set(a)
  return a.length === b.length && b.every((id) => ids.has(id))
}

const leasedWrite = {
  Renew: "renew checkpoint lease",
  Update: "update checkpoint",
  Complete: "complete checkpoint"
} as const

/**
 * The SQL checkpoint driver. Opening it runs the tool-gate migrations (`internal/sqlSchema.ts`),
 * as `SqlApprovalStore` does, so either store may open a database first.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeDriver = (options: Options = {}): Effect.Effect<Encoded, PersistenceError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const prefix = options.tablePrefix ?? "toolgate_"
    // lower case only: PostgreSQL folds unquoted names, and the Migrator probes its table unquoted
    if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) {
      return yield* Effect.dieMessage(`SqlCheckpointStore: invalid table prefix ${JSON.stringify(prefix)}`)
    }
    const t = tables(prefix)
    const checkpoints = sql(t.checkpoints)
    const owners = sql(t.checkpointRequests)
    // Named, never `*`: a statement kept prepared (PostgreSQL) fails once a later migration adds
    // a column, since its result would change shape.
    const columnNames = [
      "token",
      "name",
      "state",
      "request_ids",
      "created_at",
      "resumed_at",
      "claimed_by",
      "claimed_until",
      "claims"
    ]
    const columns = sql.literal(columnNames.join(", "))
    const columnsOfC = sql.literal(columnNames.map((column) => `c.${column}`).join(", "))
    // under the writers' lock, retried while another process migrates
    yield* retryOpen(
      PersistenceError.refail("migrate checkpoints")(
        migrate({ loader: migrations(t), table: t.migrations, lock: lockKey(prefix) })
      )
    )

    const read = (rows: ReadonlyArray<unknown>) =>
      Effect.map(decodeRows(rows), (decoded) =>
        decoded.map((row): Row => ({
          token: row.token,
          name: row.name,
          state: row.state,
          requestIds: row.request_ids,
          createdAt: row.created_at,
          claims: row.claims,
          ...(row.claimed_by !== null ? { claimedBy: row.claimed_by, claimedUntil: row.claimed_until! } : {}),
          ...(row.resumed_at !== null ? { completedAt: row.resumed_at } : {})
        })))
    const readOne = (rows: ReadonlyArray<unknown>) =>
      Effect.map(read(rows), (decoded) => Option.fromNullable(decoded[0]))

    /** The SET clause of a leased write; `resumed_at` (migration 0005's first name) means "completed". */
    const setLeased = (change: LeasedChange) => {
      switch (change._tag) {
        case "Renew":
          return sql`claimed_until = ${change.claimedUntil}`
        case "Update":
          return sql`state = ${change.state}`
        case "Complete":
          return sql`resumed_at = ${change.completedAt}`
      }
    }

    /** Not completed, or (a completion) completed by this very completion already. */
    const notCompleted = (change: LeasedChange) =>
      change._tag === "Complete"
        ? sql`(resumed_at IS NULL OR resumed_at = ${change.completedAt})`
        : sql`resumed_at IS NULL`

    // SQLite: a loop of checkpoint calls lets the event loop turn now and then (eventLoopTurn.ts)
    const fair = sql.onDialectOrElse({
      sqlite: () => EventLoopTurn.every(),
      orElse: () => <A, E, R>(call: Effect.Effect<A, E, R>) => call
    })

    return {
      // A save runs again on another connection while it loses its own, even when its COMMIT's
      // answer was lost: run again after it took effect, it finds its own request rows and is true.
      save: (row) =>
        fair(
          LostConnection.retryWhileLost(LostConnection.lostAsFailure(sql.withTransaction(
            Effect.gen(function*() {
              const claimed = yield* sql`INSERT INTO ${owners} ${
                sql.insert(row.requestIds.map((requestId) => ({ request_id: requestId, token: row.token })))
              } ON CONFLICT DO NOTHING RETURNING request_id`
              if (claimed.length === row.requestIds.length) {
                yield* sql`INSERT INTO ${checkpoints} ${
                  sql.insert({
                    token: row.token,
                    name: row.name,
                    state: row.state,
                    request_ids: JSON.stringify(row.requestIds),
                    created_at: row.createdAt
                  })
                }`
                return true
              }
              const own = yield* sql<
                { request_id: string }
              >`SELECT request_id FROM ${owners} WHERE token = ${row.token}`
              if (claimed.length === 0 && sameIds(own.map((r) => r.request_id), row.requestIds)) return true
              return yield* Effect.fail(new Taken())
            })
          ))).pipe(
            Effect.catchIf((error): error is Taken => error instanceof Taken, () => Effect.succeed(false)),
            PersistenceError.refail("save checkpoint")
          )
        ),
      // reads run again on another connection while they lose theirs (a pool's idle connections
      // may all have ended: a restart, a load balancer's idle timeout)
      find: (by) =>
        fair(
          LostConnection.retryWhileLost(
            "token" in by
              ? sql`SELECT ${columns} FROM ${checkpoints} WHERE token = ${by.token}`
              : sql`SELECT ${columnsOfC} FROM ${checkpoints} c JOIN ${owners} o ON o.token = c.token WHERE o.request_id = ${by.requestId}`
          ).pipe(Effect.flatMap(readOne), PersistenceError.refail("find checkpoint"))
        ),
      // A claim and a leased write are one statement each, and run again on another connection
      // while they lose theirs: one that took effect before its answer was lost gives the same
      // answer again (the owner claims again, with the next fence; a leased write finds its own
      // lease, and a completion its own completion).
      claim: (token, owner, now, until) =>
        fair(
          LostConnection.retryWhileLost(
            sql`UPDATE ${checkpoints} SET claimed_by = ${owner}, claimed_until = ${until}, claims = claims + 1
            WHERE token = ${token} AND resumed_at IS NULL
              AND (claimed_by IS NULL OR claimed_by = ${owner} OR claimed_until <= ${now})
            RETURNING claims`
          ).pipe(
            Effect.flatMap(decodeClaims),
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.claims)),
            PersistenceError.refail("claim checkpoint")
          )
        ),
      writeLeased: (token, owner, fence, change) =>
        fair(
          LostConnection.retryWhileLost(
            sql`UPDATE ${checkpoints} SET ${setLeased(change)}
            WHERE token = ${token} AND ${notCompleted(change)} AND claimed_by = ${owner} AND claims = ${fence}
            RETURNING token`
          ).pipe(
            Effect.map((rows) => rows.length === 1),
            PersistenceError.refail(leasedWrite[change._tag])
          )
        ),
      open: (name) =>
        fair(
          LostConnection.retryWhileLost(
            sql`SELECT ${columns} FROM ${checkpoints} WHERE name = ${name} AND resumed_at IS NULL ORDER BY created_at, token`
          ).pipe(Effect.flatMap(read), PersistenceError.refail("list open checkpoints"))
        )
    }
  })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, PersistenceError, SqlClient.SqlClient> =>
  Effect.map(makeDriver(options), makeEncoded)

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<CheckpointStore, PersistenceError, SqlClient.SqlClient> =>
  Layer.effect(CheckpointStore, make(options))
