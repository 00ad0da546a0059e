/**
 * `npm run bench:peers`: tool-gate and its peers on the same workloads, interleaved in one run.
 * Installs the peers (`npm ci` here) and builds tool-gate (`npm run build`) when missing, then runs
 * every script, each in its own Node process, one at a time, in rounds (ours, then each peer;
 * PEERS_RUNS rounds, 3 by default), and prints per workload the median and spread (min-max) of
 * each figure and the ratio ours / peer of the medians.
 * Knobs: PEERS_RUNS, PEERS_ONLY (comma-separated script names, e.g. `w2-ours,w2-vercel-ai`),
 * PEERS_W2_SEQUENTIAL, PEERS_W2_CONCURRENT, PEERS_W2_WARMUP, PEERS_W1_EVALUATIONS (Cedar),
 * PEERS_W1_OURS_EVALUATIONS, PEERS_OUT (a file for the raw JSON lines).
 */
import { execFileSync } from "node:child_process"
import { existsSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, "..", "..")
const npm = process.platform === "win32" ? "npm.cmd" : "npm"

if (!existsSync(join(here, "node_modules", ".package-lock.json"))) {
  console.error("bench/peers: installing the peers (npm ci) ...")
  execFileSync(npm, ["ci", "--no-audit", "--no-fund"], { cwd: here, stdio: "inherit" })
}
if (!["core", "sqlite"].every((name) => existsSync(join(root, "packages", name, "dist", "index.js")))) {
  console.error("bench/peers: building tool-gate (npm run build) ...")
  execFileSync(npm, ["run", "build"], { cwd: root, stdio: "inherit" })
}

// Ours first in each workload: the ratios read ours / peer.
const scripts = [
  { workload: "W1", script: "w1-ours" },
  { workload: "W1", script: "w1-cedar" },
  { workload: "W2", script: "w2-ours" },
  { workload: "W2", script: "w2-vercel-ai" },
  { workload: "W2", script: "w2-openai-agents" },
  { workload: "W2", script: "w2-langgraph" }
]
const only = process.env.PEERS_ONLY?.split(",").map((s) => s.trim())
const selected = scripts.filter(({ script }) => !only || only.includes(script))
const runs = Number(process.env.PEERS_RUNS ?? 3)

const lines = []
for (let run = 1; run <= runs; run++) {
  for (const { script } of selected) {
    const started = performance.now()
    const stdout = execFileSync(process.execPath, [join(here, `${script}.mjs`)], {
      cwd: here,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 16 * 1024 * 1024
    })
    const line = JSON.parse(stdout.trim().split("\n").at(-1))
    lines.push({ ...line, script, run })
    console.error(`run ${run}/${runs} ${script}: ${Math.round((performance.now() - started) / 100) / 10} s`)
  }
}
if (process.env.PEERS_OUT) writeFileSync(process.env.PEERS_OUT, lines.map((l) => JSON.stringify(l)).join("\n") + "\n")

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const fmt = (x) => (Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US") : String(Math.round(x * 1000) / 1000))

// Ratios to three significant digits: W1's span from 0.001 to 1,000.
const ratio = (x) => Number(x.toPrecision(3)).toLocaleString("en-US", { maximumSignificantDigits: 3 })

const figures = {
  W1: ["decisionsPerSec", "p50us", "p99us", "cpuUsPerDecision"],
  W2: [
    "sequentialRoundTripsPerSec",
    "sequentialCpuMsPerRoundTrip",
    "pauseP50ms",
    "pauseP99ms",
    "resumeP50ms",
    "resumeP99ms",
    "concurrentRoundTripsPerSec",
    "concurrentCpuMsPerRoundTrip",
    "selfApprovedRoundTripsPerSec",
    "selfApprovedCpuMsPerRoundTrip"
  ]
}
// tool-gate's in-flight run in the peers' pattern (each round trip approves its own call): only
// ours has it, its ratio is against the peer's in-flight figure.
const counterpart = {
  selfApprovedRoundTripsPerSec: "concurrentRoundTripsPerSec",
  selfApprovedCpuMsPerRoundTrip: "concurrentCpuMsPerRoundTrip"
}

for (const workload of ["W1", "W2"]) {
  const rows = lines.filter((l) => l.workload === workload)
  if (rows.length === 0) continue
  const peers = [...new Set(rows.map((l) => l.peer))]
  const stats = Object.fromEntries(peers.map((peer) => {
    const mine = rows.filter((l) => l.peer === peer)
    return [
      peer,
      Object.fromEntries(figures[workload].map((f) => {
        const xs = mine.map((l) => l[f]).filter((x) => typeof x === "number")
        return [f, xs.length ? { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) } : undefined]
      }))
    ]
  }))
  const first = rows[0]
  console.log(
    `\n${workload}: median (min-max) of ${runs} interleaved runs` + (workload === "W2"
      ? `, ${first.sequential} sequential, ${first.concurrent} in flight`
      : "")
  )
  console.log(`| figure | ${peers.join(" | ")} |`)
  console.log(`| --- |${peers.map(() => " --- |").join("")}`)
  for (const f of figures[workload]) {
    const cells = peers.map((p) => {
      if (!stats[p][f]) return "-"
      const { max, median: m, min } = stats[p][f]
      return `${fmt(m)} (${fmt(min)}-${fmt(max)})`
    })
    console.log(`| ${f} | ${cells.join(" | ")} |`)
  }
  if (stats["tool-gate"] && peers.length > 1) {
    const others = peers.filter((p) => p !== "tool-gate")
    console.log(
      `\n${workload} ratio tool-gate / peer of the medians (rates: above 1 is ours faster; ms, us and CPU: below 1 is ours lower)`
    )
    console.log(`| figure | ${others.join(" | ")} |`)
    console.log(`| --- |${others.map(() => " --- |").join("")}`)
    for (const f of figures[workload]) {
      const theirs = counterpart[f] ?? f
      const cells = others.map((p) => `${ratio(stats["tool-gate"][f].median / stats[p][theirs].median)}x`)
      console.log(`| ${f}${theirs === f ? "" : ` / peer's ${theirs}`} | ${cells.join(" | ")} |`)
    }
  }
}
