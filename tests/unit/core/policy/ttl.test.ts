import * as Limits from "@tool-gate/core/Limits"
import * as Policy from "@tool-gate/core/Policy"
import { PolicyInvalid } from "@tool-gate/core/ToolGateError"
import { describe, expect, it } from "bun:test"
import { Effect, Either } from "effect"

const problemsOf = (effect: Effect.Effect<Policy.Policy, PolicyInvalid>) => {
  const result = Effect.runSync(Effect.either(effect))
  if (Either.isRight(result)) throw new Error("expected the policy to be invalid")
  expect(result.left).toBeInstanceOf(PolicyInvalid)
  return result.left.problems
}

const bad = [Infinity, -Infinity, Number.NaN, 0, -1, 1.5, Limits.maxTtlMs + 1, 1e300]

describe("Policy ttlMs is a whole number of ms from 1 to a year", () => {
  it("refuses non-finite, zero, negative, fractional and over-a-year values, top-level and per rule", () => {
    for (const ttlMs of bad) {
      const problems = problemsOf(Policy.make({ ttlMs, requireApproval: [{ tool: "bash", ttlMs }] }))
      expect(problems.map((p) => p.path)).toEqual(["ttlMs", "requireApproval[0].ttlMs"])
      for (const problem of problems) expect(problem.message).toContain("from 1 to 31536000000 (one year)")
    }
  })

  it("refuses YAML .inf and .nan and a non-number, naming the path", () => {
    expect(
      problemsOf(Policy.fromYaml("ttlMs: .inf\nrequireApproval:\n  - tool: bash\n    ttlMs: .nan\n")).map((p) => p.path)
    )
      .toEqual(["ttlMs", "requireApproval[0].ttlMs"])
    expect(problemsOf(Policy.fromYaml("ttlMs: -.inf\n")).map((p) => p.path)).toEqual(["ttlMs"])
    expect(problemsOf(Policy.make({ ttlMs: "300000" }))).toEqual([
      { path: "ttlMs", message: "expected a whole number of milliseconds from 1 to 31536000000 (one year)" }
    ])
  })

  it("accepts the bounds themselves", () => {
    const policy = Policy.unsafeMake({ ttlMs: 1, requireApproval: [{ tool: "bash", ttlMs: Limits.maxTtlMs }] })
    expect(policy.ttlMs).toBe(1)
    expect(policy.evaluate({ name: "bash", args: {} })).toMatchObject({
      _tag: "RequireApproval",
      ttlMs: Limits.maxTtlMs
    })
  })
})
