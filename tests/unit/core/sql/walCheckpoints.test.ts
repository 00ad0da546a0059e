/**
 * The SQLite checkpoint worker's life (on Bun, bun:sqlite; Node's runs in
 * tests/process/walCheckpoints.test.ts): closing its scope ends its thread, and a worker that
 * cannot open the file is logged while the store goes on with the connection's own checkpoint.
 */
import { ApprovalStore } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Effect, Either, Exit, Layer, Logger, Option, Schedule, Scope } from "effect"
import { join } from "node:path"
import * as WalCheckpoints from "../../../../packages/sqlite/src/internal/walCheckpoints.js"
import { it } from "../../../support/effectTest.js"
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
