/**
 * An answer given through the HTTP API wakes a waiter in another process: a Node process (the
 * process tests' gate worker, better-sqlite3) waits on the SQLite file the server (here, Bun)
 * serves.
 */
import { expect } from "bun:test"
import { Effect } from "effect"
import { join } from "node:path"
import { spawnWorker } from "../process/support/nodeProcess.js"
import { describe, it } from "../support/effectTest.js"
import { tempDir } from "../support/sqlStores.js"
import { startServer } from "./support/server.js"

describe("HTTP answers across processes", () => {
  it.live(
    "a waiter in a Node process is woken by an answer through HTTP, and runs the tool",
    () =>
      Effect.gen(function*() {
        const filename = join(yield* tempDir, "toolgate.db")
        const server = yield* startServer({ filename })
        const waiter = yield* Effect.acquireRelease(
          Effect.promise(() => spawnWorker(["wait", filename, "s1", "call-1"])),
          (worker) => Effect.sync(() => worker.kill("SIGKILL"))
        )
        const paused = yield* Effect.promise(() => waiter.next("paused"))
        const reply = yield* server.request("POST", `/approvals/${paused.requestId}/respond`, {
          body: { decision: "approve_once" }
        })
        expect(reply.status).toBe(200)
        expect(yield* Effect.promise(() => waiter.next("resolved"))).toMatchObject({ status: "approved" })
        expect(yield* Effect.promise(() => waiter.next("gate"))).toMatchObject({ result: "ran" })
        expect(yield* Effect.promise(() => waiter.exited)).toBe(0)
        const [resolved] = yield* server.store.events({ outcome: "approved" })
        expect(resolved).toMatchObject({ type: "approval.resolved", actor: "ana", toolCallId: "call-1" })
      }),
    60_000
  )
})
