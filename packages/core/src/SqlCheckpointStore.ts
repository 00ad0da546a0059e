/**
 * Checkpoints in SQL, in the same database as the approval store (SQLite or PostgreSQL), with
 * their own migrations. "A request belongs to one checkpoint", "one lease holder at a time" and
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
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option, Schema } from "effect"
import { CheckpointStore, type Row, type Service } from "./CheckpointStore.js"
import { lockKey, migrate, retryOpen } from "./internal/sqlSchema.js"
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

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, PersistenceError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const prefix = options.tablePrefix ?? "toolgate_"
    // lower case only: PostgreSQL folds unquoted names, and the Migrator probes its table unquoted
    if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) {
      return yield* Effect.dieMessage(`SqlCheckpointStore: invalid table prefix ${JSON.stringify(prefix)}`)
    }
    const checkpoints = `${prefix}checkpoints`
    const owners = `${prefix}checkpoint_requests`
    // under the writers' lock, retried while another process migrates (as the approval store does)
    yield* retryOpen(
      PersistenceError.refail("migrate checkpoints")(migrate({
        table: `${prefix}checkpoint_migrations`,
        lock: lockKey(prefix),
        loader: Migrator.fromRecord({
          "0001_create_checkpoints": Effect.gen(function*() {
            yield* sql`CREATE TABLE IF NOT EXISTS ${sql(checkpoints)} (
            token TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            state TEXT NOT NULL,
            request_ids TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            resumed_at BIGINT
          )`
            yield* sql`CREATE TABLE IF NOT EXISTS ${sql(owners)} (
            request_id TEXT PRIMARY KEY,
            token TEXT NOT NULL
          )`
          }),
          // `resumed_at` (0001's name) now means "completed"; the lease says who is resuming it.
          "0002_resume_lease": Effect.gen(function*() {
            yield* sql`ALTER TABLE ${sql(checkpoints)} ADD COLUMN claimed_by TEXT`
            yield* sql`ALTER TABLE ${sql(checkpoints)} ADD COLUMN claimed_until BIGINT`
            yield* sql`CREATE INDEX IF NOT EXISTS ${sql(`${checkpoints}_open`)} ON ${
              sql(checkpoints)
            } (name, created_at)
            WHERE resumed_at IS NULL`
          }),
          // The fencing token: a lease is `(claimed_by, claims)`; every claim counts one up.
          "0003_claim_fence": sql`ALTER TABLE ${sql(checkpoints)} ADD COLUMN claims BIGINT NOT NULL DEFAULT 0`
        })
      }))
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

    return CheckpointStore.of({
      save: (row) =>
        Effect.gen(function*() {
          const claimed = yield* sql`INSERT INTO ${sql(owners)} ${
            sql.insert(row.requestIds.map((requestId) => ({ request_id: requestId, token: row.token })))
          } ON CONFLICT DO NOTHING RETURNING request_id`
          if (claimed.length !== row.requestIds.length) return yield* Effect.fail(new Taken())
          yield* sql`INSERT INTO ${sql(checkpoints)} ${
            sql.insert({
              token: row.token,
              name: row.name,
              state: row.state,
              request_ids: JSON.stringify(row.requestIds),
              created_at: row.createdAt
            })
          }`
          return true
        }).pipe(
          sql.withTransaction,
          Effect.catchIf((error): error is Taken => error instanceof Taken, () => Effect.succeed(false)),
          PersistenceError.refail("save checkpoint")
        ),
      find: (by) =>
        ("token" in by
          ? sql`SELECT * FROM ${sql(checkpoints)} WHERE token = ${by.token}`
          : sql`SELECT c.* FROM ${sql(checkpoints)} c JOIN ${
            sql(owners)
          } o ON o.token = c.token WHERE o.request_id = ${by.requestId}`)
          .pipe(Effect.flatMap(readOne), PersistenceError.refail("find checkpoint")),
      claim: (token, owner, now, until) =>
        sql`UPDATE ${sql(checkpoints)} SET claimed_by = ${owner}, claimed_until = ${until}, claims = claims + 1
          WHERE token = ${token} AND resumed_at IS NULL
            AND (claimed_by IS NULL OR claimed_by = ${owner} OR claimed_until <= ${now})
          RETURNING claims`.pipe(
          Effect.flatMap(decodeClaims),
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.claims)),
          PersistenceError.refail("claim checkpoint")
        ),
      renew: (token, owner, fence, until) =>
        sql`UPDATE ${sql(checkpoints)} SET claimed_until = ${until}
          WHERE token = ${token} AND resumed_at IS NULL AND claimed_by = ${owner} AND claims = ${fence}
          RETURNING token`.pipe(
          Effect.map((rows) => rows.length === 1),
          PersistenceError.refail("renew checkpoint lease")
        ),
      update: (token, owner, fence, state) =>
        sql`UPDATE ${sql(checkpoints)} SET state = ${state}
          WHERE token = ${token} AND resumed_at IS NULL AND claimed_by = ${owner} AND claims = ${fence}
          RETURNING token`.pipe(Effect.map((rows) => rows.length === 1), PersistenceError.refail("update checkpoint")),
      complete: (token, owner, fence, at) =>
        sql`UPDATE ${sql(checkpoints)} SET resumed_at = ${at}
          WHERE token = ${token} AND resumed_at IS NULL AND claimed_by = ${owner} AND claims = ${fence}
          RETURNING token`.pipe(
          Effect.map((rows) => rows.length === 1),
          PersistenceError.refail("complete checkpoint")
        ),
      open: (name) =>
        sql`SELECT * FROM ${sql(checkpoints)} WHERE name = ${name} AND resumed_at IS NULL ORDER BY created_at, token`
          .pipe(Effect.flatMap(read), PersistenceError.refail("list open checkpoints"))
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<CheckpointStore, PersistenceError, SqlClient.SqlClient> =>
  Layer.effect(CheckpointStore, make(options))
