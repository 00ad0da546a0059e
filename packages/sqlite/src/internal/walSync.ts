/**
 * The write-ahead log flushed to disk a little at a time, off the event loop. With
 * `synchronous = NORMAL` no commit syncs the log: a checkpoint does, first thing, and so waited for
 * every frame written since the last one (10,000 pages, about 40 MB, by default): 30-60 ms on the
 * reference disk, inside the commit that crossed the threshold, the event loop stalled meanwhile
 * (both drivers are synchronous). Here, whenever the log has changed, `fdatasync` runs on libuv's
 * thread pool through a descriptor of its own, one at a time; the checkpoint then finds little
 * left to flush. Durability only gains: data reaches the disk sooner, never later.
 *
 * The log is read-only here and holds no locks (SQLite locks the database file and `-shm` only),
 * so closing this descriptor drops none of SQLite's. A log deleted (its last connection closed) or
 * replaced is opened again by path.
 */
import { Effect, Layer } from "effect"
import type * as Scope from "effect/Scope"
import { closeSync, fdatasync, fstatSync, openSync, statSync } from "node:fs"

/** @internal */
export interface Options {
  /** the database file, resolved */
  readonly filename: string
  /** how often the log is looked at (default `INTERVAL_MS`) */
  readonly intervalMs?: number | undefined
}

/** @internal */
export interface Handle {
  /** flushes completed so far */
  readonly synced: Effect.Effect<number>
  /** looks at the log so far */
  readonly looks: Effect.Effect<number>
}

/**
 * A flush every 50 ms at most leaves a checkpoint about 50 ms of writes to flush (under W2's
 * sequential load, 1,000 round trips/s, about 5 MB).
 */
const INTERVAL_MS = 50

/**
 * Starts the flushes in the scope; closing the scope stops them (the descriptor is closed once a
 * flush in flight has ended). They never hold a process open.
 *
 * @internal
 */
export const start = (options: Options): Effect.Effect<Handle, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const path = `${options.filename}-wal`
        let fd: number | undefined
        // the size and modification time of the log at the last flush
        let flushed: string | undefined
        let flushing = false
        let stopped = false
        let synced = 0
        let looks = 0

        const close = () => {
          try {
            if (fd !== undefined) closeSync(fd)
          } catch {
            // closed already: nothing to do
          }
          fd = undefined
          flushed = undefined
        }
        /** The descriptor of the log at `path` now, opened again when it was deleted or replaced. */
        const current = (): number | undefined => {
          if (fd !== undefined) {
            const named = statSync(path, { throwIfNoEntry: false })
            const held = fstatSync(fd)
            if (named !== undefined && named.ino === held.ino && named.dev === held.dev) return fd
            close()
          }
          try {
            fd = openSync(path, "r")
          } catch {
            return undefined // no log yet (or none any more)
          }
          return fd
        }
        const look = () => {
          looks++
          if (flushing || stopped) return
          try {
            const target = current()
            if (target === undefined) return
            const stats = fstatSync(target, { bigint: true })
            const state = `${stats.size}:${stats.mtimeNs}`
            if (state === flushed) return
            flushed = state
            flushing = true
            fdatasync(target, (error) => {
              flushing = false
              if (error === null) synced++
              // a log that cannot be flushed (a read-only file system, a platform refusing it on a
              // read-only descriptor) is left to the checkpoints, as without this
              else stopped = true
              if (stopped) close()
            })
          } catch {
            // the log went away between the calls: the next look opens it again
            close()
          }
        }
        const timer = setInterval(look, options.intervalMs ?? INTERVAL_MS)
        timer.unref()
        return {
          handle: { synced: Effect.sync(() => synced), looks: Effect.sync(() => looks) } satisfies Handle,
          stop: () => {
            clearInterval(timer)
            stopped = true
            if (!flushing) close()
          }
        }
      }),
      ({ stop }) => Effect.sync(stop)
    ),
    ({ handle }) => handle
  )

/** @internal */
export const layer = (options: Options) => Layer.scopedDiscard(start(options))
