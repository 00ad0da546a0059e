import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"

/** The warnings about what rules match (easy-to-bypass deny conditions have their own tests). */
const warningsOf = (input: Policy.PolicyInput) =>
  Policy.unsafeMake(input).warnings.filter(({ kind }) => kind !== "easyToBypass")
    .map(({ kind, path, ruleId }) => ({ kind, path, ruleId }))

describe("Policy lint: shadowed", () => {
  it("by a higher-precedence list", () => {
    const policy = Policy.unsafeMake({ deny: ["ba*"], requireApproval: ["bash"], allow: [{ id: "sh", tool: "BASH" }] })
    expect(policy.warnings.map(({ kind, path, ruleId }) => ({ kind, path, ruleId }))).toEqual([
      { kind: "shadowed", path: "requireApproval[0]", ruleId: "requireApproval[0]" },
      { kind: "shadowed", path: "allow[0]", ruleId: "sh" }
    ])
    expect(policy.warnings[0].message).toContain("deny[0]")
    expect(policy.warnings[0].message).toContain("deny takes precedence over requireApproval")
  })

  it("by a catch-all deny", () => {
    expect(warningsOf({ deny: ["*"], requireApproval: ["bash", { tool: "gh", args: { repo: "x" } }] })).toEqual([
      { kind: "shadowed", path: "requireApproval[0]", ruleId: "requireApproval[0]" },
      { kind: "shadowed", path: "requireApproval[1]", ruleId: "requireApproval[1]" }
    ])
  })

  it("by an earlier rule of the same list", () => {
    const policy = Policy.unsafeMake({
      allow: ["read_*", "read_file", { tool: "read_dir", args: { path: "/tmp/*" } }, "r?ad_x", "mcp__*", "mcp__gh__?*"]
    })
    expect(policy.warnings.map(({ kind, path }) => ({ kind, path }))).toEqual([
      { kind: "shadowed", path: "allow[1]" },
      { kind: "shadowed", path: "allow[2]" },
      { kind: "shadowed", path: "allow[5]" }
    ])
    expect(policy.warnings[0].message).toContain("the earlier rule allow[0]")
  })

  it("when the shadowing rule's conditions are a subset of the shadowed rule's", () => {
    expect(
      warningsOf({
        deny: [{ tool: "bash", args: { command: "rm *" } }],
        requireApproval: [
          { tool: "bash", args: { command: "rm *", cwd: "/" } },
          { tool: "bash", args: { command: "rm -rf *" } },
          { tool: "bash", args: { command: "rm *" }, agent: "x" }
        ]
      }).map((w) => w.path)
    ).toEqual(["requireApproval[0]", "requireApproval[1]", "requireApproval[2]"])
    expect(
      warningsOf({
        deny: [{ tool: "t", agent: "bot-*", args: { n: "4*", o: { a: 1, b: 2 } } }],
        allow: [{ tool: "t", agent: "bot-7", args: { n: 42, o: { b: 2, a: 1 } } }]
      }).map((w) => w.path)
    ).toEqual(["allow[0]"])
  })
})

describe("Policy lint: no false shadowing", () => {
  it("reports nothing for rules that can still apply", () => {
    expect(warningsOf({
      deny: [
        { tool: "bash", args: { command: "rm *" } },
        { tool: "deploy", agent: "intern-*" },
        "task-?"
      ],
      requireApproval: [
        "bash",
        "deploy",
        "task-*",
        { tool: "gh", args: { n: 1 } },
        { tool: "gh", args: { n: "1" } },
        { tool: "x", args: { o: { a: 1 } } }
      ],
      allow: [
        { tool: "bash", args: { command: "ls" } }, // shadowed by requireApproval "bash": reported
        "ba?h",
        "mcp__github__get_*",
        "mcp__github__*",
        { tool: "x", args: { o: "*" } },
        { tool: "y", agent: "a" },
        { tool: "y", intent: "b" }
      ]
    })).toEqual([{ kind: "shadowed", path: "allow[0]", ruleId: "allow[0]" }])
  })

  it("reports nothing when a broad rule follows a narrow one", () => {
    expect(warningsOf({ requireApproval: ["a*"], allow: ["*"] })).toEqual([])
    expect(warningsOf({ deny: [{ tool: "*", args: { path: "/etc/*" } }], allow: ["cat"] })).toEqual([])
  })
})

describe("Policy lint: never matches", () => {
  it("a tool glob with a leading or trailing space", () => {
    expect(warningsOf({ deny: ["bash "], allow: [" ls"] })).toEqual([
      { kind: "neverMatches", path: "deny[0]", ruleId: "deny[0]" },
      { kind: "neverMatches", path: "allow[0]", ruleId: "allow[0]" }
    ])
  })

  it("args that contradict each other", () => {
    expect(warningsOf({
      deny: [
        { tool: "a", args: { opts: "x", "opts.force": true } },
        { tool: "b", args: { opts: { force: false }, "opts.force": true } },
        { tool: "c", args: { opts: { force: true }, "opts.force": true } },
        { tool: "d", args: { files: ["a"], "files.1": "*" } }
      ]
    })).toEqual([
      { kind: "neverMatches", path: "deny[0]", ruleId: "deny[0]" },
      { kind: "neverMatches", path: "deny[1]", ruleId: "deny[1]" },
      { kind: "neverMatches", path: "deny[3]", ruleId: "deny[3]" }
    ])
  })

  it("args that look inside a matcher object", () => {
    expect(warningsOf({
      requireApproval: [
        { tool: "a", args: { opts: { glob: "x*" }, "opts.force": true } },
        { tool: "b", args: { opts: { equals: { force: false } }, "opts.force": true } },
        { tool: "c", args: { opts: { equals: { force: true } }, "opts.force": true } }
      ]
    })).toEqual([
      { kind: "neverMatches", path: "requireApproval[0]", ruleId: "requireApproval[0]" },
      { kind: "neverMatches", path: "requireApproval[1]", ruleId: "requireApproval[1]" }
    ])
  })

  it("a rule that never matches shadows nothing", () => {
    expect(warningsOf({ deny: ["* "], allow: ["ls"] }).map((w) => w.path)).toEqual(["deny[0]"])
  })
})

describe("Policy lint: no effect", () => {
  it("ttlMs and sessionScope on allow and deny rules", () => {
    const policy = Policy.unsafeMake({
      deny: [{ tool: "rm", ttlMs: 5 }],
      requireApproval: [{ tool: "gh", ttlMs: 5, sessionScope: "tool" }],
      allow: [{ tool: "ls", sessionScope: "exact" }]
    })
    expect(policy.warnings.map(({ kind, path }) => ({ kind, path }))).toEqual([
      { kind: "noEffect", path: "deny[0]" },
      { kind: "noEffect", path: "allow[0]" }
    ])
    expect(policy.warnings[0].message).toContain("ttlMs")
    expect(policy.warnings[1].message).toContain("sessionScope")
  })
})

describe("Policy lint: easy to bypass", () => {
  const bypasses = (input: Policy.PolicyInput) =>
    Policy.unsafeMake(input).warnings.filter(({ kind }) => kind === "easyToBypass")

  it("warns about the README's own plain deny glob, each reason named", () => {
    const [warning, ...rest] = bypasses({ deny: [{ tool: "bash", args: { command: "rm -rf*" } }] })
    expect(rest).toEqual([])
    expect(warning).toMatchObject({ kind: "easyToBypass", path: "deny[0]", ruleId: "deny[0]" })
    expect(warning!.message).toContain("args \"command\" is easy to step around")
    expect(warning!.message).toContain("use { shell: \"...\" }")
    expect(warning!.message).toContain("no leading *")
    expect(warning!.message).toContain("\"RM -RF*\" escapes it")
  })

  it("warns about a glob without a leading * and a case-sensitive glob on any argument", () => {
    const warnings = bypasses({
      deny: [
        { tool: "deploy", args: { env: "prod*" } },
        { tool: "deploy", args: { env: "*prod*" } },
        { tool: "deploy", args: { env: { glob: "prod*", caseInsensitive: true } } },
        { tool: "read_file", args: { path: "*.env" } },
        { tool: "deploy", args: { replicas: 0, dryRun: false, region: "*-1" } }
      ]
    })
    expect(warnings.map((w) => w.path)).toEqual(["deny[0]", "deny[1]", "deny[2]", "deny[3]"])
    expect(warnings[0]!.message).toContain("no leading *")
    expect(warnings[0]!.message).toContain("case-sensitive")
    expect(warnings[1]!.message).not.toContain("no leading *")
    expect(warnings[2]!.message).not.toContain("case-sensitive")
    expect(warnings[3]!.message).toContain("\"*.ENV\" escapes it")
  })

  it("is quiet for shell matchers, case-insensitive globs with a leading *, and non-deny rules", () => {
    expect(bypasses({
      deny: [
        { tool: "bash", args: { command: { shell: "rm -rf*" } } },
        { tool: "bash", args: { cmd: { shell: "sudo *" } } },
        { tool: "deploy", args: { env: { glob: "*prod*", caseInsensitive: true } } }
      ],
      requireApproval: [{ tool: "bash", args: { command: "git push*" } }],
      allow: [{ tool: "bash", args: { command: "ls*" } }]
    })).toEqual([])
  })

  it("warns about a command-like argument matched as one string, even by a case-insensitive glob", () => {
    const warnings = bypasses({
      deny: [
        { tool: "bash", args: { cmd: { glob: "*rm -rf*", caseInsensitive: true } } },
        { tool: "run", args: { "options.script": { equals: "make clean" } } }
      ]
    })
    expect(warnings.map((w) => [w.path, w.message.includes("looks like a command line")])).toEqual([
      ["deny[0]", true],
      ["deny[1]", true]
    ])
  })
})
