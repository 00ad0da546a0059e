/**
 * W1, service half: the same 50-rule policy and 200 tool names as the pure bench, through
 * `ToolGate.evaluate` on the memory store (input validation, session approvals, one audit event
 * per decision, the log tailer running). 10% of the calls are `bash`, a requireApproval tool the
 * session holds an approval for (so: allow via sessionApproval).
 */
import { Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { Effect } from "effect"
import { makeCalls, policyInput } from "./w1.js"

const EVALUATIONS = 1_000_000

export const runW1Service = (): Promise<{ decisionsPerSec: number; p50ns: number; p99ns: number }> => {
  const policy = Policy.unsafeMake(policyInput)
  const calls = makeCalls(4096).map((c, i) => ({
    id: `call-${i}`,
    sessionKey: "session-1",
    ...(i % 10 === 0 ? { name: "bash", args: { command: "git status" } } : c)
  }))
  const mask = calls.length - 1
  const program = Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    yield* gate.recordApproval("bash", ToolCall.SessionKey.make("session-1"), true)
    const check = yield* gate.evaluate(calls[0]!)
    if (check._tag !== "Allow" || check.via !== "sessionApproval") throw new Error("bash should be session-approved")
    for (let i = 0; i < 200_000; i++) yield* gate.evaluate(calls[i & mask]!)

    const start = performance.now()
    for (let i = 0; i < EVALUATIONS; i++) yield* gate.evaluate(calls[i & mask]!)
    const seconds = (performance.now() - start) / 1000

    const samples = new Float64Array(100_000)
    for (let i = 0; i < samples.length; i++) {
      const t0 = Bun.nanoseconds()
      yield* gate.evaluate(calls[i & mask]!)
      samples[i] = Bun.nanoseconds() - t0
    }
    samples.sort()
    return {
      decisionsPerSec: Math.round(EVALUATIONS / seconds),
      p50ns: Math.round(samples[Math.floor(samples.length * 0.5)]!),
      p99ns: Math.round(samples[Math.floor(samples.length * 0.99)]!)
    }
  })
  return Effect.runPromise(program.pipe(Effect.provide(ToolGate.layerMemory({ policy }))))
}

if (import.meta.main) {
  console.log(JSON.stringify({ workload: "W1 ToolGate service", ...(await runW1Service()) }))
}
