import { ApprovalStore, CheckpointStore, SqlCheckpointStore } from "@tool-gate/core"
import { Layer } from "effect"
import { describePostgres } from "../support/postgresSuite.js"
import { pgStore, sqliteStore } from "../support/sqlStores.js"
import { checkpointSuite } from "./checkpointSuite.js"

checkpointSuite("memory", () => Layer.merge(ApprovalStore.layerMemory, CheckpointStore.layerMemory))
checkpointSuite("sqlite", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(sqliteStore())))

describePostgres(
  "checkpoint tests",
  (url) => checkpointSuite("postgres", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStore(url))))
)
