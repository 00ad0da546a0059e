/**
 * W1 on Cedar's WASM build: the W1 policy (w1-shape.mjs) translated rule by rule to Cedar (deny
 * rules to `forbid`, requireApproval and allow rules to `permit`, globs to `like`, argument
 * conditions to `has` + `like` / `==` on `context.args`), parsed once (`preparsePolicySet`) and
 * asked with `statefulIsAuthorized`. Cedar answers allow or deny; a call is requireApproval when a
 * requireApproval permit is among the determining policies, so one call gives the three-way
 * decision. Before timing, the script checks that Cedar and tool-gate's evaluator agree on every
 * sampled call.
 */
import { preparsePolicySet, statefulIsAuthorized } from "@cedar-policy/cedar-wasm/nodejs"
import * as Policy from "@tool-gate/core/Policy"
import { counts, measure, percentile, report, version } from "./lib.mjs"
import { makeCalls, policyInput } from "./w1-shape.mjs"

const EVALUATIONS = counts.w1

const literal = (s) => JSON.stringify(s)
// Cedar's `like` takes `*` as the wildcard, as our globs do; these patterns have no other specials.
const match = (expr, pattern) =>
  pattern.includes("*") ? `${expr} like ${literal(pattern)}` : `${expr} == ${literal(pattern)}`

const condition = (rule) => {
  const { tool, args = {} } = typeof rule === "string" ? { tool: rule } : rule
  const clauses = [match("context.tool", tool)]
  for (const [key, expected] of Object.entries(args)) {
    let expr = "context.args"
    for (const part of key.split(".")) {
      clauses.push(`${expr} has ${part}`)
      expr = `${expr}.${part}`
    }
    clauses.push(typeof expected === "string" ? match(expr, expected) : `${expr} == ${JSON.stringify(expected)}`)
  }
  return clauses.join(" && ")
}

const staticPolicies = {}
const add = (kind, effect) =>
  policyInput[kind].forEach((rule, i) => {
    staticPolicies[`${kind}-${i}`] = `${effect}(principal, action, resource) when { ${condition(rule)} };`
  })
add("deny", "forbid")
add("requireApproval", "permit")
add("allow", "permit")
if (Object.keys(staticPolicies).length !== 50) throw new Error("W1 wants 50 rules")

const parsed = preparsePolicySet("w1", { staticPolicies })
if (parsed.type !== "success") throw new Error(`Cedar refused the policy: ${JSON.stringify(parsed)}`)

const principal = { type: "Agent", id: "w1" }
const action = { type: "Action", id: "call" }
const decide = (call) => {
  const answer = statefulIsAuthorized({
    principal,
    action,
    resource: { type: "Tool", id: call.name },
    context: { tool: call.name, args: call.args },
    preparsedPolicySetId: "w1",
    entities: []
  })
  if (answer.type !== "success") throw new Error(JSON.stringify(answer))
  const { decision, diagnostics } = answer.response
  if (decision === "deny") return "Deny"
  return diagnostics.reason.some((id) => id.startsWith("requireApproval-")) ? "RequireApproval" : "Allow"
}

const calls = makeCalls(4096)
const mask = calls.length - 1
const ours = Policy.unsafeMake(policyInput)
for (const call of calls) {
  const theirs = decide(call)
  const expected = ours.evaluate(call)._tag
  if (theirs !== expected) throw new Error(`${JSON.stringify(call)}: Cedar ${theirs}, tool-gate ${expected}`)
}

let sink = 0
const run = await measure(() => {
  for (let i = 0; i < EVALUATIONS; i++) sink += decide(calls[i & mask]).length
})
const samples = []
for (let i = 0; i < Math.min(EVALUATIONS, 10_000); i++) {
  const t0 = process.hrtime.bigint()
  sink += decide(calls[i & mask]).length
  samples.push(Number(process.hrtime.bigint() - t0))
}
if (sink === 0) throw new Error("unreachable: keeps the evaluations observable")

report({
  workload: "W1",
  peer: "cedar",
  versions: [version("@cedar-policy/cedar-wasm")],
  notes:
    "50 rules as Cedar policies, preparsePolicySet once, statefulIsAuthorized per call; agrees with tool-gate on 4,096 calls",
  evaluations: EVALUATIONS,
  decisionsPerSec: Math.round(EVALUATIONS / (run.wallMs / 1000)),
  p50us: Math.round(percentile(samples, 0.5)) / 1000,
  p99us: Math.round(percentile(samples, 0.99)) / 1000,
  cpuUsPerDecision: Math.round((run.cpuMs * 1000 / EVALUATIONS) * 1000) / 1000
})
