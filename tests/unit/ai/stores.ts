/**
 * The stores an agent-loop scenario runs on: memory, SQLite (a fresh file) and PostgreSQL (a
 * fresh schema, when `TOOLGATE_PG_URL` is set), each wrapped by the gate and checkpoints.
 */
import { ApprovalStore, CheckpointStore, SqlCheckpointStore } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { describe as bunDescribe } from "bun:test"
import { Effect, Layer } from "effect"
import { join } from "node:path"
import { pgStore, pgUrl, tempDir } from "../../support/sqlStores.js"

export type Stores = () => Layer.Layer<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore, unknown>

/** Declares `suite` once per store. */
export const onEveryStore = (title: string, suite: (name: string, stores: Stores) => void): void => {
  suite("memory", () => Layer.merge(ApprovalStore.layerMemory, CheckpointStore.layerMemory))
  suite(
    "sqlite",
    () =>
      Layer.unwrapScoped(
        Effect.map(tempDir, (dir) => ToolGateSqlite.layerStore({ filename: join(dir, "gate.db"), clock: "caller" }))
      )
  )
  const url = pgUrl
  if (url === undefined) {
    console.warn(`PostgreSQL ${title} SKIPPED: TOOLGATE_PG_URL not set`)
    bunDescribe.skip(`${title} (postgres: TOOLGATE_PG_URL not set)`, () => {})
  } else {
    suite("postgres", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStore(url))))
  }
}
