/**
 * What every script of bench/peers shares: the counts (env knobs), a SQLite file in WAL mode in a
 * temp dir, percentiles, CPU time from `process.cpuUsage`, and the W2 loop the peers run (pause,
 * approve, resume; sequential, then all in flight at once), so that each peer's script holds only
 * its own API calls.
 */
import Database from "better-sqlite3"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const counts = {
  sequential: Number(process.env.PEERS_W2_SEQUENTIAL ?? 2_000),
  concurrent: Number(process.env.PEERS_W2_CONCURRENT ?? 1_000),
  warmup: Number(process.env.PEERS_W2_WARMUP ?? 100),
  w1: Number(process.env.PEERS_W1_EVALUATIONS ?? 20_000)
}

const pinned = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")).dependencies

/** The version this directory's package.json pins for a peer's package. */
export const version = (name) => `${name} ${pinned[name]}`

export const percentile = (xs, p) => {
  const sorted = Float64Array.from(xs).sort()
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] * 1000) / 1000
}

const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits

/** Runs `body` once and returns its wall time (ms) and the CPU it cost (ms, user + system). */
export const measure = async (body) => {
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await body()
  const wallMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000 }
}

/** A rate and the CPU per operation, rounded for the JSON line. */
export const figures = (count, { wallMs, cpuMs }) => ({
  perSec: Math.round(count / (wallMs / 1000)),
  cpuMsPerOp: round(cpuMs / count, 4)
})

/** A fresh directory for a database file, removed on exit. */
export const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-peers-"))
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A better-sqlite3 database on a file, on the same footing as ours: WAL, synchronous NORMAL. */
export const openDatabase = (filename) => {
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = NORMAL")
  db.pragma("busy_timeout = 5000")
  return db
}

/** Prints the one JSON line a script reports. */
export const report = (line) => console.log(JSON.stringify(line))

/**
 * W2 for a peer: `pause(id)` runs the agent until the tool call waits for approval and persists
 * that; `approve(id)` records the decision durably; `resume(id)` restores the run, runs the tool
 * and persists the outcome. Sequential round trips (pause and resume latencies), then
 * `counts.concurrent` round trips all in flight at once.
 */
export const runW2 = async ({ peer, versions, notes, pause, approve, resume }) => {
  const roundTrip = async (id) => {
    await pause(id)
    await approve(id)
    await resume(id)
  }
  for (let i = 0; i < counts.warmup; i++) await roundTrip(`warm-${i}`)

  const pauses = []
  const resumes = []
  const sequential = await measure(async () => {
    for (let i = 0; i < counts.sequential; i++) {
      const id = `seq-${i}`
      const t0 = performance.now()
      await pause(id)
      const t1 = performance.now()
      await approve(id)
      const t2 = performance.now()
      await resume(id)
      const t3 = performance.now()
      pauses.push(t1 - t0)
      resumes.push(t3 - t2)
    }
  })
  const concurrent = await measure(() =>
    Promise.all(Array.from({ length: counts.concurrent }, (_, i) => roundTrip(`par-${i}`)))
  )
  return w2Line({ peer, versions, notes, sequential, concurrent, pauses, resumes })
}

/** The JSON line of a W2 run, the same fields for ours and every peer. */
export const w2Line = ({ peer, versions, notes, sequential, concurrent, pauses, resumes }) => {
  const seq = figures(counts.sequential, sequential)
  const par = figures(counts.concurrent, concurrent)
  return {
    workload: "W2",
    peer,
    versions,
    ...(notes ? { notes } : {}),
    sequential: counts.sequential,
    concurrent: counts.concurrent,
    sequentialRoundTripsPerSec: seq.perSec,
    sequentialCpuMsPerRoundTrip: seq.cpuMsPerOp,
    pauseP50ms: percentile(pauses, 0.5),
    pauseP99ms: percentile(pauses, 0.99),
    resumeP50ms: percentile(resumes, 0.5),
    resumeP99ms: percentile(resumes, 0.99),
    concurrentRoundTripsPerSec: par.perSec,
    concurrentCpuMsPerRoundTrip: par.cpuMsPerOp
  }
}
