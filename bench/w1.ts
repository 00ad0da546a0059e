/**
 * W1, pure-evaluator half: a 50-rule policy (allow / deny / requireApproval, exact names and
 * globs, some with argument conditions) evaluated 1,000,000 times over calls drawn from 200 tool
 * names with small JSON args, on one core. `bun bench/w1.ts` prints the figure.
 */
import * as Policy from "@tool-gate/core/Policy"

const EVALUATIONS = 1_000_000
const LATENCY_SAMPLES = 200_000

// A fixed-seed generator, so every run evaluates the same calls.
const random = (() => {
  let state = 0x2545f491
  return () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) / 0x1_0000_0000
  }
})()
const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]

const range = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i))

/** 200 tool names in the shapes agents use. */
export const toolNames: ReadonlyArray<string> = [
  ...range(40, (i) => `fs_read_${i}`),
  ...range(30, (i) => `fs_write_${i}`),
  ...range(40, (i) => `mcp__github__${["get", "list", "create", "update", "delete"][i % 5]}_${i}`),
  ...range(30, (i) => (i === 0 ? "bash" : `shell_${i}`)),
  ...range(30, (i) => `task-${i}`),
  ...range(30, (i) => `misc_${i}`)
]

/** 50 rules: 10 deny, 15 requireApproval, 25 allow. */
export const policyInput: Policy.PolicyInput = {
  default: "deny",
  deny: [
    { tool: "fs_write_*", args: { path: "/etc/*" }, reason: "system files" },
    { tool: "shell_*", args: { command: "rm -rf *" } },
    { tool: "bash", args: { command: "*sudo*" } },
    { tool: "fs_read_*", args: { path: "*.env" } },
    "mcp__github__delete_*",
    ...range(5, (i) => `misc_${i}`)
  ],
  requireApproval: [
    "fs_write_*",
    { tool: "shell_*", ttlMs: 60_000 },
    "mcp__github__create_*",
    { tool: "mcp__github__update_*", sessionScope: "tool" },
    "bash",
    { tool: "task-*", args: { "options.recursive": true } },
    ...range(9, (i) => `misc_${i + 5}`)
  ],
  allow: [
    "fs_read_*",
    "mcp__github__get_*",
    "mcp__github__list_*",
    "task-*",
    ...range(21, (i) => `misc_${i + 14}`)
  ]
}

/** Calls with small JSON args; a few hit the argument conditions. */
export const makeCalls = (count: number): Array<Policy.MatchInput> =>
  range(count, () => pick(toolNames)).map((name) => ({
    name,
    args: {
      path: pick(["/home/u/notes.txt", "/etc/hosts", "/srv/app/.env", "src/index.ts"]),
      command: pick(["ls -la", "rm -rf /tmp/x", "sudo reboot", "git status"]),
      options: { recursive: random() < 0.3, depth: 2 }
    }
  }))

const percentile = (sorted: Float64Array, p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]

/** Throughput and per-evaluation latency of `Policy.evaluate`. */
export const runW1Evaluator = (): { decisionsPerSec: number; p50ns: number; p99ns: number } => {
  const policy = Policy.unsafeMake(policyInput)
  if (policy.rules.length !== 50) throw new Error(`W1 wants 50 rules, got ${policy.rules.length}`)
  const calls = makeCalls(4096)
  const mask = calls.length - 1
  let sink = 0
  for (let i = 0; i < 300_000; i++) sink += policy.evaluate(calls[i & mask])._tag.length

  const start = performance.now()
  for (let i = 0; i < EVALUATIONS; i++) sink += policy.evaluate(calls[i & mask])._tag.length
  const seconds = (performance.now() - start) / 1000

  // Per-call timings include the clock read; subtract its median cost, measured the same way.
  const now = () => Bun.nanoseconds()
  const overhead = new Float64Array(LATENCY_SAMPLES)
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const t0 = now()
    overhead[i] = now() - t0
  }
  overhead.sort()
  const clock = percentile(overhead, 0.5)
  const samples = new Float64Array(LATENCY_SAMPLES)
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const call = calls[i & mask]
    const t0 = now()
    sink += policy.evaluate(call)._tag.length
    samples[i] = Math.max(0, now() - t0 - clock)
  }
  samples.sort()
  if (sink === 0) throw new Error("unreachable: keeps the evaluations observable")
  return {
    decisionsPerSec: Math.round(EVALUATIONS / seconds),
    p50ns: Math.round(percentile(samples, 0.5)),
    p99ns: Math.round(percentile(samples, 0.99))
  }
}

if (import.meta.main) {
  const result = runW1Evaluator()
  console.log(JSON.stringify({ workload: "W1 pure evaluator", ...result }))
}
