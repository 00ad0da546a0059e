/**
 * W1, pure-evaluator half: a 50-rule policy (allow / deny / requireApproval, exact names and
 * globs, some with argument conditions) evaluated 1,000,000 times over calls drawn from 200 tool
 * names with small JSON args, on one core. `bun bench/w1.ts` prints the figure.
 */
import * as Policy from "@tool-gate/core/Policy"
import { makeCalls, policyInput } from "./peers/w1-shape.mjs"

const EVALUATIONS = 1_000_000
const LATENCY_SAMPLES = 200_000

// The workload (200 tool names, 50 rules, calls from a fixed-seed generator) is written once, as
// plain JavaScript, so that the Node scripts of bench/peers run the very same one.
export { makeCalls, policyInput, toolNames } from "./peers/w1-shape.mjs"

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
