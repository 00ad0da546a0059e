/**
 * WAL checkpoints in a background thread (`ToolGateSqlite`'s `checkpoints: "background"`), in real
 * processes on Node (better-sqlite3) and on Bun (bun:sqlite): the worker copies the log back while
 * the process commits, the store's connection never having reached its own checkpoint; the worker
 * does not hold a process open; a Node worker whose driver cannot load says so; and a process
 * killed with SIGKILL while it writes and the worker checkpoints leaves a file that opens intact
 * with every commit it reported.
 */
import { SqlClient } from "@effect/sql"
import { ApprovalStore } from "@tool-gate/core"
import { afterAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sqliteClient, storeOver } from "../support/sqlStores.js"
import { spawnWorker } from "./support/nodeProcess.js"

const dir = mkdtempSync(join(tmpdir(), "toolgate-wal-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshDb = () => join(dir, `gate-${files++}.db`)

describe.each(["node", "bun"] as const)("WAL checkpoints in the background (%s)", (runtime) => {
  test("the worker copies the log back while the process commits; the process then exits by itself", async () => {
    const worker = await spawnWorker(["checkpoints", freshDb()], { entry: "walWorker", runtime })
    const checkpointed = await worker.next("checkpointed")
    // frames copied back while the log never held the 800 that start the connection's own checkpoint
    expect(checkpointed.backfilled).toBeGreaterThan(0)
    expect(checkpointed.most).toBeLessThan(800)
    // the gate's scope is never closed: only an unreferenced worker lets the process end
    expect(await Promise.race([worker.exited, Bun.sleep(15_000).then(() => "still running")])).toBe(0)
  }, 60_000)

  test("inline, the same writes copy nothing back before the connection's own checkpoint", async () => {
    const worker = await spawnWorker(["checkpoints", freshDb(), "inline"], { entry: "walWorker", runtime })
    expect(await worker.exited).toBe(0)
    await worker.drained
    expect(worker.lines.map((l) => l.event)).toEqual(["end"])
    // it did write past the backstop, so the checkpoint above could not have come from there
    expect(worker.lines[0]!.most).toBeGreaterThanOrEqual(800)
  }, 60_000)

  test(
    "SIGKILL while it writes and the worker checkpoints: the file opens intact with every reported commit",
    async () => {
      const db = freshDb()
      const worker = await spawnWorker(["crash", db], { entry: "walWorker", runtime })
      // a dozen or so of the worker's checkpoints at 100 pages
      await worker.next("committed")
      while ((worker.lines.at(-1)!.n as number) < 1_500) await Bun.sleep(5)
      worker.kill("SIGKILL")
      await worker.exited
      await worker.drained
      const reported = Math.max(...worker.lines.map((l) => Number(l.n ?? 0)))
      const [integrity, events] = await Effect.runPromise(Effect.scoped(
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const store = yield* ApprovalStore.ApprovalStore
          return [yield* sql<{ integrity_check: string }>`PRAGMA integrity_check`, yield* store.events()] as const
        }).pipe(Effect.provide(storeOver(sqliteClient(db))))
      ))
      expect(integrity).toEqual([{ integrity_check: "ok" }])
      expect(events.length).toBeGreaterThanOrEqual(reported)
    },
    60_000
  )
})

test("a Node worker whose driver cannot load ends with the reason", async () => {
  const worker = await spawnWorker(["bad-driver", freshDb()], { entry: "walWorker" })
  const started = await worker.next("started")
  expect(started).toMatchObject({ exit: "Success", ready: "Left" })
  expect(String(started.reason)).toContain("/nonexistent/better-sqlite3")
  expect(await worker.exited).toBe(0)
})
