/**
 * The policy decoder against hostile documents: random values, random text, deep nesting, odd
 * Unicode. Each must end in a policy or a typed `PolicyInvalid` (never a defect, never a hang),
 * and a policy that loads must judge any call without throwing.
 */
import * as Policy from "@tool-gate/core/Policy"
import { PolicyInvalid } from "@tool-gate/core/ToolGateError"
import { describe, expect, it } from "bun:test"
import { Effect, Either, FastCheck as fc } from "effect"

/** Characters that break naive code: lone surrogates, NUL, escapes, RTL override, separators. */
const oddUnit = fc.oneof(
  fc.constantFrom("\ud800", "\udc00", "\u0000", "\u001b[2J", "\u202e", "\u2028", "\ufeff", "\r\n", "😀", "İ"),
  fc.constantFrom("*", "?", "\\", "$(", "`", "'", "\"", ";", "&&", "#", " ", "rm -rf /"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 })
)
const oddString = fc.string({ unit: oddUnit, maxLength: 12 })
const key = fc.oneof(
  oddString,
  fc.constantFrom("deny", "allow", "requireApproval", "default", "ttlMs", "tool", "args", "agent", "intent", "id"),
  fc.constantFrom("glob", "shell", "equals", "caseInsensitive", "sessionScope", "reason", "__proto__", "constructor")
)
const value = fc.anything({
  key,
  values: [oddString, fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined)],
  maxDepth: 4,
  withBoxedValues: true,
  withMap: true,
  withSet: true,
  withDate: true,
  withTypedArray: true,
  withSparseArray: true,
  withNullPrototype: true
})
const tool = fc.oneof(oddString, fc.constantFrom("bash", "*", "read_*", "mcp__*"))
const argPattern = fc.oneof(
  value,
  oddString,
  fc.record({ glob: fc.oneof(oddString, value), caseInsensitive: fc.oneof(fc.boolean(), value) }, {
    requiredKeys: ["glob"]
  }),
  fc.record({ shell: fc.oneof(oddString, value), caseInsensitive: fc.boolean() }, { requiredKeys: ["shell"] }),
  fc.record({ equals: value, glob: oddString }, { requiredKeys: ["equals"] })
)
const matcher = fc.oneof(
  tool,
  value,
  fc.record({
    tool,
    args: fc.dictionary(fc.oneof(oddString, fc.constantFrom("command", "path", "a.b", "a..b", "0")), argPattern),
    agent: tool,
    ttlMs: fc.oneof(fc.integer(), fc.double(), value),
    sessionScope: fc.oneof(fc.constantFrom("exact", "tool"), value),
    id: oddString
  }, { requiredKeys: ["tool"] })
)
const document = fc.oneof(
  value,
  fc.record({
    default: fc.oneof(fc.constantFrom("allow", "deny", "requireApproval"), value),
    ttlMs: fc.oneof(fc.integer(), fc.double(), value),
    deny: fc.oneof(fc.array(matcher, { maxLength: 4 }), value),
    requireApproval: fc.array(matcher, { maxLength: 4 }),
    allow: fc.array(matcher, { maxLength: 4 })
  }, { requiredKeys: [] })
)
const call = fc.record({
  name: fc.oneof(tool, oddString),
  args: fc.dictionary(fc.oneof(oddString, fc.constantFrom("command", "path")), fc.oneof(value, oddString))
})

/** A policy or a PolicyInvalid; anything else (a thrown defect) fails the test. */
const outcome = (effect: Effect.Effect<Policy.Policy, PolicyInvalid>): Policy.Policy | PolicyInvalid => {
  const result = Effect.runSync(Effect.either(effect))
  if (Either.isLeft(result)) {
    expect(result.left).toBeInstanceOf(PolicyInvalid)
    expect(result.left.problems.length).toBeGreaterThan(0)
    return result.left
  }
  return result.right
}

const nest = (depth: number, wrap: (inner: unknown, i: number) => unknown): unknown => {
  let inner: unknown = "x"
  for (let i = 0; i < depth; i++) inner = wrap(inner, i)
  return inner
}

describe("policy decoder fuzz", () => {
  it("random documents: a policy that judges any call, or a typed PolicyInvalid", () => {
    let valid = 0
    let invalid = 0
    fc.assert(
      fc.property(document, fc.array(call, { maxLength: 4 }), (input, calls) => {
        const result = outcome(Policy.make(input))
        if (result instanceof PolicyInvalid) invalid++
        else {
          valid++
          for (const c of calls) expect(["Allow", "Deny", "RequireApproval"]).toContain(result.evaluate(c)._tag)
        }
      }),
      { numRuns: 1500 }
    )
    // both outcomes are exercised, so the generator reaches the compiler and the evaluator
    expect(valid).toBeGreaterThan(50)
    expect(invalid).toBeGreaterThan(50)
  })

  it("random text as JSON and YAML: a policy or a PolicyInvalid", () => {
    const text = fc.oneof(
      fc.string({ unit: oddUnit, maxLength: 60 }),
      document.map((d) => {
        try {
          return JSON.stringify(d) ?? "null"
        } catch {
          return "{"
        }
      }),
      fc.tuple(document, fc.nat(), oddString).map(([d, at, insert]) => {
        const json = (() => {
          try {
            return JSON.stringify(d) ?? ""
          } catch {
            return ""
          }
        })()
        const i = json.length === 0 ? 0 : at % json.length
        return json.slice(0, i) + insert + json.slice(i)
      })
    )
    fc.assert(
      fc.property(text, (source) => {
        outcome(Policy.fromJson(source))
        outcome(Policy.fromYaml(source))
      }),
      { numRuns: 1500 }
    )
  })

  it("100,000 levels of nesting, as a value and as text, are refused with a path", () => {
    const deepObject = nest(100_000, (inner) => ({ a: inner }))
    const deepArray = nest(100_000, (inner) => [inner])
    const deepMixed = nest(100_000, (inner, i) => (i % 2 === 0 ? [inner] : { args: inner }))
    const sparse: Array<unknown> = []
    sparse.length = 2 ** 32 - 1
    for (
      const input of [
        deepObject,
        { deny: deepArray },
        { deny: [deepObject] },
        { deny: [{ tool: "bash", args: { command: deepMixed } }] },
        { allow: [{ tool: "bash", args: { command: { equals: deepObject } } }] }
      ]
    ) {
      const result = outcome(Policy.make(input))
      expect(result).toBeInstanceOf(PolicyInvalid)
      expect((result as PolicyInvalid).problems[0]!.message).toContain("levels deep")
    }
    // a sparse array of 2^32 - 1 slots is refused by its length, not walked
    expect(outcome(Policy.make({ deny: [{ tool: "x", args: { a: sparse } }] }))).toMatchObject({
      problems: [{ path: "deny[0].args.a", message: "the policy holds more than 1000000 values" }]
    })
    const cyclic: Record<string, unknown> = { tool: "bash" }
    cyclic.args = { command: cyclic }
    expect(outcome(Policy.make({ deny: [cyclic] }))).toBeInstanceOf(PolicyInvalid)

    const json = `{"deny":[{"tool":"x","args":{"a":${"[".repeat(100_000)}${"]".repeat(100_000)}}}]}`
    const yamlFlow = `deny:\n  - tool: x\n    args:\n      a: ${"[".repeat(100_000)}${"]".repeat(100_000)}\n`
    const yamlBlock = Array.from({ length: 2_000 }, (_, i) => `${" ".repeat(i)}a:`).join("\n")
    for (
      const result of [
        outcome(Policy.fromJson(json)),
        outcome(Policy.fromYaml(yamlFlow)),
        outcome(Policy.fromYaml(yamlBlock))
      ]
    ) {
      expect(result).toBeInstanceOf(PolicyInvalid)
      expect((result as PolicyInvalid).problems[0]!.message).toMatch(/nested|levels deep/)
    }
  }, 60_000)

  it("odd Unicode in names, patterns and argument paths loads and judges like any other text", () => {
    const policy = outcome(Policy.make({
      deny: [
        { tool: "\ud800bash", args: { "\u202ecommand": "*\u0000*" } },
        { tool: "x\udc00*", args: { path: { glob: "*\u2028*", caseInsensitive: true } } },
        { tool: "sh", args: { command: { shell: "rm *" } } }
      ]
    }))
    if (policy instanceof PolicyInvalid) throw new Error("expected the policy to load")
    expect(policy.evaluate({ name: "\ud800BASH", args: { "\u202ecommand": "a\u0000b" } })._tag).toBe("Deny")
    expect(policy.evaluate({ name: "\ud800bash", args: { command: "a\u0000b" } })._tag).toBe("Allow")
    expect(policy.evaluate({ name: "x\udc00y", args: { path: "A\u2028B" } })._tag).toBe("Deny")
    expect(policy.evaluate({ name: "sh", args: { command: "echo \ud800\u202e; rm x" } })._tag).toBe("Deny")
  })
})
