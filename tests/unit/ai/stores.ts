/**
 * The stores an agent-loop scenario runs on: memory, SQLite (a fresh file) and PostgreSQL (a
 * fresh schema, when `TOOLGATE_PG_URL` is set), each wrapped by the gate and checkpoints.
 */
import { ApprovalStore, CheckpointStore, SqlCheckpointStore } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer } from "effect"
import { join } from "node:path"
import { describePostgres } from "../../support/postgresSuite.js"
import { pgStore, tempDir } from "../../support/sqlStores.js"

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
  describePostgres(
    title,
    (url) => suite("postgres", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStore(url))))
  )
}
