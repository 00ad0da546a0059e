import * as Policy from "@tool-gate/core/Policy"
import { PolicyInvalid } from "@tool-gate/core/ToolGateError"
import { describe, expect, it } from "bun:test"
import { Effect, Either } from "effect"

const problemsOf = (effect: Effect.Effect<Policy.Policy, PolicyInvalid>) => {
  const result = Effect.runSync(Effect.either(effect))
  if (Either.isRight(result)) throw new Error("expected the policy to be invalid")
  expect(result.left).toBeInstanceOf(PolicyInvalid)
  return result.left
}

describe("Policy.make validation", () => {
  it("lists every problem together, each with its path, in document order", () => {
    const error = problemsOf(Policy.make({
      default: "maybe",
      ttlMs: -5,
      bogusKey: true,
      deny: [{ tool: "" }, 42, { tool: "x", colour: "red" }, "a\\"],
      requireApproval: [
        "bash",
        "git",
        { id: "gh", tool: "gh" },
        { tool: "fs", args: { path: () => 1, "a..b": "x" }, sessionScope: "always", ttlMs: 1.5 }
      ],
      allow: [{ id: "gh", tool: "y" }, { args: {} }, { tool: "z", agent: 7 }]
    }))
    expect(error.problems).toEqual([
      { path: "default", message: "expected \"allow\" | \"deny\" | \"requireApproval\"" },
      { path: "ttlMs", message: "must be a whole number of milliseconds from 1 to 31536000000 (one year), got -5" },
      { path: "bogusKey", message: "unknown key" },
      { path: "deny[0].tool", message: "must not be empty" },
      { path: "deny[1]", message: "expected a tool-name glob or a matcher object" },
      { path: "deny[2].colour", message: "unknown key" },
      { path: "deny[3]", message: "ends with a dangling \\ escape (write \\\\ for a literal backslash)" },
      { path: "requireApproval[3].args.path", message: "expected a glob string or a JSON value" },
      {
        path: "requireApproval[3].ttlMs",
        message: "must be a whole number of milliseconds from 1 to 31536000000 (one year), got 1.5"
      },
      { path: "requireApproval[3].sessionScope", message: "expected \"exact\" | \"tool\"" },
      {
        path: "requireApproval[3].args[\"a..b\"]",
        message: "expected an argument path like \"path\" or \"options.recursive\", got \"a..b\""
      },
      { path: "allow[0].id", message: "duplicate rule id \"gh\" (also requireApproval[2])" },
      { path: "allow[1].tool", message: "is required" },
      { path: "allow[2].agent", message: "expected a glob string" }
    ])
    expect(error.message).toStartWith(
      "Invalid policy: default: expected \"allow\" | \"deny\" | \"requireApproval\"; ttlMs:"
    )
    expect(error.message).not.toContain("    at ")
  })

  it("refuses a value that is not a policy object", () => {
    for (const input of [null, 5, "deny everything", [], undefined]) {
      expect(problemsOf(Policy.make(input)).problems).toEqual([
        { path: "", message: "expected a policy object with any of: default, ttlMs, deny, requireApproval, allow" }
      ])
    }
  })

  it("refuses lists that are not lists and args that are not objects", () => {
    expect(problemsOf(Policy.make({ allow: "ls", deny: [{ tool: "x", args: ["a"] }] })).problems).toEqual([
      { path: "allow", message: "expected a list of matchers" },
      { path: "deny[0].args", message: "expected an object mapping argument paths to globs or JSON values" }
    ])
  })

  it("refuses non-finite numbers", () => {
    expect(
      problemsOf(Policy.make({ ttlMs: Infinity, deny: [{ tool: "x", args: { n: NaN, m: [1, Infinity] } }] })).problems
    )
      .toEqual([
        {
          path: "ttlMs",
          message: "must be a whole number of milliseconds from 1 to 31536000000 (one year), got Infinity"
        },
        { path: "deny[0].args.n", message: "expected a glob string or a JSON value" },
        { path: "deny[0].args.m", message: "expected a glob string or a JSON value" }
      ])
  })

  it("refuses empty and reserved ids, and ids that collide with generated ones", () => {
    expect(
      problemsOf(
        Policy.make({ deny: [{ id: "", tool: "a" }, { id: "default", tool: "b" }, "c", { id: "deny[2]", tool: "d" }] })
      ).problems
    )
      .toEqual([
        { path: "deny[0].id", message: "must not be empty" },
        { path: "deny[1].id", message: "\"default\" is reserved for the policy default" },
        { path: "deny[3].id", message: "duplicate rule id \"deny[2]\" (also deny[2])" }
      ])
  })

  it("checks agent, intent and args globs too", () => {
    expect(
      problemsOf(Policy.make({ requireApproval: [{ tool: "x", agent: "", intent: "a\\", args: { p: "\\" } }] }))
        .problems
    )
      .toEqual([
        { path: "requireApproval[0].agent", message: "must not be empty" },
        {
          path: "requireApproval[0].intent",
          message: "ends with a dangling \\ escape (write \\\\ for a literal backslash)"
        },
        {
          path: "requireApproval[0].args.p",
          message: "ends with a dangling \\ escape (write \\\\ for a literal backslash)"
        }
      ])
  })

  it("accepts an escaped backslash", () => {
    const policy = Effect.runSync(Policy.make({ deny: ["a\\\\b"] }))
    expect(policy.evaluate({ name: "a\\b", args: {} })._tag).toBe("Deny")
  })

  it("unsafeMake throws the PolicyInvalid", () => {
    expect(() => Policy.unsafeMake({ ttlMs: 0 })).toThrow(PolicyInvalid)
    try {
      Policy.unsafeMake({ deny: [""] })
    } catch (error) {
      expect((error as PolicyInvalid).problems).toEqual([{ path: "deny[0]", message: "must not be empty" }])
    }
  })
})

describe("Policy.fromJson", () => {
  it("parses a valid policy", () => {
    const policy = Effect.runSync(Policy.fromJson("{ \"deny\": [\"rm\"], \"default\": \"requireApproval\" }"))
    expect(policy.default).toBe("requireApproval")
    expect(policy.evaluate({ name: "rm", args: {} })._tag).toBe("Deny")
  })

  it("names the line and column of a syntax error, and the source", () => {
    const error = problemsOf(Policy.fromJson("{\n  \"deny\": [\"rm\",]\n}", "policy.json"))
    expect(error.source).toBe("policy.json")
    expect(error.problems).toEqual([{ path: "", message: "line 2, column 17: expected a JSON value, found \"]\"" }])
    expect(error.message).toBe("Invalid policy policy.json: line 2, column 17: expected a JSON value, found \"]\"")
  })

  it("reports other syntax errors by position", () => {
    const message = (text: string) => problemsOf(Policy.fromJson(text)).problems[0].message
    expect(message("")).toBe("line 1, column 1: expected a JSON value, found the end of the text")
    expect(message("{\"a\": \"x\\q\"}")).toBe("line 1, column 9: invalid escape \\q")
    expect(message("{\"a\": \"x")).toBe("line 1, column 7: unterminated string")
    expect(message("{\"a\" 1}")).toBe("line 1, column 6: expected \":\", found \"1\"")
    expect(message("{} x")).toBe("line 1, column 4: unexpected \"x\" after the JSON value")
    expect(message("{\n\n  'deny': []}")).toBe("line 3, column 3: expected \"\\\"\", found \"'\"")
  })

  it("refuses duplicate keys instead of silently keeping the last", () => {
    expect(problemsOf(Policy.fromJson("{\"deny\": [\"rm\"],\n \"deny\": []}")).problems).toEqual([
      { path: "", message: "line 2, column 2: duplicate key \"deny\"" }
    ])
  })

  it("reports schema problems of well-formed JSON with their paths, lines and columns", () => {
    const error = problemsOf(Policy.fromJson("{\"deny\": [{\"tool\": \"x\", \"ttl\": 5}]}", "p.json"))
    // an unknown key is shown at the key
    expect(error.problems).toEqual([{ path: "deny[0].ttl", message: "unknown key", line: 1, column: 25 }])
    expect(error.message).toBe("Invalid policy p.json: deny[0].ttl (line 1, column 25): unknown key")
  })

  it("keeps a __proto__ key an ordinary (unknown) key", () => {
    expect(problemsOf(Policy.fromJson("{\"__proto__\": {\"default\": \"deny\"}}")).problems).toEqual([
      { path: "__proto__", message: "unknown key", line: 1, column: 2 }
    ])
  })
})

describe("Policy.fromYaml", () => {
  it("parses a valid policy", () => {
    const policy = Effect.runSync(Policy.fromYaml([
      "default: deny",
      "allow:",
      "  - ls",
      "  - tool: cat",
      "    args: { path: \"/tmp/*\" }",
      "  - tool: git",
      "    args:",
      "      subcommand: no # YAML 1.2: a string, not false"
    ].join("\n")))
    expect(policy.evaluate({ name: "ls", args: {} })._tag).toBe("Allow")
    expect(policy.evaluate({ name: "cat", args: { path: "/tmp/a" } })._tag).toBe("Allow")
    expect(policy.evaluate({ name: "cat", args: { path: "/etc/a" } })._tag).toBe("Deny")
    expect(policy.evaluate({ name: "git", args: { subcommand: "no" } })._tag).toBe("Allow")
  })

  it("names the line and column of syntax errors", () => {
    const error = problemsOf(Policy.fromYaml("deny:\n  - rm\nallow: [ls\n", "policy.yaml"))
    expect(error.source).toBe("policy.yaml")
    expect(error.problems.length).toBeGreaterThan(0)
    for (const problem of error.problems) expect(problem.message).toMatch(/^line \d+, column \d+: /)
  })

  it("refuses duplicate keys", () => {
    expect(problemsOf(Policy.fromYaml("deny: [rm]\ndeny: [dd]\n")).problems).toEqual([
      { path: "", message: "line 2, column 1: Map keys must be unique" }
    ])
  })

  it("refuses an empty document and infinite numbers", () => {
    expect(problemsOf(Policy.fromYaml("")).problems[0].path).toBe("")
    expect(problemsOf(Policy.fromYaml("ttlMs: .inf\ndeny:\n  - tool: x\n    args: { n: .nan }\n")).problems).toEqual([
      {
        path: "ttlMs",
        message: "must be a whole number of milliseconds from 1 to 31536000000 (one year), got Infinity",
        line: 1,
        column: 8
      },
      { path: "deny[0].args.n", message: "expected a glob string or a JSON value", line: 4, column: 16 }
    ])
  })
})
