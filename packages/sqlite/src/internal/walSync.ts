/**
 * The write-ahead log flushed to disk a little at a time, off the event loop. With
 * `synchronous = NORMAL` no commit syncs the log: a checkpoint does, first thing, and so waited for
 * every frame written since the last one (10,000 pages, about 40 MB, by default): 30-60 ms on the
 * reference disk, inside the commit that crossed the threshold, the event loop stalled meanwhile
 * (both drivers are synchronous). Here, once `frames` frames have been written since the last
 * flush (the WAL index says how many), `fdatasync` runs on libuv's thread pool through a
 * descriptor of the log, one at a time; the checkpoint then finds little left to flush. Writes that
 * come slowly seldom reach it (the kernel writes their pages back on its own meanwhile), so a
 * lightly used store asks its disk for no more flushes than before. Durability only gains: data
 * reaches the disk sooner, never later.
 *
 * The log is only read here and SQLite never locks it (it locks the database file and `-shm`), so
 * closing its descriptor drops none of SQLite's locks; `-shm` is read through a descriptor that is
 * never closed while the file exists (`shmDescriptor`). A log deleted (its last connection closed)
 * or replaced is opened again by path.
 */
import { Effect, Layer } from "effect"
import type * as Scope from "effect/Scope"
import { closeSync, fdatasync, fstatSync, openSync, statSync } from "node:fs"
import { lastFrame, shmDescriptor } from "./walIndex.js"

/** @internal */
export interface Options {
  /** the database file, resolved */
  readonly filename: string
  /** frames written since the last flush that start the next one (default `FRAMES`) */
  readonly frames?: number | undefined
  /** how often the WAL index is read while the log grows (default `BUSY_MS`) */
  readonly intervalMs?: number | undefined
  /** how often while it does not (default `IDLE_MS`) */
  readonly idleMs?: number | undefined
}

/** @internal */
export interface Handle {
  /** flushes completed so far */
  readonly synced: Effect.Effect<number>
  /** reads of the WAL index so far */
  readonly looks: Effect.Effect<number>
}

/**
 * 1,024 frames, 4 MB: a checkpoint is left that much (and what comes during a flush) to flush
 * itself, a few milliseconds on the reference disk. Under W2's sequential load (about 23 frames per
 * round trip) a flush every 45 round trips.
 */
const FRAMES = 1_024

/** While the log grows: a read of 20 bytes of shared memory every 10 ms, as the checkpoint worker's. */
const BUSY_MS = 10

/** While it does not: a store at rest wakes the process 4 times a second for this. */
const IDLE_MS = 250

/**
 * Starts the flushes in the scope; closing the scope stops them (the log's descriptor is closed
 * once a flush in flight has ended). They never hold a process open.
 *
 * @internal
 */
export const start = (options: Options): Effect.Effect<Handle, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const wal = `${options.filename}-wal`
        const shm = `${options.filename}-shm`
        const threshold = Math.max(1, Math.trunc(options.frames ?? FRAMES))
        let fd: number | undefined
        // the log's last frame when last read, and the frames written since the last flush
        let seen: number | undefined
        let unflushed = 0
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
        }
        /** The descriptor of the log at its path now, opened again when it was deleted or replaced. */
        const log = (): number | undefined => {
          if (fd !== undefined) {
            const named = statSync(wal, { throwIfNoEntry: false })
            const held = fstatSync(fd)
            if (named !== undefined && named.ino === held.ino && named.dev === held.dev) return fd
            close()
          }
          try {
            fd = openSync(wal, "r")
          } catch {
            return undefined // no log yet (or none any more)
          }
          return fd
        }
        /** Reads the WAL index and flushes when due; whether the log moved since the last look. */
        const look = (): boolean => {
          looks++
          const index = shmDescriptor(shm)
          if (index === undefined) {
            // no index: the last connection closed and SQLite deleted it and the log; let go of
            // the log's descriptor, and count the next log from its start
            close()
            seen = undefined
            unflushed = 0
            return false
          }
          const last = lastFrame(index)
          if (last === undefined) return false
          const moved = seen !== undefined && last !== seen
          // a log started over counts from 0: its frames since then (at first, all it holds)
          unflushed += seen === undefined || last < seen ? last : last - seen
          seen = last
          if (flushing || unflushed < threshold) return moved
          try {
            const target = log()
            if (target === undefined) return moved
            const flushed = unflushed
            flushing = true
            fdatasync(target, (error) => {
              flushing = false
              if (error === null) {
                synced++
                // what came since the flush began stays due (none when the log went meanwhile)
                unflushed = Math.max(0, unflushed - flushed)
              } else {
                // a log that cannot be flushed (a read-only file system, a platform refusing it on
                // a read-only descriptor) is left to the checkpoints, as without this
                stopped = true
              }
              if (stopped) close()
            })
          } catch {
            // the log went away between the calls: the next look opens it again
            close()
          }
          return moved
        }
        const busyMs = options.intervalMs ?? BUSY_MS
        const idleMs = Math.max(busyMs, options.idleMs ?? IDLE_MS)
        let timer: ReturnType<typeof setTimeout> | undefined
        const next = (delay: number) => {
          timer = setTimeout(() => {
            if (!stopped) next(look() ? busyMs : idleMs)
          }, delay)
          timer.unref()
        }
        next(busyMs)
        return {
          handle: { synced: Effect.sync(() => synced), looks: Effect.sync(() => looks) } satisfies Handle,
          stop: () => {
            clearTimeout(timer)
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
