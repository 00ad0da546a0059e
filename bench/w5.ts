/**
 * W5 concurrency and integrity: 1,000 pending approvals created by one process, answered in
 * random order by 4 responder processes, each answering every request twice (random decisions,
 * so repeats and conflicts both happen). Figures: decisions per second (first answers applied
 * over the wall time of the race), lost = 0, double-applied = 0, every decision in the audit log
 * exactly once. Real Node processes on one SQLite file.
 */
import { ApprovalStore } from "@tool-gate/core"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { spawnWorker } from "../tests/process/support/nodeProcess.js"
import { sqliteClient, storeOver } from "../tests/support/sqlStores.js"

const REQUESTS = 1000

export const runW5 = async (db: string) => {
  const holder = await spawnWorker(["create", db, "w5", String(REQUESTS)])
  await holder.next("ready", 120_000)
  const ids = holder.lines.filter((l) => l.event === "paused").map((l) => String(l.requestId))
  const responders = await Promise.all(
    ["r1", "r2", "r3", "r4"].map((who) => spawnWorker(["race", db, who, JSON.stringify(ids)]))
  )
  const results = await Promise.all(responders.map((r) => r.next("raced", 300_000)))
  holder.kill("SIGKILL")
  // From the first responder starting to answer (its process up, its store open) to the last done.
  const started = Math.min(...await Promise.all(responders.map((r) => r.next("racing").then((l) => l.at))))
  const seconds = (Math.max(...results.map((r) => r.at)) - started) / 1000
  const won = results.flatMap((r) => r.won as Array<string>)
  const { events, pending } = await Effect.runPromise(Effect.scoped(
    Effect.flatMap(
      ApprovalStore.ApprovalStore,
      (store) => Effect.all({ events: store.events({ sessionKey: "w5" }), pending: store.listPending() })
    ).pipe(
      Effect.provide(storeOver(sqliteClient(db)))
    )
  ))
  const resolved = events.filter((e) => e.type === "approval.resolved")
  const perRequest = new Map<string, number>()
  for (const e of resolved) perRequest.set(e.requestId!, (perRequest.get(e.requestId!) ?? 0) + 1)
  return {
    requests: REQUESTS,
    answersTried: REQUESTS * 2 * 4,
    decisionsPerSec: Math.round(REQUESTS / seconds),
    lost: ids.filter((id) => !perRequest.has(id)).length + pending.length,
    doubleApplied: [...perRequest.values()].filter((n) => n > 1).length + (won.length - new Set(won).size),
    auditedExactlyOnce: resolved.length === REQUESTS && perRequest.size === REQUESTS
  }
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w5-"))
  try {
    console.log(JSON.stringify({ workload: "W5 SQLite, 4 responder processes", ...(await runW5(join(dir, "w5.db"))) }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
