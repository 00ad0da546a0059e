/**
 * W4 cross-process resolution: process A waits on an approval; process B (tailing the audit log
 * from its own process) answers it. Figure: time from B's COMMIT returning (stamped in B's driver,
 * tests/process/support/commitStamps.ts) to A resuming, p50/p99 over 200 trials, on SQLite
 * (directory watch) and PostgreSQL (LISTEN/NOTIFY, when TOOLGATE_PG_URL is set); also from B
 * starting its respond and from its respond returning. Both are real Node processes, on one clock.
 */
import { spawnWorker } from "../tests/process/support/nodeProcess.js"
import { runMain } from "./main.js"

const TRIALS = 200

export const runW4 = async (db: string) => {
  process.env["TOOLGATE_STAMP_COMMITS"] = "1"
  const answerer = await spawnWorker(["answerStream", db, String(TRIALS)])
  await answerer.next("listening", 60_000)
  const waiter = await spawnWorker(["waitMany", db, String(TRIALS)])
  await waiter.next("done", 120_000)
  await answerer.exited
  const stamps = (event: string) =>
    new Map(answerer.lines.filter((l) => l.event === event).map((l) => [l.requestId, l.at]))
  const answering = stamps("answering")
  const answered = stamps("answered")
  const committed = new Map(
    answerer.lines.filter((l) => l.event === "answered").map((l) => [l.requestId, l["committedAt"] as number])
  )
  const resumed = waiter.lines.filter((l) => l.event === "resolved")
  if (resumed.length !== TRIALS) throw new Error(`expected ${TRIALS} trials, got ${resumed.length}`)
  // B's commit happens inside respond: between "answering" and "answered" (the stamp must lie
  // there, else it is another commit's). From "answering" bounds the latency from above (it
  // includes B's own respond); from "answered" from below (B prints a little after its commit).
  const fromCommit = resumed.map((l) => {
    const at = committed.get(l.requestId)
    if (at === undefined || at < answering.get(l.requestId)! || at > answered.get(l.requestId)!) {
      throw new Error(`no COMMIT stamped within the answer to ${l.requestId}`)
    }
    return l.at - at
  })
  const respondMs = [...answered].map(([id, at]) => at - answering.get(id)!)
  const upper = resumed.map((l) => l.at - answering.get(l.requestId)!)
  const lower = resumed.map((l) => l.at - answered.get(l.requestId)!)
  return {
    trials: TRIALS,
    p50ms: at(fromCommit, 0.5),
    p99ms: at(fromCommit, 0.99),
    fromAnswerStartedP50ms: at(upper, 0.5),
    fromAnswerStartedP99ms: at(upper, 0.99),
    fromAnswerReturnedP50ms: at(lower, 0.5),
    fromAnswerReturnedP99ms: at(lower, 0.99),
    // B's respond, from its start to its return (in B, with the line it prints)
    respondP50ms: at(respondMs, 0.5),
    commitToReturnP50ms: at(resumed.map((l) => answered.get(l.requestId)! - committed.get(l.requestId)!), 0.5)
  }
}

const at = (xs: Array<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 1000) / 1000
}

if (import.meta.main) {
  await runMain("W4", {
    sqlite: runW4,
    postgres: runW4
  })
}
