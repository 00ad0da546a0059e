/**
 * One migrations table per database: a database the previous version left, with the checkpoint
 * store's migrations in a table of their own, opens and migrates forward with its rows intact.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { CheckpointStore } from "@tool-gate/core"
import { SqlCheckpointStore } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Layer, Option } from "effect"
import { join } from "node:path"
import { migrations, tables } from "../../../../packages/core/src/internal/sqlSchema.js"
import { describe, it } from "../../../support/effectTest.js"
import { postgresUrl } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import { open, request, requested } from "./fixtures.js"

/** The checkpoint store's migrations as the previous version shipped them, in their own table. */
const previousCheckpointMigrations = Migrator.fromRecord({
  "0001_create_checkpoints": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE toolgate_checkpoints (token TEXT PRIMARY KEY, name TEXT NOT NULL, state TEXT NOT NULL,
      request_ids TEXT NOT NULL, created_at BIGINT NOT NULL, resumed_at BIGINT)`
    yield* sql`CREATE TABLE toolgate_checkpoint_requests (request_id TEXT PRIMARY KEY, token TEXT NOT NULL)`
  }),
  "0002_resume_lease": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE toolgate_checkpoints ADD COLUMN claimed_by TEXT`
    yield* sql`ALTER TABLE toolgate_checkpoints ADD COLUMN claimed_until BIGINT`
    yield* sql`CREATE INDEX toolgate_checkpoints_open ON toolgate_checkpoints (name, created_at) WHERE resumed_at IS NULL`
  }),
  "0003_claim_fence": Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`ALTER TABLE toolgate_checkpoints ADD COLUMN claims BIGINT NOT NULL DEFAULT 0`
  )
})

/** The tables the previous version created, with a request and a claimed checkpoint in them. */
const previousVersion = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* Migrator.make({})({
    loader: migrations(tables("toolgate_")).pipe(Effect.map((all) => all.filter(([id]) => id <= 4))),
    table: "toolgate_migrations"
  })
  yield* Migrator.make({})({ loader: previousCheckpointMigrations, table: "toolgate_checkpoint_migrations" })
  yield* sql`INSERT INTO toolgate_checkpoints (token, name, state, request_ids, created_at, claimed_by, claimed_until, claims)
    VALUES ('cp-1', 'wait', '{"step":1}', '["r-1"]', 10, 'worker-a', 20, 1)`
  yield* sql`INSERT INTO toolgate_checkpoint_requests (request_id, token) VALUES ('r-1', 'cp-1')`
})

const upgrades = <E>(layer: Layer.Layer<SqlClient.SqlClient, E>) =>
  Effect.gen(function*() {
    yield* Effect.provide(previousVersion, layer)
    // the checkpoint store opens first, then the approval store
    const checkpoints = yield* Effect.provide(SqlCheckpointStore.make(), layer)
    const { sql, store } = yield* open(storeOver(layer))
    expect(yield* checkpoints.find({ requestId: "r-1" })).toEqual(Option.some<CheckpointStore.Row>({
      token: "cp-1",
      name: "wait",
      state: "{\"step\":1}",
      requestIds: ["r-1"],
      createdAt: 10,
      claimedBy: "worker-a",
      claimedUntil: 20,
      claims: 1
    }))
    // the lease still fences: the holder renews, another owner waits until it runs out
    expect(yield* checkpoints.renew("cp-1", "worker-a", 1, 30)).toBe(true)
    expect(yield* checkpoints.claim("cp-1", "worker-b", 29, 40)).toEqual(Option.none())
    expect(yield* checkpoints.claim("cp-1", "worker-b", 30, 40)).toEqual(Option.some(2))
    expect((yield* store.createRequest(request(1), requested(request(1))))._tag).toBe("Created")
    const ids = yield* sql<
      { readonly migration_id: number }
    >`SELECT migration_id FROM toolgate_migrations ORDER BY migration_id`
    expect(ids.map((row) => Number(row.migration_id))).toEqual([1, 2, 3, 4, 5, 6])
    const legacy = yield* Effect.either(sql`SELECT * FROM toolgate_checkpoint_migrations`)
    expect(legacy._tag).toBe("Left")
  })

describe("migrations", () => {
  it.live("SQLite: a file of the previous version (checkpoint migrations apart) migrates forward, rows intact", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      yield* upgrades(yield* Layer.memoize(sqliteClient(join(dir, "toolgate.db"))))
    }))

  const url = postgresUrl("migration test")
  if (url !== undefined) {
    it.live("PostgreSQL: a schema of the previous version (checkpoint migrations apart) migrates forward, rows intact", () =>
      Effect.gen(function*() {
        yield* upgrades(yield* Layer.memoize(pgClient(yield* pgSchema(url))))
      }))
  }
})
