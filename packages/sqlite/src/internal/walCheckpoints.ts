/**
 * WAL checkpoints in a background thread. SQLite copies the write-ahead log back into the database
 * inside the commit that crosses `wal_autocheckpoint`, on the committing connection; both drivers
 * are synchronous, so that commit stalled the whole event loop for the checkpoint and its `fsync`s
 * (about 23 ms per 10,000 pages on the reference disk). Here a `worker_threads` Worker with its own
 * connection (better-sqlite3 on Node, bun:sqlite on Bun) runs `PRAGMA wal_checkpoint(PASSIVE)`
 * whenever the log holds `threshold` pages not yet copied back. PASSIVE takes no writer's lock and
 * waits on nobody, so commits go on while it runs.
 *
 * The worker learns the log's size from the WAL-index header in the `-shm` file (its documented
 * layout, https://www.sqlite.org/walformat.html: `mxFrame` at byte 16, `nBackfill` at 96, native
 * byte order), read every few milliseconds through a descriptor the main thread opened (see
 * `opened`): the main thread does nothing else for it.
 *
 * The main connection keeps its own automatic checkpoint as a backstop, at four times the
 * worker's threshold: a worker that cannot start, dies or falls behind leaves the log bounded as before.
 * Under writes that never pause, a checkpoint running beside them never catches up with the last
 * frames, and SQLite starts the log over only once every frame is copied back; the backstop then
 * copies the frames left, on the main thread, with `fsync`s of little data (5-10 ms on the
 * reference disk, against 25-60 ms for a whole checkpoint). Writes with pauses between them let
 * the worker catch up, and the log starts over with no checkpoint on the main thread at all.
 *
 * A process killed mid-checkpoint is safe by SQLite's design: the log is only reused after every
 * frame is copied back and synced, and the next opener rebuilds the index from the log.
 *
 * The worker's code is inline (`eval`), not a file beside this module: bundles (the CLI's) carry
 * no separate file to load.
 */
import { ApprovalStore } from "@tool-gate/core"
import { Deferred, Effect, Exit, Layer } from "effect"
import type * as Scope from "effect/Scope"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { shmDescriptor } from "./walIndex.js"

/** @internal */
export interface Options {
  readonly filename: string
  /** pages in the log not yet copied back that start a checkpoint */
  readonly threshold: number
  readonly synchronous: "normal" | "full"
  readonly busyTimeoutMs: number
  /** how often the worker reads the log's size (default 10 ms) */
  readonly intervalMs?: number | undefined
  /** the better-sqlite3 module to load on Node; resolved from here when missing (tests give a bad one) */
  readonly driver?: string | undefined
}

/** @internal */
export interface LayerOptions extends Options {
  /** the store's connection's own automatic checkpoint, in pages: what takes over without the worker */
  readonly backstop: number
}

/** @internal */
export interface Handle {
  /** settles when the worker has opened its connection, or failed to */
  readonly ready: Effect.Effect<void, Error>
  /** settles when the worker's thread has ended, with the reason it ended early if it did */
  readonly exited: Effect.Effect<string | undefined>
}

const isBun = typeof (globalThis as { readonly Bun?: unknown }).Bun !== "undefined"

// CommonJS, run by `new Worker(code, { eval: true })` on Node and on Bun.
const code = `"use strict"
const { parentPort, workerData } = require("node:worker_threads")
const { readSync } = require("node:fs")
const { endianness } = require("node:os")
const { filename, threshold, intervalMs, synchronous, busyTimeoutMs, driver, shmDescriptor } = workerData
const Database = driver === undefined ? require("bun:sqlite").Database : require(driver)
const db = new Database(filename)
db.exec("PRAGMA busy_timeout = " + busyTimeoutMs)
db.exec("PRAGMA synchronous = " + synchronous)
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)")
const header = Buffer.alloc(100)
const u32 = endianness() === "LE" ? (at) => header.readUInt32LE(at) : (at) => header.readUInt32BE(at)
// the main thread's descriptor of -shm (none: no index when it started, so no checkpoints here)
const behind = () => {
  if (shmDescriptor === undefined) return 0
  try {
    if (readSync(shmDescriptor, header, 0, 100, 0) < 100) return 0
  } catch {
    return 0
  }
  return u32(16) - u32(96)
}
const timer = setInterval(() => {
  if (behind() >= threshold) checkpoint.get()
}, intervalMs)
parentPort.on("message", () => {
  clearInterval(timer)
  db.close()
  parentPort.close()
})
parentPort.postMessage("ready")
`

const resolveDriver = (): string => {
  const require = createRequire(import.meta.url)
  try {
    return require.resolve("better-sqlite3")
  } catch {
    // installed as @effect/sql-sqlite-node's dependency only (strict layouts such as pnpm's)
    return createRequire(require.resolve("@effect/sql-sqlite-node")).resolve("better-sqlite3")
  }
}

const describe = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)

/**
 * Starts the worker in the scope; closing the scope stops it (its connection closed, its thread
 * ended). It never holds a process open. A worker that cannot be created fails; one that fails
 * later reports it through `ready` or `exited`.
 *
 * @internal
 */
export const start = (options: Options): Effect.Effect<Handle, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const shm = yield* Effect.sync(() => shmDescriptor(`${options.filename}-shm`))
    const ready = yield* Deferred.make<void, Error>()
    const exited = yield* Deferred.make<string | undefined>()
    const worker = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          const driver = isBun ? undefined : options.driver ?? resolveDriver()
          return new Worker(code, {
            eval: true,
            workerData: {
              filename: options.filename,
              threshold: Math.max(1, Math.trunc(options.threshold)),
              intervalMs: options.intervalMs ?? 10,
              synchronous: options.synchronous === "full" ? "FULL" : "NORMAL",
              busyTimeoutMs: Math.max(0, Math.trunc(options.busyTimeoutMs)),
              driver,
              shmDescriptor: shm
            }
          })
        },
        catch: (cause) => new Error(`cannot start the checkpoint worker: ${describe(cause)}`)
      }),
      (worker) =>
        Effect.flatMap(Effect.all([Deferred.isDone(ready), Deferred.isDone(exited)]), ([started, ended]) => {
          if (ended) return Effect.void
          // still loading its driver (up to 100 ms or more on Node): a short-lived process need not
          // wait for it; it has no connection yet, or one it has not used
          if (!started) return Effect.promise(() => worker.terminate())
          return Effect.zipRight(
            Effect.sync(() => {
              // held open until it has closed its connection, so the scope's later finalizers run
              worker.ref()
              worker.postMessage("stop")
            }),
            Deferred.await(exited).pipe(
              Effect.timeoutTo({
                duration: "5 seconds",
                onSuccess: () => Effect.void,
                onTimeout: () => Effect.promise(() => worker.terminate())
              }),
              Effect.flatten
            )
          )
        })
    )
    let failure: string | undefined
    worker.on("message", () => Deferred.unsafeDone(ready, Exit.void))
    worker.on("error", (cause) => {
      failure = describe(cause)
      Deferred.unsafeDone(ready, Exit.fail(new Error(failure)))
    })
    worker.on("exit", (code) => {
      const reason = failure ?? (code === 0 ? undefined : `exit code ${code}`)
      Deferred.unsafeDone(ready, Exit.fail(new Error(reason ?? "ended before it started")))
      Deferred.unsafeDone(exited, Exit.succeed(reason))
    })
    worker.unref()
    return { ready: Deferred.await(ready), exited: Deferred.await(exited) }
  })

/**
 * The worker, started once the store has set the file up (WAL on). A worker that cannot start or
 * dies is logged; the connection's own checkpoint, at the backstop, goes on alone.
 *
 * @internal
 */
export const layer = (options: LayerOptions): Layer.Layer<never, never, ApprovalStore.ApprovalStore> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    yield* ApprovalStore.ApprovalStore
    const fallback = `WAL checkpoints run in the commits again (every ${options.backstop} pages)`
    yield* start(options).pipe(
      Effect.tap((worker) =>
        worker.exited.pipe(
          Effect.flatMap((reason) =>
            reason === undefined
              ? Effect.void
              : Effect.logWarning(`tool-gate: the SQLite checkpoint worker stopped (${reason}); ${fallback}`)
          ),
          Effect.forkScoped
        )
      ),
      Effect.catchAll((error) => Effect.logWarning(`tool-gate: ${error.message}; ${fallback}`))
    )
  }))
