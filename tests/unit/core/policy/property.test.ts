import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"
import { FastCheck as fc } from "effect"
import * as Glob from "../../../../packages/core/src/internal/glob.js"

// A deliberately naive reference for one rule, written independently of the evaluator.
const globToRegExp = (pattern: string): RegExp => {
  let source = ""
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]
    if (char === "\\") source += `\\${pattern[++i]}`.replace(/\\([a-zA-Z0-9_])/, "$1")
    else if (char === "*") source += ".*"
    else if (char === "?") source += "."
    else source += char.replace(/[.+^${}()|[\]]/, "\\$&")
  }
  return new RegExp(`^${source}$`, "s")
}

const sorted = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(sorted)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, sorted((value as Record<string, unknown>)[k])]))
    : value

const lookup = (args: unknown, path: string): { found: boolean; value?: unknown } => {
  let current = args
  for (const key of path.split(".")) {
    if (typeof current !== "object" || current === null || !Object.hasOwn(current, key)) return { found: false }
    current = (current as Record<string, unknown>)[key]
  }
  return { found: true, value: current }
}

type Rule = { tool: string; args?: Record<string, unknown>; agent?: string }

const referenceMatches = (rule: Rule, call: Policy.MatchInput): boolean => {
  if (!globToRegExp(rule.tool.toLowerCase()).test(call.name.toLowerCase())) return false
  if (rule.agent !== undefined && (call.agentId === undefined || !globToRegExp(rule.agent).test(call.agentId))) {
    return false
  }
  return Object.entries(rule.args ?? {}).every(([path, pattern]) => {
    const { found, value } = lookup(call.args, path)
    if (!found) return false
    if (typeof pattern === "string") {
      const text = typeof value === "string"
        ? value
        : typeof value === "number" || typeof value === "boolean"
        ? String(value)
        : undefined
      return text !== undefined && globToRegExp(pattern).test(text)
    }
    return JSON.stringify(sorted(pattern)) === JSON.stringify(sorted(value))
  })
}

const tools = ["bash", "BASH", "b*", "*sh", "?ash", "*", "read_file", "mcp__github__*", "task-?", "a\\*b"]
const names = [
  "bash",
  "Bash",
  "bsh",
  "dash",
  "read_file",
  "READ_FILE",
  "mcp__github__create_issue",
  "task-1",
  "task-12",
  "zsh",
  "a*b",
  "axb"
]

const ruleArb: fc.Arbitrary<Rule> = fc.record(
  {
    tool: fc.constantFrom(...tools),
    args: fc.constantFrom<Record<string, unknown>>(
      { command: "ls*" },
      { command: "rm -rf *" },
      { n: 1 },
      { n: "1" },
      { "opts.force": true },
      { opts: { force: true, dry: false } },
      { "files.0": "*.env" },
      { command: "*", n: 1 }
    ),
    agent: fc.constantFrom("a*", "bob")
  },
  { requiredKeys: ["tool"] }
)

const callArb: fc.Arbitrary<Policy.MatchInput> = fc.record({
  name: fc.constantFrom(...names),
  args: fc.record(
    {
      command: fc.constantFrom("ls -la", "rm -rf /", "echo"),
      n: fc.constantFrom<unknown>(1, "1", 2, true),
      opts: fc.constantFrom<unknown>({ force: true, dry: false }, { dry: false, force: true }, { force: false }, "x"),
      files: fc.constantFrom<unknown>([".env"], ["a.env", "b"], [])
    },
    { requiredKeys: [] }
  ),
  agentId: fc.constantFrom<string | undefined>("alice", "bob", undefined)
})

const policyArb = fc.record({
  default: fc.constantFrom("allow" as const, "deny" as const, "requireApproval" as const),
  deny: fc.array(ruleArb, { maxLength: 4 }),
  requireApproval: fc.array(ruleArb, { maxLength: 4 }),
  allow: fc.array(ruleArb, { maxLength: 4 })
})

describe("Policy.evaluate (property)", () => {
  it("returns Deny whenever a deny rule matches, citing the first one", () => {
    fc.assert(
      fc.property(policyArb, callArb, (input, call) => {
        const policy = Policy.unsafeMake(input)
        const decision = policy.evaluate(call)
        const firstDeny = input.deny.findIndex((rule) => referenceMatches(rule, call))
        if (firstDeny >= 0) {
          expect(decision._tag).toBe("Deny")
          expect(decision._tag === "Deny" && decision.rule).toEqual({ id: `deny[${firstDeny}]`, source: "deny" })
        } else {
          expect(decision._tag === "Deny" && decision.rule.source).not.toBe("deny")
        }
      }),
      { numRuns: 2000 }
    )
  })

  it("follows deny > requireApproval > allow > default, like the reference", () => {
    fc.assert(
      fc.property(policyArb, fc.array(callArb, { minLength: 1, maxLength: 5 }), (input, calls) => {
        const policy = Policy.unsafeMake(input)
        for (const call of calls) {
          const expected = (["deny", "requireApproval", "allow"] as const)
            .map((list) => ({ list, index: input[list].findIndex((rule) => referenceMatches(rule, call)) }))
            .find(({ index }) => index >= 0)
          const rule = policy.match(call)
          expect(rule && { list: rule.source, index: rule.index }).toEqual(expected)
          const decision = policy.evaluate(call)
          const tag = expected === undefined ? input.default : expected.list
          expect(decision._tag).toBe(tag === "allow" ? "Allow" : tag === "deny" ? "Deny" : "RequireApproval")
        }
      }),
      { numRuns: 2000 }
    )
  })

  it("never reports a rule as shadowed when some call reaches it", () => {
    fc.assert(
      fc.property(policyArb, (input) => {
        const policy = Policy.unsafeMake(input)
        for (const warning of policy.warnings.filter((w) => w.kind === "shadowed")) {
          const rule = policy.rules.find((r) => r.id === warning.ruleId)!
          for (const name of names) {
            for (const args of [{ command: "ls -la", n: 1, opts: { force: true, dry: false }, files: [".env"] }, {}]) {
              for (const agentId of ["alice", "bob", undefined]) {
                expect(policy.match({ name, args, agentId })).not.toBe(rule)
              }
            }
          }
        }
      }),
      { numRuns: 1000 }
    )
  })
})

describe("Glob", () => {
  const patternArb = fc.array(fc.constantFrom("a", "b", "A", "*", "?", "\\*", "."), { maxLength: 6 }).map((parts) =>
    parts.join("")
  )
  const textArb = fc.array(fc.constantFrom("a", "b", "A", "*", "?", "."), { maxLength: 7 }).map((parts) =>
    parts.join("")
  )

  it("matches like the reference", () => {
    fc.assert(
      fc.property(patternArb, textArb, (pattern, text) => {
        expect(Glob.compile(pattern).test(text)).toBe(globToRegExp(pattern).test(text))
      }),
      { numRuns: 5000 }
    )
  })

  it("inclusion is sound: when outer includes inner, outer matches all inner matches", () => {
    fc.assert(
      fc.property(
        patternArb,
        patternArb,
        fc.array(textArb, { minLength: 20, maxLength: 20 }),
        (outer, inner, texts) => {
          const o = Glob.compile(outer)
          const i = Glob.compile(inner)
          if (!Glob.includes(o.tokens, i.tokens)) return
          for (const text of texts) if (i.test(text)) expect(o.test(text)).toBe(true)
        }
      ),
      { numRuns: 5000 }
    )
  })

  it("inclusion finds the common cases", () => {
    const includes = (outer: string, inner: string) =>
      Glob.includes(Glob.compile(outer).tokens, Glob.compile(inner).tokens)
    expect(includes("*", "anything*")).toBe(true)
    expect(includes("ba*", "bash")).toBe(true)
    expect(includes("ba*", "ba?h*")).toBe(true)
    expect(includes("b?sh", "bash")).toBe(true)
    expect(includes("*_x", "a*_x")).toBe(true)
    expect(includes("bash", "ba*")).toBe(false)
    expect(includes("task-?", "task-*")).toBe(false)
    expect(includes("a\\*", "a*")).toBe(false)
    expect(includes("a*", "a\\*")).toBe(true)
  })

  it("reports empty patterns and dangling escapes", () => {
    expect(Glob.problem("")).toBe("must not be empty")
    expect(Glob.problem("a\\")).toContain("dangling")
    expect(Glob.problem("a\\\\")).toBeUndefined()
    expect(Glob.problem("a\\*")).toBeUndefined()
  })
})
