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
import type * as FileSystem from "@effect/platform/FileSystem"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import type { ApprovalStore, CheckpointStore } from "@tool-gate/core"
import type { SqlApprovalStore } from "@tool-gate/core"
import { SqlChangeFeed, ToolGate, ToolGateError, ToolGateSql } from "@tool-gate/core"
import { Config, type ConfigError, Duration, Effect, Layer, Option, type Redacted } from "effect"
import { connectionOptions } from "./internal/connectionOptions.js"
import * as Listener from "./internal/listener.js"
import * as PreparedPool from "./internal/preparedPool.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface StoreOptions extends SqlApprovalStore.Options, SqlChangeFeed.NotifyFeedOptions {
  readonly url: Redacted.Redacted
  /** further `PgClient` settings (pool size, timeouts, ...) */
  readonly client?: Omit<PgClient.PgClientConfig, "url"> | undefined
  /**
   * Keep the statements the pool's connections repeat prepared (named), so that the server parses
   * and plans each once per connection rather than on every run (`true` by default). Statements
   * with 1 to 64 parameters are named, the first 256 texts of the pool. Turn it off behind a
   * pooler in transaction mode that does not carry prepared statements (PgBouncer before 1.21, or
   * with `max_prepared_statements = 0`). A prepared statement fails once a table it reads `*` of
   * gains a column: the stores list their columns; statements of your own on this client should too.
   */
  readonly preparedStatements?: boolean | undefined
  /**
   * How often the connection the store LISTENs on is checked with a query that must answer within
   * as long (default 30 seconds). When it ends, errs or leaves the check unanswered (a restarted
   * server, a load balancer that forgot the idle connection) the store listens again on a new
   * connection; meanwhile the slow poll (`fallbackInterval`) wakes waiters. The check also keeps the
   * idle connection's flow alive through such a load balancer.
   */
  readonly listenCheckInterval?: Duration.DurationInput | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends StoreOptions, ToolGate.Options {}

/**
 * A `PgClient` on `url`, keeping the statements it repeats prepared unless `preparedStatements`
 * is `false`. A server it cannot reach when the layer is built is a `PersistenceError`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (
  options: StoreOptions
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, ToolGateError.PersistenceError> =>
  (options.preparedStatements === false ? PgClient.layer : PreparedPool.layer)({ ...options.client, url: options.url })
    .pipe(
      Layer.mapError((cause) => new ToolGateError.PersistenceError({ operation: "connecting to PostgreSQL", cause }))
    )

/** The approval store keeps 2 connections of the pool (`keepConnections`) when the pool has room. */
const keepsConnections = (options: StoreOptions) => (options.client?.maxConnections ?? DEFAULT_POOL_SIZE) >= 4

// pg-pool's own default
const DEFAULT_POOL_SIZE = 10

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
    { ...options, keepConnections: options.keepConnections ?? keepsConnections(options) },
    layerClient(options),
    Layer.effect(
      SqlChangeFeed.SqlChangeFeed,
      SqlChangeFeed.makeNotifyFeed(
        Listener.make(
          // named apart from the pool's, so an operator can tell it in pg_stat_activity
          connectionOptions({
            ...options.client,
            url: options.url,
            applicationName: `${options.client?.applicationName ?? "@effect/sql-pg"}/listen`
          }),
          Duration.decode(options.listenCheckInterval ?? "30 seconds")
        ),
        {
          channel: options.channel ?? `${options.tablePrefix ?? "toolgate_"}changes`,
          fallbackInterval: options.fallbackInterval
        }
      )
    )
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

/**
 * `TOOLGATE_PG_PREPARED_STATEMENTS` (`StoreOptions.preparedStatements`), `true` when unset.
 *
 * @since 0.1.0
 * @category config
 */
export const preparedStatementsConfig: Config.Config<boolean> = Config.withDefault(
  Config.boolean("TOOLGATE_PG_PREPARED_STATEMENTS"),
  true
)

/**
 * What configuration gives the PostgreSQL gate: the database URL (kept `Redacted`: it may hold a
 * password) and the gate's settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConfigInput extends ToolGate.ConfigInput {
  readonly url: Redacted.Redacted
  readonly tablePrefix?: string | undefined
  readonly preparedStatements?: boolean | undefined
}

/**
 * The settings under their default keys: `TOOLGATE_DATABASE_URL` (required), `TOOLGATE_TABLE_PREFIX`,
 * `TOOLGATE_PG_PREPARED_STATEMENTS` (`false` behind a pooler without prepared statements), and
 * the gate's (`ToolGate.config`: `TOOLGATE_POLICY`, `TOOLGATE_POLICY_WATCH`, `TOOLGATE_TTL`, ...).
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<ConfigInput> = Config.map(
  Config.all([
    ToolGate.config,
    Config.redacted("TOOLGATE_DATABASE_URL"),
    Config.option(Config.string("TOOLGATE_TABLE_PREFIX")),
    preparedStatementsConfig
  ]),
  ([gate, url, tablePrefix, preparedStatements]) => ({
    ...gate,
    url,
    tablePrefix: Option.getOrUndefined(tablePrefix),
    preparedStatements
  })
)

/**
 * The gate, checkpoints and their stores on PostgreSQL, configured like the application's other
 * layers (`config` by default, or a record of one `Config` per field). A missing or unusable
 * setting fails with a `ConfigError` naming its key, an invalid policy file with `PolicyInvalid`;
 * nothing is opened then. The policy file is read through the `FileSystem` in context.
 *
 * @example
 * import { NodeContext } from "@effect/platform-node"
 * import { ToolGatePg } from "@tool-gate/pg"
 * import { Config, Layer } from "effect"
 *
 * const GateLive = ToolGatePg.layerConfig({
 *   url: Config.redacted("DATABASE_URL"),
 *   policy: Config.string("POLICY_FILE"),
 *   ttl: Config.duration("APPROVAL_TTL")
 * }).pipe(Layer.provide(NodeContext.layer))
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  settings: Config.Config.Wrap<ConfigInput> = config,
  options?: Omit<Options, keyof ConfigInput | "reload">
): Layer.Layer<
  ToolGateSql.Services,
  ConfigError.ConfigError | ToolGateError.PolicyInvalid | ToolGateError.PersistenceError,
  FileSystem.FileSystem
> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const input = yield* Config.unwrap(settings)
    const gate = yield* ToolGate.optionsConfig(Config.succeed(input), options)
    return layer({
      ...options,
      ...gate,
      url: input.url,
      ...(input.tablePrefix !== undefined ? { tablePrefix: input.tablePrefix } : {}),
      ...(input.preparedStatements !== undefined ? { preparedStatements: input.preparedStatements } : {})
    })
  }))
