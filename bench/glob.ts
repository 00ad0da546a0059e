/**
 * Globs against model-sized arguments: a 1 MB argument against a ten-star deny pattern, through
 * `Policy.evaluate` (so the figure is what a gate pays per call). The texts are built to make a
 * backtracking matcher try every split (every piece but the last occurs often), and a matching
 * text is timed too. Prints the median, the spread (p10 to p90) and the CPU time per evaluation.
 * The target (issue 10): well under 10 ms. The `{ shell }` matcher's cost on a long command line
 * is reported too.
 */
import * as Policy from "@tool-gate/core/Policy"

const RUNS = 41
const size = 1024 * 1024
const miss = "rm -rf /etc/ ".repeat(Math.ceil(size / 13)).slice(0, size)
const hit = `${miss.slice(0, size - 1)}x`

const measure = (pattern: unknown, command: string, expected: string) => {
  const policy = Policy.unsafeMake({ deny: [{ tool: "bash", args: { command: pattern } }] })
  const call = { name: "bash", args: { command } }
  if (policy.evaluate(call)._tag !== expected) throw new Error(`expected ${expected}`)
  const samples: Array<number> = []
  const cpu0 = process.cpuUsage()
  for (let i = 0; i < RUNS; i++) {
    const t0 = Bun.nanoseconds()
    policy.evaluate(call)
    samples.push((Bun.nanoseconds() - t0) / 1e6)
  }
  const cpu = process.cpuUsage(cpu0)
  samples.sort((a, b) => a - b)
  const at = (p: number) => Number(samples[Math.floor((samples.length - 1) * p)]!.toFixed(3))
  return {
    medianMs: at(0.5),
    p10Ms: at(0.1),
    p90Ms: at(0.9),
    cpuMsPerOp: Number(((cpu.user + cpu.system) / 1000 / RUNS).toFixed(3))
  }
}

// literal pieces are found with indexOf; pieces with `?` are tried code point by code point
const literal = "*r*m*-*r*f*/*e*t*c*/*x*"
const withOne = "*r?*m?*-?*r?*f?*/?*e?*t?*c?*/?*x"
console.log(
  JSON.stringify({ workload: "Glob 1 MB, ten stars, literal pieces, miss", ...measure(literal, miss, "Allow") })
)
console.log(
  JSON.stringify({ workload: "Glob 1 MB, ten stars, literal pieces, match", ...measure(literal, hit, "Deny") })
)
console.log(
  JSON.stringify({
    workload: "Glob 1 MB, ten stars, ? pieces, miss",
    ...measure(withOne, `${miss}x`.replace(/\//g, ""), "Allow")
  })
)
// every other position is a candidate for the last piece and none completes it
const everywhere = "*a*a*a*a*a*a*a*a*a?c*"
console.log(
  JSON.stringify({
    workload: "Glob 1 MB, ten stars, worst case",
    ...measure(everywhere, "ac".repeat(size / 2), "Allow")
  })
)

// the shell matcher parses lines up to 16 KiB (longer ones fail closed without parsing)
const line = "git add src/index.ts && npm test -- --watch=false; ".repeat(16 * 1024 / 52)
console.log(
  JSON.stringify({ workload: "Shell matcher, 16 KiB command line", ...measure({ shell: "rm -rf*" }, line, "Allow") })
)
console.log(
  JSON.stringify({ workload: "Shell matcher, 1 MB command line", ...measure({ shell: "rm -rf*" }, miss, "Deny") })
)
