/**
 * W4 cross-process resolution: process A waits on an approval; process B (tailing the audit log
 * from its own process) answers it. Figure: time from B's commit returning to A resuming, p50/p99
 * over 200 trials, on SQLite (directory watch) and PostgreSQL (LISTEN/NOTIFY, when
 * TOOLGATE_PG_URL is set). Both are real Node processes.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { spawnWorker } from "../tests/process/support/nodeProcess.js"

const TRIALS = 200

export const runW4 = async (db: string) => {
  const answerer = await spawnWorker(["answerStream", db, String(TRIALS)])
  await answerer.next("listening", 60_000)
  const waiter = await spawnWorker(["waitMany", db, String(TRIALS)])
  await waiter.next("done", 120_000)
  await answerer.exited
  const answered = new Map(answerer.lines.filter((l) => l.event === "answered").map((l) => [l.requestId, l.at]))
  const latencies = waiter.lines
    .filter((l) => l.event === "resolved")
    .map((l) => l.at - answered.get(l.requestId)!)
    .sort((a, b) => a - b)
  if (latencies.length !== TRIALS) throw new Error(`expected ${TRIALS} trials, got ${latencies.length}`)
  const at = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))]! * 1000) / 1000
  return { trials: TRIALS, p50ms: at(0.5), p99ms: at(0.99) }
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w4-"))
  try {
    console.log(JSON.stringify({ workload: "W4 SQLite", ...(await runW4(join(dir, "w4.db"))) }))
    const pg = process.env.TOOLGATE_PG_URL
    if (pg) console.log(JSON.stringify({ workload: "W4 PostgreSQL", ...(await runW4(pg)) }))
    else console.log(JSON.stringify({ workload: "W4 PostgreSQL", skipped: "TOOLGATE_PG_URL not set" }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
