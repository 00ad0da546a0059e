/**
 * tool-gate on PostgreSQL: many gate processes on many hosts share one database; a process
 * waiting on an answer is woken by LISTEN/NOTIFY when any of them commits.
 *
 * @example
 * import { Policy, ToolGate } from "@tool-gate/core"
 * import { ToolGatePg } from "@tool-gate/pg"
 * import { Effect, Redacted } from "effect"
 *
 * const GateLive = ToolGatePg.layer({
 *   url: Redacted.make("postgres://gate@db.internal/toolgate"),
 *   policy: Policy.unsafeMake({ requireApproval: ["deploy"] })
 * })
 *
 * Effect.runPromise(Effect.flatMap(ToolGate.ToolGate, (gate) => gate.pending()).pipe(Effect.provide(GateLive)))
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import type { ApprovalStore, CheckpointStore } from "@tool-gate/core"
import type { SqlApprovalStore, ToolGate } from "@tool-gate/core"
import { SqlChangeFeed, ToolGateError, ToolGateSql } from "@tool-gate/core"
import { Layer, type Redacted } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface StoreOptions extends SqlApprovalStore.Options, SqlChangeFeed.NotifyFeedOptions {
  readonly url: Redacted.Redacted
  /** further `PgClient` settings (pool size, timeouts, ...) */
  readonly client?: Omit<PgClient.PgClientConfig, "url"> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends StoreOptions, ToolGate.Options {}

/**
 * A `PgClient` on `url`. A server it cannot reach when the layer is built is a `PersistenceError`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (
  options: StoreOptions
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, ToolGateError.PersistenceError> =>
  PgClient.layer({ ...options.client, url: options.url }).pipe(
    Layer.mapError((cause) => new ToolGateError.PersistenceError({ operation: "connecting to PostgreSQL", cause }))
  )

/**
 * The durable stores (approvals, woken by LISTEN/NOTIFY with a slow poll behind it, and
 * checkpoints) on one connection pool.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerStore = (
  options: StoreOptions
): Layer.Layer<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore, ToolGateError.PersistenceError> =>
  ToolGateSql.layerStore(
    options,
    layerClient(options),
    SqlChangeFeed.layerNotifyFeed(PgClient.PgClient, {
      channel: options.channel ?? `${options.tablePrefix ?? "toolgate_"}changes`,
      fallbackInterval: options.fallbackInterval
    })
  )

/**
 * The gate, checkpoints and their stores on PostgreSQL.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<ToolGateSql.Services, ToolGateError.PersistenceError> => ToolGateSql.layer(options, layerStore(options))
