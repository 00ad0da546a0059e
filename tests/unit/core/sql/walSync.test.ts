/**
 * The SQLite write-ahead log flushed in the background (packages/sqlite's internal/walSync.ts): it
 * flushes once enough frames were written and not while the store rests, follows a log deleted and
 * made again, closing its descriptor leaves SQLite's locks in place, and a store runs it unless
 * every commit syncs the log anyway.
 */
import { ApprovalStore } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Effect, Exit, Layer, Schedule, Scope } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import * as WalSync from "../../../../packages/sqlite/src/internal/walSync.js"
import { it } from "../../../support/effectTest.js"
import { descriptorsOf, locksHeldOn } from "../../../support/procFiles.js"
import { tempDir } from "../../../support/sqlStores.js"
import { walIndex } from "../../../support/walIndex.js"
import { decision } from "./fixtures.js"

/** Flushes after every frame, looking every millisecond. */
const eager = { frames: 1, intervalMs: 1, idleMs: 1 } as const

/** Waits until `read` gives a value `until` accepts (the flushes run on timers and libuv's pool). */
const eventually = <A>(read: Effect.Effect<A>, until: (a: A) => boolean) =>
  read.pipe(Effect.repeat({ until, schedule: Schedule.spaced("2 millis") }), Effect.timeout("10 seconds"))

/**
 * A store on `filename`, built in `scope`, and a write of the `n`-th decision through it. With
 * `synchronous: "full"` (every commit syncs the log) it runs no flushes of its own beside the ones
 * a test starts.
 */
const storeOn = (filename: string, scope: Scope.Scope, synchronous: "normal" | "full" = "full") =>
  Effect.map(
    Layer.buildWithScope(ToolGateSqlite.layerStore({ filename, checkpoints: "inline", synchronous }), scope),
    (context) => (n: number) =>
      Effect.provide(Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.append([decision(n)])), context)
  )

it.live("the log is flushed while a store writes, and not while it rests", () =>
  Effect.gen(function*() {
    const filename = join(yield* tempDir, "gate.db")
    const append = yield* storeOn(filename, yield* Effect.scope)
    yield* append(1)
    const sync = yield* WalSync.start({ filename, ...eager })
    // the store's first write, then every later one, is flushed
    yield* eventually(sync.synced, (n) => n >= 1)
    for (let n = 2; n <= 20; n++) {
      const before = yield* sync.synced
      yield* append(n)
      yield* eventually(sync.synced, (after) => after > before)
    }
    // at rest: looks go on, flushes do not
    const synced = yield* sync.synced
    const looks = yield* sync.looks
    yield* eventually(sync.looks, (n) => n >= looks + 20)
    expect(yield* sync.synced).toBe(synced)
  }))

it.live("writes short of the threshold are not flushed; the frames past it are", () =>
  Effect.gen(function*() {
    const filename = join(yield* tempDir, "gate.db")
    const append = yield* storeOn(filename, yield* Effect.scope)
    yield* append(1)
    const frames = () => walIndex(filename).frames
    // the frames in the log count at the first look: 40 more are due a flush
    const base = frames()
    const sync = yield* WalSync.start({ filename, frames: base + 40, intervalMs: 1, idleMs: 1 })
    // a few commits, a few frames each: under the threshold, however long it looks
    for (let n = 2; n <= 4; n++) yield* append(n)
    const looks = yield* sync.looks
    yield* eventually(sync.looks, (n) => n >= looks + 20)
    expect(frames() - base).toBeLessThan(40)
    expect(yield* sync.synced).toBe(0)
    // on past it: one flush
    let n = 5
    while (frames() - base < 60) yield* append(n++)
    yield* eventually(sync.synced, (done) => done >= 1)
  }))

// Closing a descriptor drops every POSIX lock the process holds on its file. SQLite locks the
// database file and -shm, never the log: the flushes close the log's descriptor and keep the one
// of -shm they read the index through.
it.live("stopping closes its descriptor of the log and leaves SQLite's locks in place", () =>
  Effect.gen(function*() {
    const filename = join(yield* tempDir, "gate.db")
    const append = yield* storeOn(filename, yield* Effect.scope)
    yield* append(1)
    const held = { database: locksHeldOn(filename), shm: locksHeldOn(`${filename}-shm`) }
    expect(held.shm).toBeGreaterThan(0)
    const sqlites = {
      database: descriptorsOf(filename),
      shm: descriptorsOf(`${filename}-shm`),
      wal: descriptorsOf(`${filename}-wal`)
    }
    const scope = yield* Scope.make()
    const sync = yield* WalSync.start({ filename, ...eager }).pipe(Scope.extend(scope))
    yield* eventually(sync.synced, (n) => n >= 1)
    // beside SQLite's: one of the log, one of -shm (to read the WAL index), none of the database
    expect({
      database: descriptorsOf(filename),
      shm: descriptorsOf(`${filename}-shm`),
      wal: descriptorsOf(`${filename}-wal`)
    }).toEqual({ database: sqlites.database, shm: sqlites.shm + 1, wal: sqlites.wal + 1 })
    yield* Scope.close(scope, Exit.void)
    // the log's is closed; the one of -shm stays open while the file exists (closing it would drop
    // SQLite's locks there)
    expect(descriptorsOf(`${filename}-wal`)).toBe(sqlites.wal)
    expect(descriptorsOf(`${filename}-shm`)).toBe(sqlites.shm + 1)
    expect({ database: locksHeldOn(filename), shm: locksHeldOn(`${filename}-shm`) }).toEqual(held)
    const looks = yield* sync.looks
    yield* Effect.sleep("20 millis")
    expect(yield* sync.looks).toBe(looks)
    yield* append(2)
  }))

it.live("a log deleted with its last connection is let go, and the next one is flushed", () =>
  Effect.gen(function*() {
    const filename = join(yield* tempDir, "gate.db")
    const wal = `${filename}-wal`
    const flushes = yield* Scope.make()
    const sync = yield* WalSync.start({ filename, ...eager }).pipe(Scope.extend(flushes))
    // no log yet: nothing to flush
    yield* eventually(sync.looks, (n) => n >= 5)
    expect(yield* sync.synced).toBe(0)
    const first = yield* Scope.make()
    yield* Effect.flatMap(storeOn(filename, first), (append) => append(1))
    yield* eventually(sync.synced, (n) => n >= 1)
    // the last connection closes: SQLite deletes the log; the flushes let go of it
    yield* Scope.close(first, Exit.void)
    expect(existsSync(wal)).toBe(false)
    yield* eventually(Effect.sync(() => descriptorsOf(`${wal} (deleted)`)), (n) => n === 0)
    const synced = yield* sync.synced
    const second = yield* Scope.make()
    yield* Effect.flatMap(storeOn(filename, second), (append) => append(2))
    yield* eventually(sync.synced, (n) => n > synced)
    // the one it holds is of the new log
    const open = descriptorsOf(wal)
    yield* Scope.close(flushes, Exit.void)
    expect(descriptorsOf(wal)).toBe(open - 1)
    yield* Scope.close(second, Exit.void)
  }))

it.live("a store writing with synchronous NORMAL flushes its log; with FULL it runs no flushes", () =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    /** Descriptors a store has beyond SQLite's: of -shm (the flushes read the WAL index), of the log. */
    const extra = Effect.gen(function*() {
      const counts: Record<string, { readonly shm: number; readonly wal: number }> = {}
      for (const synchronous of ["full", "normal"] as const) {
        const filename = join(dir, `${synchronous}.db`)
        const append = yield* storeOn(filename, yield* Effect.scope, synchronous)
        // about 5 frames per commit: past the 1,024 frames that start a flush
        for (let n = 1; n <= 400; n++) yield* append(n)
        const descriptors = Effect.sync(() => ({
          shm: descriptorsOf(`${filename}-shm`),
          wal: descriptorsOf(`${filename}-wal`)
        }))
        if (synchronous === "normal") yield* eventually(descriptors, (now) => now.wal > counts.full!.wal)
        counts[synchronous] = yield* descriptors
      }
      return { shm: counts.normal!.shm - counts.full!.shm, wal: counts.normal!.wal - counts.full!.wal }
    })
    expect(yield* Effect.scoped(extra)).toEqual({ shm: 1, wal: 1 })
  }))
