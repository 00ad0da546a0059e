import type { SqlChangeFeed } from "@tool-gate/core"
import type { Duration } from "effect"
import { Clock, Effect, Stream } from "effect"
import { type FSWatcher, watch } from "node:fs"
import { basename, dirname, resolve } from "node:path"

const wallClock = Clock.make()

/**
 * A commit's last write to the WAL comes just before its index update in shared memory (which no
 * watch sees): a reader quick enough can look in between and find nothing new. So each burst of
 * changes is signalled again this long after it ends.
 */
const ECHO_MS = 3

/** While this process commits often: how often it signals (the store reads `PRAGMA data_version`). */
const POLL_MS = 1

/** How long after this process's last commit the directory is watched again. */
const QUIET_MS = 100

/**
 * This many commits of this process within `QUIET_MS` make it a busy writer, whose own writes the
 * watch would cost more than a read of `PRAGMA data_version` every millisecond. A process that
 * commits less often keeps the watch, which wakes it sooner.
 */
const BUSY_COMMITS = 50

/** One run of the feed's stream: told of this process's commits. */
interface Run {
  readonly written: () => void
}

/**
 * The SQLite file feed: wake-ups for a database file several processes share, plus a slow poll
 * (`fallbackInterval` of wall-clock time) in case a signal is lost.
 *
 * Other processes' commits are seen by a watch on the database's directory (the `-wal` file changes
 * on every page a commit writes). The watch costs this process for every one of those writes,
 * its own too: on Bun about 15 µs of CPU each, and a round trip of the store writes about 23
 * pages. So while this process commits often (`onCommit`: `BUSY_COMMITS` within `QUIET_MS`), the
 * watch is closed and the feed signals every millisecond instead: the store then reads
 * `PRAGMA data_version` on its connection, which changes only when another connection committed.
 * `QUIET_MS` after its last commit the directory is watched again, with one signal for anything
 * committed in between. (The feed never opens the database's files itself: closing a file
 * descriptor of the `-shm` file would drop the process's locks on it, which SQLite holds.)
 */
export const make = (filename: string, fallbackInterval: Duration.DurationInput): SqlChangeFeed.ChangeFeed => {
  const path = resolve(filename)
  const name = basename(path)
  const runs = new Set<Run>()

  const changes = Stream.asyncPush<undefined>((emit) => {
    const signal = () => emit.single(undefined)
    const following = Effect.acquireRelease(
      Effect.sync(() => {
        let watcher: FSWatcher | undefined
        let echo: ReturnType<typeof setTimeout> | undefined
        let poll: ReturnType<typeof setInterval> | undefined
        let lastWrite = 0
        // commits counted since `since`, while watching
        let since = 0
        let counted = 0

        const unwatch = () => {
          clearTimeout(echo)
          watcher?.close()
          watcher = undefined
        }
        // a watch that cannot start (the directory is gone), or fails, leaves the slow poll; this
        // runs in a timer too, where a throw would end the process
        const startWatching = () => {
          try {
            watcher = watch(dirname(path), (_event, changed) => {
              if (changed !== null && !changed.startsWith(name)) return
              signal()
              clearTimeout(echo)
              echo = setTimeout(signal, ECHO_MS)
            })
            watcher.on("error", unwatch)
          } catch {
            watcher = undefined
          }
        }
        const stopPolling = () => {
          clearInterval(poll)
          poll = undefined
        }
        const startPolling = () => {
          poll = setInterval(() => {
            signal()
            if (performance.now() - lastWrite >= QUIET_MS) {
              stopPolling()
              startWatching()
            }
          }, POLL_MS)
        }

        const run: Run = {
          written: () => {
            const now = performance.now()
            lastWrite = now
            if (poll !== undefined) return
            if (now - since >= QUIET_MS) {
              since = now
              counted = 0
            }
            if (++counted < BUSY_COMMITS) return
            unwatch()
            startPolling()
          }
        }
        runs.add(run)
        startWatching()
        return () => {
          runs.delete(run)
          unwatch()
          stopPolling()
        }
      }),
      (stop) => Effect.sync(stop)
    )
    const slowPoll = Effect.forever(
      Effect.zipRight(Effect.withClock(Effect.sleep(fallbackInterval), wallClock), Effect.sync(signal))
    )
    return Effect.zipRight(following, Effect.forkScoped(slowPoll))
  })

  return {
    onCommit: () =>
      Effect.sync(() => {
        for (const run of runs) run.written()
      }),
    changes
  }
}
