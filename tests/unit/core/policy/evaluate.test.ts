import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"

const call = (name: string, args: Record<string, unknown> = {}, extra: Partial<Policy.MatchInput> = {}) => ({
  name,
  args,
  ...extra
})

describe("Policy.evaluate precedence", () => {
  const policy = Policy.unsafeMake({
    deny: ["rm"],
    requireApproval: ["rm", "bash"],
    allow: ["rm", "bash", "ls"]
  })

  it("deny beats requireApproval and allow", () => {
    const decision = policy.evaluate(call("rm"))
    expect(decision).toMatchObject({ _tag: "Deny", rule: { id: "deny[0]", source: "deny" } })
  })

  it("requireApproval beats allow", () => {
    expect(policy.evaluate(call("bash"))).toMatchObject({
      _tag: "RequireApproval",
      rule: { id: "requireApproval[1]", source: "requireApproval" }
    })
  })

  it("allow beats the default", () => {
    const strict = Policy.unsafeMake({ default: "deny", allow: ["ls"] })
    expect(strict.evaluate(call("ls"))).toEqual({
      _tag: "Allow",
      via: "policy",
      rule: { id: "allow[0]", source: "allow" },
      policyVersion: strict.version
    })
  })

  it("falls back to each default value", () => {
    expect(policy.evaluate(call("cat"))).toEqual({ _tag: "Allow", via: "default", policyVersion: policy.version })
    const deny = Policy.unsafeMake({ default: "deny" })
    expect(deny.evaluate(call("cat"))).toMatchObject({
      _tag: "Deny",
      rule: { id: "default", source: "default" },
      policyVersion: deny.version
    })
    const ask = Policy.unsafeMake({ default: "requireApproval", ttlMs: 1234 })
    expect(ask.evaluate(call("cat"))).toEqual({
      _tag: "RequireApproval",
      rule: { id: "default", source: "default" },
      ttlMs: 1234,
      sessionScope: "exact",
      policyVersion: ask.version
    })
  })

  it("the default default is allow with a 5 minute ttl", () => {
    expect(Policy.allowAll.default).toBe("allow")
    expect(Policy.allowAll.ttlMs).toBe(300_000)
    expect(Policy.allowAll.rules).toEqual([])
    expect(Policy.allowAll.evaluate(call("anything"))._tag).toBe("Allow")
  })

  it("cites the first matching rule of a list in document order", () => {
    const p = Policy.unsafeMake({ deny: [{ tool: "x", args: { a: 1 } }, "x*", "x"] })
    expect(p.evaluate(call("x", { a: 2 }))).toMatchObject({ rule: { id: "deny[1]" } })
    expect(p.evaluate(call("x", { a: 1 }))).toMatchObject({ rule: { id: "deny[0]" } })
  })

  it("orders rules deny, requireApproval, allow, each in document order", () => {
    const p = Policy.unsafeMake({ allow: ["a", "b"], deny: ["c"], requireApproval: ["d"] })
    expect(p.rules.map((r) => r.id)).toEqual(["deny[0]", "requireApproval[0]", "allow[0]", "allow[1]"])
    expect(p.rules.map((r) => r.index)).toEqual([0, 0, 0, 1])
  })
})

describe("Policy decisions", () => {
  it("a deny decision carries the rule's reason, or one naming the rule", () => {
    const p = Policy.unsafeMake({ deny: [{ tool: "rm", reason: "never delete" }, "dd"] })
    expect(p.evaluate(call("rm"))).toEqual({
      _tag: "Deny",
      rule: { id: "deny[0]", source: "deny" },
      reason: "never delete",
      policyVersion: p.version
    })
    const dd = p.evaluate(call("dd"))
    expect(dd._tag === "Deny" && dd.reason).toContain("deny[1]")
  })

  it("requireApproval uses the rule's ttl, scope and reason, else the policy's", () => {
    const p = Policy.unsafeMake({
      ttlMs: 9_000,
      requireApproval: ["bash", { tool: "gh", ttlMs: 50, sessionScope: "tool", reason: "visible to others" }]
    })
    expect(p.evaluate(call("bash"))).toEqual({
      _tag: "RequireApproval",
      rule: { id: "requireApproval[0]", source: "requireApproval" },
      ttlMs: 9_000,
      sessionScope: "exact",
      policyVersion: p.version
    })
    expect(p.evaluate(call("gh"))).toEqual({
      _tag: "RequireApproval",
      rule: { id: "requireApproval[1]", source: "requireApproval" },
      ttlMs: 50,
      sessionScope: "tool",
      reason: "visible to others",
      policyVersion: p.version
    })
  })

  it("returns the same frozen decision object for every match of a rule", () => {
    const p = Policy.unsafeMake({ deny: ["rm"] })
    const first = p.evaluate(call("rm", { a: 1 }))
    expect(p.evaluate(call("RM", { b: 2 }))).toBe(first)
    expect(Object.isFrozen(first)).toBe(true)
    expect(p.evaluate(call("x"))).toBe(p.evaluate(call("y")))
  })

  it("explicit ids are cited; others are list[index]", () => {
    const p = Policy.unsafeMake({ requireApproval: ["a", "b", { id: "github", tool: "gh" }] })
    expect(p.rules.map((r) => r.id)).toEqual(["requireApproval[0]", "requireApproval[1]", "github"])
    expect(p.evaluate(call("gh"))).toMatchObject({ rule: { id: "github", source: "requireApproval" } })
  })

  it("match returns the highest-precedence matching rule", () => {
    const p = Policy.unsafeMake({ allow: ["ls"], deny: [{ tool: "ls", args: { path: "/etc/*" } }] })
    expect(p.match(call("ls", { path: "/etc/passwd" }))).toMatchObject({ id: "deny[0]", source: "deny", tool: "ls" })
    expect(p.match(call("ls", { path: "/tmp" }))).toMatchObject({ id: "allow[0]", source: "allow" })
    expect(p.match(call("cat"))).toBeUndefined()
  })
})

describe("Policy tool names", () => {
  it("compare case-insensitively, both ways", () => {
    const p = Policy.unsafeMake({ deny: ["Bash", "MCP__GitHub__*"] })
    for (const name of ["bash", "BASH", "Bash", "bAsH"]) expect(p.evaluate(call(name))._tag).toBe("Deny")
    expect(p.evaluate(call("mcp__github__create_issue"))._tag).toBe("Deny")
    expect(p.evaluate(call("bashful"))._tag).toBe("Allow")
  })

  it("support the glob forms", () => {
    const p = Policy.unsafeMake({
      deny: ["task-*", "mcp__github__*", "b?sh", "literal\\*star", "a\\?b", "*.exe", "x*y*z"]
    })
    const denied = (name: string) => p.evaluate(call(name))._tag === "Deny"
    expect(denied("task-")).toBe(true)
    expect(denied("task-build")).toBe(true)
    expect(denied("task")).toBe(false)
    expect(denied("mcp__github__list_issues")).toBe(true)
    expect(denied("mcp__gitlab__list_issues")).toBe(false)
    expect(denied("bash")).toBe(true)
    expect(denied("bosh")).toBe(true)
    expect(denied("bsh")).toBe(false)
    expect(denied("baash")).toBe(false)
    expect(denied("literal*star")).toBe(true)
    expect(denied("literalXstar")).toBe(false)
    expect(denied("a?b")).toBe(true)
    expect(denied("axb")).toBe(false)
    expect(denied("setup.EXE")).toBe(true)
    expect(denied("x-y-z")).toBe(true)
    expect(denied("xz")).toBe(false)
  })

  it("treat regular-expression characters literally", () => {
    const p = Policy.unsafeMake({ deny: ["a.b", "(x)+*"] })
    expect(p.evaluate(call("a.b"))._tag).toBe("Deny")
    expect(p.evaluate(call("axb"))._tag).toBe("Allow")
    expect(p.evaluate(call("(x)+1"))._tag).toBe("Deny")
    expect(p.evaluate(call("xx1"))._tag).toBe("Allow")
  })

  it("stay correct beyond the candidate cache's size", () => {
    const p = Policy.unsafeMake({ deny: ["n-1*"], allow: ["n-*"], default: "requireApproval" })
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 12_000; i++) {
        const expected = String(i).startsWith("1") ? "Deny" : "Allow"
        expect(p.evaluate(call(`n-${i}`))._tag).toBe(expected)
      }
    }
  })
})

describe("Policy args", () => {
  it("a string is a case-sensitive glob over a string argument", () => {
    const p = Policy.unsafeMake({ deny: [{ tool: "bash", args: { command: "rm -rf *" } }] })
    expect(p.evaluate(call("bash", { command: "rm -rf /" }))._tag).toBe("Deny")
    expect(p.evaluate(call("bash", { command: "RM -RF /" }))._tag).toBe("Allow")
    expect(p.evaluate(call("bash", { command: "ls" }))._tag).toBe("Allow")
  })

  it("a string glob matches numbers and booleans by their JSON text", () => {
    const p = Policy.unsafeMake({ deny: [{ tool: "t", args: { n: "4*" } }, { tool: "u", args: { b: "true" } }] })
    expect(p.evaluate(call("t", { n: 42 }))._tag).toBe("Deny")
    expect(p.evaluate(call("t", { n: "42" }))._tag).toBe("Deny")
    expect(p.evaluate(call("t", { n: 5 }))._tag).toBe("Allow")
    expect(p.evaluate(call("u", { b: true }))._tag).toBe("Deny")
    expect(p.evaluate(call("t", { n: null }))._tag).toBe("Allow")
    expect(p.evaluate(call("t", { n: [42] }))._tag).toBe("Allow")
  })

  it("any other value must be equal, whatever the key order", () => {
    const p = Policy.unsafeMake({
      deny: [
        { tool: "t", args: { n: 1 } },
        { tool: "t", args: { flag: false } },
        { tool: "t", args: { nothing: null } },
        { tool: "t", args: { opts: { a: 1, b: [1, { c: 2, d: 3 }] } } }
      ]
    })
    const tag = (args: Record<string, unknown>) => p.evaluate(call("t", args))._tag
    expect(tag({ n: 1 })).toBe("Deny")
    expect(tag({ n: "1" })).toBe("Allow")
    expect(tag({ flag: false })).toBe("Deny")
    expect(tag({ flag: 0 })).toBe("Allow")
    expect(tag({ nothing: null })).toBe("Deny")
    expect(tag({ nothing: undefined })).toBe("Allow")
    expect(tag({ opts: { b: [1, { d: 3, c: 2 }], a: 1 } })).toBe("Deny")
    expect(tag({ opts: { a: 1, b: [{ c: 2, d: 3 }, 1] } })).toBe("Allow")
    expect(tag({ opts: { a: 1, b: [1, { c: 2, d: 3 }], extra: true } })).toBe("Allow")
  })

  it("paths reach into nested objects and arrays", () => {
    const p = Policy.unsafeMake({
      deny: [
        { tool: "t", args: { "options.recursive": true } },
        { tool: "t", args: { "files.0": "*.env" } },
        { tool: "t", args: { "deep.list.1.name": "secret*" } }
      ]
    })
    const tag = (args: Record<string, unknown>) => p.evaluate(call("t", args))._tag
    expect(tag({ options: { recursive: true } })).toBe("Deny")
    expect(tag({ options: { recursive: false } })).toBe("Allow")
    expect(tag({ files: [".env", "a"] })).toBe("Deny")
    expect(tag({ files: ["a", ".env"] })).toBe("Allow")
    expect(tag({ deep: { list: [{}, { name: "secret-1" }] } })).toBe("Deny")
    expect(tag({ deep: { list: { 1: { name: "secret-1" } } } })).toBe("Deny")
  })

  it("a missing path means the rule does not match", () => {
    const p = Policy.unsafeMake({
      deny: [{ tool: "t", args: { path: "*" } }, { tool: "u", args: { "a.b": "*" } }, {
        tool: "v",
        args: { "xs.5": 1 }
      }]
    })
    expect(p.evaluate(call("t", {}))._tag).toBe("Allow")
    expect(p.evaluate(call("t", { other: "x" }))._tag).toBe("Allow")
    expect(p.evaluate(call("u", { a: "b" }))._tag).toBe("Allow")
    expect(p.evaluate(call("u", { a: null }))._tag).toBe("Allow")
    expect(p.evaluate(call("v", { xs: [1, 2] }))._tag).toBe("Allow")
    expect(p.evaluate(call("v", { xs: { length: 9 } }))._tag).toBe("Allow")
  })

  it("inherited properties are not arguments", () => {
    const p = Policy.unsafeMake({
      deny: [{ tool: "t", args: { constructor: "*" } }, { tool: "u", args: { "a.toString": "*" } }]
    })
    expect(p.evaluate(call("t", {}))._tag).toBe("Allow")
    expect(p.evaluate(call("u", { a: {} }))._tag).toBe("Allow")
  })

  it("every condition must hold", () => {
    const p = Policy.unsafeMake({ deny: [{ tool: "t", args: { a: "x*", b: 2 } }] })
    expect(p.evaluate(call("t", { a: "xy", b: 2 }))._tag).toBe("Deny")
    expect(p.evaluate(call("t", { a: "xy", b: 3 }))._tag).toBe("Allow")
    expect(p.evaluate(call("t", { a: "y", b: 2 }))._tag).toBe("Allow")
  })
})

describe("Policy agent and intent", () => {
  const p = Policy.unsafeMake({
    deny: [{ tool: "deploy", agent: "intern-*" }, { tool: "email", intent: "newsletter" }]
  })

  it("agent is a glob over agentId; a call without one does not match", () => {
    expect(p.evaluate(call("deploy", {}, { agentId: "intern-7" }))._tag).toBe("Deny")
    expect(p.evaluate(call("deploy", {}, { agentId: "release-bot" }))._tag).toBe("Allow")
    expect(p.evaluate(call("deploy"))._tag).toBe("Allow")
  })

  it("intent is a glob over intentId; a call without one does not match", () => {
    expect(p.evaluate(call("email", {}, { intentId: "newsletter" }))._tag).toBe("Deny")
    expect(p.evaluate(call("email", {}, { intentId: "newsletter-2" }))._tag).toBe("Allow")
    expect(p.evaluate(call("email", {}, { intentId: undefined }))._tag).toBe("Allow")
  })
})

describe("Policy.version", () => {
  const base = { default: "deny", ttlMs: 1000, deny: [{ tool: "rm", args: { a: 1, b: { c: 2, d: 3 } } }] } as const

  it("is a sha256 hex digest", () => {
    expect(Policy.unsafeMake(base).version).toMatch(/^[0-9a-f]{64}$/)
  })

  it("does not depend on key order or on spelled-out defaults", () => {
    const reordered = Policy.unsafeMake({
      deny: [{ args: { b: { d: 3, c: 2 }, a: 1 }, tool: "rm" }],
      ttlMs: 1000,
      default: "deny"
    })
    expect(reordered.version).toBe(Policy.unsafeMake(base).version)
    expect(Policy.unsafeMake({}).version).toBe(
      Policy.unsafeMake({ default: "allow", ttlMs: 300_000, allow: [], deny: [], requireApproval: [] }).version
    )
    expect(Policy.unsafeMake({ deny: ["rm"] }).version).toBe(Policy.unsafeMake({ deny: [{ tool: "rm" }] }).version)
  })

  it("changes when a rule changes", () => {
    const v = Policy.unsafeMake(base).version
    expect(Policy.unsafeMake({ ...base, deny: [{ tool: "rm", args: { a: 2, b: { c: 2, d: 3 } } }] }).version).not.toBe(
      v
    )
    expect(
      Policy.unsafeMake({ ...base, deny: [{ tool: "rm", args: { a: 1, b: { c: 2, d: 3 } }, reason: "r" }] }).version
    )
      .not.toBe(v)
    expect(Policy.unsafeMake({ ...base, ttlMs: 1001 }).version).not.toBe(v)
    expect(Policy.unsafeMake({ ...base, default: "allow" }).version).not.toBe(v)
  })

  it("is cited by every decision", () => {
    const p = Policy.unsafeMake({ deny: ["a"], requireApproval: ["b"], allow: ["c"] })
    for (const name of ["a", "b", "c", "d"]) expect(p.evaluate(call(name)).policyVersion).toBe(p.version)
  })
})

describe("Policy.input", () => {
  it("is the normalized, frozen policy, detached from the author's objects", () => {
    const args = { path: "/etc/*" }
    const p = Policy.unsafeMake({ requireApproval: [{ tool: "x" }, { tool: "y", args }] })
    expect(p.input).toEqual({
      default: "allow",
      ttlMs: 300_000,
      deny: [],
      requireApproval: ["x", { tool: "y", args: { path: "/etc/*" } }],
      allow: []
    })
    args.path = "*"
    expect(p.evaluate(call("y", { path: "/tmp" }))._tag).toBe("Allow")
    expect(Object.isFrozen(p.input)).toBe(true)
    expect(Object.isFrozen(p.rules[1].args)).toBe(true)
  })
})
