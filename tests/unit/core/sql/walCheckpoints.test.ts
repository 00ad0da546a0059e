/**
 * The SQLite checkpoint worker's life (on Bun, bun:sqlite; Node's runs in
 * tests/process/walCheckpoints.test.ts): closing its scope ends its thread, and a worker that
 * cannot open the file is logged while the store goes on with the connection's own checkpoint.
 */
import { ApprovalStore } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Effect, Either, Exit, Layer, Logger, Option, Schedule, Scope } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import * as WalCheckpoints from "../../../../packages/sqlite/src/internal/walCheckpoints.js"
import { it } from "../../../support/effectTest.js"
import { descriptorsOf, locksHeldOn } from "../../../support/procFiles.js"
import { tempDir } from "../../../support/sqlStores.js"
import { walIndex } from "../../../support/walIndex.js"
import { decision } from "./fixtures.js"

const settings = { threshold: 10, synchronous: "normal", busyTimeoutMs: 1000 } as const

it.live("closing the scope ends the worker's thread, after it has checkpointed", () =>
  Effect.gen(function*() {
    const filename = join(yield* tempDir, "gate.db")
    const store = yield* Layer.build(ToolGateSqlite.layerStore({ filename, checkpoints: "inline" }))
    const scope = yield* Scope.make()
    const worker = yield* WalCheckpoints.start({ filename, ...settings }).pipe(Scope.extend(scope))
    yield* worker.ready
    // the migrations' frames alone are past 10 pages: the worker copies them back
    yield* Effect.sync(() => walIndex(filename).backfilled).pipe(
      Effect.repeat({ until: (backfilled) => backfilled > 0, schedule: Schedule.spaced("5 millis") })
    )
    expect(Option.isNone(yield* Effect.timeoutOption(worker.exited, "20 millis"))).toBe(true)
    yield* Scope.close(scope, Exit.void)
    // ended by the time the scope's close returned, and ended cleanly
    expect(yield* Effect.timeoutOption(worker.exited, "1 millis")).toEqual(Option.some(undefined))
    yield* Effect.provide(Effect.flatMap(ApprovalStore.ApprovalStore, (s) => s.append([decision(1)])), store)
  }))

it.live("a worker that cannot open the file is logged; the store goes on without it", () =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const filename = join(dir, "gate.db")
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => logged.push(String(message)))
    const started = yield* Effect.either(
      WalCheckpoints.start({ filename: join(dir, "missing", "gate.db"), ...settings }).pipe(
        Effect.flatMap((worker) => worker.ready),
        Effect.scoped
      )
    )
    expect(Either.isLeft(started)).toBe(true)
    const context = yield* Layer.build(
      WalCheckpoints.layer({ filename: join(dir, "missing", "gate.db"), backstop: 80, ...settings }).pipe(
        Layer.provideMerge(ToolGateSqlite.layerStore({ filename, checkpoints: "inline", walAutocheckpointPages: 80 })),
        Layer.provide(Logger.replace(Logger.defaultLogger, logger))
      )
    )
    const store = Effect.runSync(Effect.provide(ApprovalStore.ApprovalStore, context))
    yield* Effect.sync(() => logged.join("\n")).pipe(
      Effect.repeat({
        until: (text) => text.includes("checkpoint worker stopped"),
        schedule: Schedule.spaced("5 millis")
      }),
      Effect.timeout("10 seconds")
    )
    expect(logged.join("\n")).toContain("WAL checkpoints run in the commits again (every 80 pages)")
    // the store writes on, its own checkpoint keeping the log bounded
    for (let n = 1; n <= 200; n++) yield* store.append([decision(n)])
    expect(walIndex(filename).frames).toBeLessThan(200)
  }))

// Closing a descriptor drops every POSIX lock the process holds on its file, SQLite's too: a worker
// that closed its descriptor of -shm at stop left the store's connection unlocked there, and another
// process opening the database would rebuild the index under it.
it.live("a worker that stops leaves the store's locks on -shm in place", () =>
  Effect.gen(function*() {
    const filename = join(yield* tempDir, "gate.db")
    // synchronous FULL: the store flushes no log of its own, so the descriptors of -shm counted
    // here are SQLite's and the worker's
    const store = yield* Layer.build(
      ToolGateSqlite.layerStore({ filename, checkpoints: "inline", synchronous: "full" })
    )
    yield* Effect.provide(Effect.flatMap(ApprovalStore.ApprovalStore, (s) => s.append([decision(1)])), store)
    const held = locksHeldOn(`${filename}-shm`)
    expect(held).toBeGreaterThan(0)
    const sqlites = descriptorsOf(`${filename}-shm`)
    const scope = yield* Scope.make()
    const worker = yield* WalCheckpoints.start({ filename, ...settings }).pipe(Scope.extend(scope))
    yield* worker.ready
    // a descriptor of -shm beside SQLite's, for the worker to read the index through
    expect(descriptorsOf(`${filename}-shm`)).toBe(sqlites + 1)
    yield* Scope.close(scope, Exit.void)
    expect(locksHeldOn(`${filename}-shm`)).toBe(held)
    yield* Effect.provide(Effect.flatMap(ApprovalStore.ApprovalStore, (s) => s.append([decision(2)])), store)
  }))

it.live("the next worker on the file reads through the descriptor left open; it is closed once the file is gone", () =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const filename = join(dir, "gate.db")
    const shm = `${filename}-shm`
    const storeScope = yield* Scope.make()
    // as above: no flushes of the store's own beside the workers
    const store = yield* Layer.buildWithScope(
      ToolGateSqlite.layerStore({ filename, checkpoints: "inline", synchronous: "full" }),
      storeScope
    )
    const append = (n: number) =>
      Effect.provide(Effect.flatMap(ApprovalStore.ApprovalStore, (s) => s.append([decision(n)])), store)
    yield* append(1)
    const sqlites = descriptorsOf(shm)
    /** A worker run until it has read the index (its descriptor open), then stopped. */
    const runWorker = (on: string) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const worker = yield* WalCheckpoints.start({ filename: on, ...settings }).pipe(Scope.extend(scope))
        yield* worker.ready
        yield* Effect.sleep("50 millis")
        yield* Scope.close(scope, Exit.void)
      })
    yield* runWorker(filename)
    expect(descriptorsOf(shm)).toBe(sqlites + 1)
    yield* append(2)
    yield* runWorker(filename)
    // the second worker read through the first's descriptor: still one beside SQLite's
    expect(descriptorsOf(shm)).toBe(sqlites + 1)
    // the last connection closed: SQLite deleted -shm; the next worker's start closes the descriptor
    yield* Scope.close(storeScope, Exit.void)
    expect(existsSync(shm)).toBe(false)
    expect(descriptorsOf(`${shm} (deleted)`)).toBe(1)
    const other = join(dir, "other.db")
    yield* Effect.scoped(
      Effect.flatMap(
        Layer.build(ToolGateSqlite.layerStore({ filename: other, checkpoints: "inline" })),
        () => runWorker(other)
      )
    )
    expect(descriptorsOf(`${shm} (deleted)`)).toBe(0)
  }))
