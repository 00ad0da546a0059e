/**
 * W1 for tool-gate on Node: `Policy.evaluate` of the built `@tool-gate/core` over the W1 policy
 * and calls (w1-shape.mjs), the pure evaluator as in bench/w1.ts; decisions per second, p50/p99
 * per decision (clock cost subtracted) and CPU per decision.
 */
import * as Policy from "@tool-gate/core/Policy"
import { measure, percentile, report } from "./lib.mjs"
import { makeCalls, policyInput } from "./w1-shape.mjs"

const EVALUATIONS = Number(process.env.PEERS_W1_OURS_EVALUATIONS ?? 1_000_000)
const SAMPLES = 200_000

const policy = Policy.unsafeMake(policyInput)
if (policy.rules.length !== 50) throw new Error(`W1 wants 50 rules, got ${policy.rules.length}`)
const calls = makeCalls(4096)
const mask = calls.length - 1
let sink = 0
for (let i = 0; i < 300_000; i++) sink += policy.evaluate(calls[i & mask])._tag.length

const run = await measure(() => {
  for (let i = 0; i < EVALUATIONS; i++) sink += policy.evaluate(calls[i & mask])._tag.length
})

const clock = []
for (let i = 0; i < SAMPLES; i++) {
  const t0 = process.hrtime.bigint()
  clock.push(Number(process.hrtime.bigint() - t0))
}
const clockNs = percentile(clock, 0.5)
const samples = []
for (let i = 0; i < SAMPLES; i++) {
  const call = calls[i & mask]
  const t0 = process.hrtime.bigint()
  sink += policy.evaluate(call)._tag.length
  samples.push(Math.max(0, Number(process.hrtime.bigint() - t0) - clockNs))
}
if (sink === 0) throw new Error("unreachable: keeps the evaluations observable")

report({
  workload: "W1",
  peer: "tool-gate",
  versions: ["@tool-gate/core (built dist)"],
  notes: "Policy.evaluate, the pure evaluator, 50 rules",
  evaluations: EVALUATIONS,
  decisionsPerSec: Math.round(EVALUATIONS / (run.wallMs / 1000)),
  p50us: Math.round(percentile(samples, 0.5)) / 1000,
  p99us: Math.round(percentile(samples, 0.99)) / 1000,
  cpuUsPerDecision: Math.round((run.cpuMs * 1000 / EVALUATIONS) * 1000) / 1000
})
