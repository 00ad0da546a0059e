/**
 * The gate on a SQL database, whatever its driver: the durable stores (approvals, woken by a
 * change feed, and checkpoints) over one `SqlClient`, and the gate and checkpoints over them.
 * `@tool-gate/sqlite` and `@tool-gate/pg` are this with their client and their change feed.
 *
 * @example
 * import type { SqlClient } from "@effect/sql"
 * import { Policy, SqlChangeFeed, ToolGateSql } from "@tool-gate/core"
 * import type { Layer } from "effect"
 *
 * declare const client: Layer.Layer<SqlClient.SqlClient>
 *
 * const GateLive = ToolGateSql.layer(
 *   { policy: Policy.unsafeMake({ requireApproval: ["deploy"] }) },
 *   ToolGateSql.layerStore({}, client, SqlChangeFeed.layerPollingFeed())
 * )
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Layer } from "effect"
import type { ApprovalStore } from "./ApprovalStore.js"
import * as Checkpoint from "./Checkpoint.js"
import type { CheckpointStore } from "./CheckpointStore.js"
import * as SqlApprovalStore from "./SqlApprovalStore.js"
import type { SqlChangeFeed } from "./SqlChangeFeed.js"
import * as SqlCheckpointStore from "./SqlCheckpointStore.js"
import type * as ToolGate from "./ToolGate.js"
import type { PersistenceError } from "./ToolGateError.js"

/**
 * The durable stores on one client (migrated on open): approvals, woken by `feed`, and
 * checkpoints. The feed may use what the client layer provides (PostgreSQL's `PgClient`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerStore = <C, CE, FE, FR>(
  options: SqlApprovalStore.Options,
  client: Layer.Layer<C | SqlClient.SqlClient, CE>,
  feed: Layer.Layer<SqlChangeFeed, FE, FR>
): Layer.Layer<
  ApprovalStore | CheckpointStore,
  PersistenceError | CE | FE,
  Exclude<FR, C | SqlClient.SqlClient>
> =>
  Layer.merge(
    SqlApprovalStore.layer(options).pipe(Layer.provide(feed)),
    SqlCheckpointStore.layer(options)
  ).pipe(Layer.provide(client))

/**
 * What `layer` provides: the gate, checkpoints and their stores.
 *
 * @since 0.1.0
 * @category models
 */
export type Services = ToolGate.ToolGate | Checkpoint.Checkpoints | ApprovalStore | CheckpointStore

/**
 * The gate, checkpoints and their stores: everything a pipeline needs.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <E, R>(
  options: ToolGate.Options,
  stores: Layer.Layer<ApprovalStore | CheckpointStore, E, R>
): Layer.Layer<Services, PersistenceError | E, R> => Checkpoint.layerWithGate(options).pipe(Layer.provideMerge(stores))
