import { ApprovalStore, CheckpointStore, SqlCheckpointStore } from "@tool-gate/core"
import { describe } from "bun:test"
import { Layer } from "effect"
import { pgStore, pgUrl, sqliteStore } from "../support/sqlStores.js"
import { checkpointSuite } from "./checkpointSuite.js"

checkpointSuite("memory", () => Layer.merge(ApprovalStore.layerMemory, CheckpointStore.layerMemory))
checkpointSuite("sqlite", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(sqliteStore())))

const url = pgUrl
if (url === undefined) {
  console.warn("PostgreSQL checkpoint tests SKIPPED: TOOLGATE_PG_URL not set")
  describe.skip("PostgreSQL (TOOLGATE_PG_URL not set)", () => {
    checkpointSuite("postgres", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStore(""))))
  })
} else {
  checkpointSuite("postgres", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStore(url))))
}
