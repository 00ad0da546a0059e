/**
 * tool-gate on an embedded SQLite file: the default store. One file in WAL mode holds requests,
 * session approvals and the audit log; any number of processes may open it. On Bun the driver is
 * `@effect/sql-sqlite-bun` (bun:sqlite), elsewhere `@effect/sql-sqlite-node` (better-sqlite3,
 * which does not load in Bun). A process waiting on an answer is woken when another process
 * commits, by a watch on the database's directory (the WAL file changes on every commit), with a
 * slow poll behind it. WAL checkpoints run in the commits, or in a background thread
 * (`checkpoints: "background"`); with `synchronous: "normal"` (the default) the write-ahead log is
 * flushed to disk in the background as it grows, so a checkpoint's own flush finds little left.
 *
 * @example
 * import { Policy, ToolGate } from "@tool-gate/core"
 * import { ToolGateSqlite } from "@tool-gate/sqlite"
 * import { Effect } from "effect"
 *
 * const GateLive = ToolGateSqlite.layer({
 *   filename: ".toolgate/toolgate.db",
 *   policy: Policy.unsafeMake({ requireApproval: ["bash"] })
 * })
 *
 * const program = Effect.flatMap(ToolGate.ToolGate, (gate) => gate.pending())
 * Effect.runPromise(program.pipe(Effect.provide(GateLive)))
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { SqlClient } from "@effect/sql"
import type { ApprovalStore, CheckpointStore } from "@tool-gate/core"
import type { SqlApprovalStore } from "@tool-gate/core"
import { SqlChangeFeed, ToolGate, ToolGateError, ToolGateSql } from "@tool-gate/core"
import type { ConfigError, Duration } from "effect"
import { Config, Context, Effect, Layer, Option } from "effect"
import { mkdirSync } from "node:fs"
import { dirname, resolve } from "node:path"
import * as FileFeed from "./internal/fileFeed.js"
import * as WalCheckpoints from "./internal/walCheckpoints.js"
import * as WalSync from "./internal/walSync.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface StoreOptions extends SqlApprovalStore.Options {
  /** the database file; its directory is created when missing */
  readonly filename: string
  /** the poll behind the file watch (default 250 ms) */
  readonly fallbackInterval?: Duration.DurationInput | undefined
  /**
   * Where WAL checkpoints (copying the write-ahead log back into the database) run.
   * `inline` (default): SQLite's automatic checkpoint, inside the commit that crosses
   * `walAutocheckpointPages`. `background`: also in a worker thread with its own connection,
   * whenever the log holds a quarter of `walAutocheckpointPages` not yet copied back, so a commit
   * seldom stalls the event loop for a whole checkpoint and its `fsync`s; the store's connection
   * keeps its own automatic checkpoint as a backstop (a worker that cannot start or dies is logged,
   * and the store goes on with that checkpoint alone). The worker costs CPU beside the commits:
   * on two cores it made W6's p99 and W2's sequential rate worse (docs/benchmarks.md), so it is
   * for machines with a core to spare and writes with pauses between them.
   */
  readonly checkpoints?: "background" | "inline" | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends StoreOptions, ToolGate.Options {}

const isBun = typeof (globalThis as { readonly Bun?: unknown }).Bun !== "undefined"

/** What the drivers' `SqliteClient.layer` share; typed here so no driver's types reach this package's `.d.ts`. */
interface Driver {
  readonly SqliteClient: {
    readonly layer: (config: { readonly filename: string; readonly disableWAL: boolean }) => Layer.Layer<
      SqlClient.SqlClient,
      unknown
    >
  }
}

// `@effect/sql-sqlite-node` is a dependency; `@effect/sql-sqlite-bun` an optional peer, so on Bun a
// missing driver is the user's install step to name, not a defect.
const driverPackage = isBun ? "@effect/sql-sqlite-bun" : "@effect/sql-sqlite-node"
const installLine = isBun ? "bun add @effect/sql-sqlite-bun" : "npm install @effect/sql-sqlite-node"

// bun:sqlite keeps the statements of the last texts `Database.prototype.query` ran, 20 by default
// (`Database.MAX_QUERY_CACHE_SIZE`, one setting for the process). The store runs about 60 texts
// under load (a merged statement's text depends on how many calls it carries): at 20 it prepared
// large statements again and again (about 5 µs per W2 round trip). Raised to 256, as many as
// `@tool-gate/pg` keeps prepared per connection (the Node driver keeps 200); never lowered.
const bunQueryCache = 256
// a name bundlers leave alone (bun:sqlite exists only on Bun, where this runs)
const bunSqlite = "bun:sqlite"
const raiseBunQueryCache = async (): Promise<void> => {
  const { Database } = (await import(bunSqlite)) as { readonly Database: { MAX_QUERY_CACHE_SIZE: number } }
  Database.MAX_QUERY_CACHE_SIZE = Math.max(Database.MAX_QUERY_CACHE_SIZE, bunQueryCache)
}

const loadDriver: Effect.Effect<Driver, ToolGateError.PersistenceError> = Effect.tryPromise({
  try: (): Promise<Driver> =>
    isBun
      ? raiseBunQueryCache().then(() => import("@effect/sql-sqlite-bun"))
      : import("@effect/sql-sqlite-node"),
  catch: (cause) =>
    new ToolGateError.PersistenceError({
      operation: "loading the SQLite driver",
      cause: new Error(
        `${driverPackage} is needed and could not be loaded; install it (${installLine}): ${
          cause instanceof Error ? cause.message : String(cause)
        }`
      )
    })
})

/**
 * A `SqlClient` on the file, with the driver for the runtime this runs on. It fails with a
 * `PersistenceError`: a driver that cannot be loaded (naming the package to install), or a file
 * the driver cannot open.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (filename: string): Layer.Layer<SqlClient.SqlClient, ToolGateError.PersistenceError> =>
  Layer.unwrapEffect(
    Effect.map(loadDriver, (driver) => {
      mkdirSync(dirname(resolve(filename)), { recursive: true })
      // The store switches WAL on itself, so a damaged file surfaces as a PersistenceError, not a driver defect.
      const client = driver.SqliteClient.layer({ filename, disableWAL: true }).pipe(
        Layer.mapError((cause) => new ToolGateError.PersistenceError({ operation: "opening the SQLite file", cause }))
      )
      return Layer.map(
        client,
        (context) => Context.make(SqlClient.SqlClient, Context.get(context, SqlClient.SqlClient))
      )
    })
  )

/**
 * Wake-ups for a SQLite file shared by several processes: a watch on the database's directory
 * (while this process commits often, a signal every millisecond instead, on which the store reads
 * `PRAGMA data_version`) plus a slow poll.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFileFeed = (
  filename: string,
  fallbackInterval: Duration.DurationInput = "250 millis"
): Layer.Layer<SqlChangeFeed.SqlChangeFeed> =>
  Layer.sync(SqlChangeFeed.SqlChangeFeed, () => FileFeed.make(filename, fallbackInterval))

/** The worker checkpoints at this fraction of the connection's own (the backstop's) threshold. */
const WORKER_SHARE = 4

/**
 * The durable stores on the file (migrated on open): approvals and checkpoints, one connection;
 * WAL checkpoints also in a background thread with `checkpoints: "background"`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerStore = (
  options: StoreOptions
): Layer.Layer<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore, ToolGateError.PersistenceError> => {
  const opened = ToolGateSql.layerStore(
    options,
    layerClient(options.filename),
    layerFileFeed(options.filename, options.fallbackInterval)
  )
  // with FULL every commit syncs the log already
  const stores = options.synchronous === "full"
    ? opened
    : WalSync.layer({ filename: resolve(options.filename) }).pipe(Layer.provideMerge(opened))
  if (options.checkpoints !== "background") return stores
  const pages = Math.max(1, Math.trunc(options.walAutocheckpointPages ?? 10_000))
  return WalCheckpoints.layer({
    filename: resolve(options.filename),
    threshold: Math.max(1, Math.floor(pages / WORKER_SHARE)),
    backstop: pages,
    synchronous: options.synchronous ?? "normal",
    busyTimeoutMs: options.busyTimeoutMs ?? 5000
  }).pipe(Layer.provideMerge(stores))
}

/**
 * The gate, checkpoints and their stores on the file: everything a pipeline needs.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<ToolGateSql.Services, ToolGateError.PersistenceError> => ToolGateSql.layer(options, layerStore(options))

/**
 * What configuration gives the SQLite gate: the database file and the gate's settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConfigInput extends ToolGate.ConfigInput {
  readonly filename: string
  readonly tablePrefix?: string | undefined
}

/**
 * The settings under their default keys: `TOOLGATE_DB` (the database file, default
 * `.toolgate/toolgate.db`, as the CLI), `TOOLGATE_TABLE_PREFIX`, and the gate's (`ToolGate.config`:
 * `TOOLGATE_POLICY`, `TOOLGATE_POLICY_WATCH`, `TOOLGATE_TTL`, ...).
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<ConfigInput> = Config.map(
  Config.all([
    ToolGate.config,
    Config.string("TOOLGATE_DB").pipe(Config.withDefault(".toolgate/toolgate.db")),
    Config.option(Config.string("TOOLGATE_TABLE_PREFIX"))
  ]),
  ([gate, filename, tablePrefix]) => ({ ...gate, filename, tablePrefix: Option.getOrUndefined(tablePrefix) })
)

/**
 * The gate, checkpoints and their stores on the file, configured like the application's other
 * layers (`config` by default, or a record of one `Config` per field). A missing or unusable
 * setting fails with a `ConfigError` naming its key, an invalid policy file with `PolicyInvalid`;
 * nothing is opened then. The policy file is read through the `FileSystem` in context.
 *
 * @example
 * import { NodeContext } from "@effect/platform-node"
 * import { ToolGateSqlite } from "@tool-gate/sqlite"
 * import { Config, Layer } from "effect"
 *
 * // TOOLGATE_DB, TOOLGATE_POLICY, TOOLGATE_TTL, ... from the environment
 * const GateLive = ToolGateSqlite.layerConfig().pipe(Layer.provide(NodeContext.layer))
 *
 * // or keys of your own
 * const Custom = ToolGateSqlite.layerConfig({
 *   filename: Config.string("APP_GATE_DB"),
 *   policy: Config.string("APP_POLICY"),
 *   watchPolicy: Config.boolean("APP_POLICY_WATCH")
 * })
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
      filename: input.filename,
      ...(input.tablePrefix !== undefined ? { tablePrefix: input.tablePrefix } : {})
    })
  }))
