/**
 * `toolgate policy` as users run it (the real bin, as Node processes):
 * - `check FILE`: exit 0 for a valid policy (lint warnings printed), 1 for an invalid one with
 *   every problem, its path, line and column; `--tools` adds the rules and argument paths no tool
 *   has; `--format github` prints workflow annotations; `--strict` fails on warnings;
 * - `eval POLICY --call JSON`: the decision, the rule and why;
 * - `test POLICY CASES`: a table of calls and expected outcomes, exit 1 on a mismatch;
 * - `diff OLD NEW --calls FILE`: the recorded calls (audit events from `toolgate audit --json`,
 *   or plain calls) the new policy decides differently.
 */
import { ToolCall } from "@tool-gate/core"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fixture, toolgate } from "./support/cli.js"

let dir: string
const file = (name: string, text: string) => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "toolgate-cli-policy-"))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("toolgate policy check", () => {
  test("the example policies are valid: exit 0, a summary line", async () => {
    for (const example of ["examples/policy.yaml", "examples/policy.json"]) {
      const result = await toolgate(["policy", "check", example])
      expect({ example, code: result.code, stderr: result.stderr }).toEqual({ example, code: 0, stderr: "" })
      expect(result.stdout.trim()).toMatch(
        new RegExp(`^${example}: valid policy, \\d+ rule\\(s\\), 0 warning\\(s\\), version [0-9a-f]{12}$`)
      )
    }
  })

  test("every problem of an invalid policy, each with its path, line and column: exit 1", async () => {
    const bad = file(
      "bad.yaml",
      `default: maybe
ttlMs: -5
requireApproval:
  - bash
  - tool: deploy
    sessionScope: forever
    args:
      env: 3
allow:
  - tool: read_file
    agnet: x
bogus: true
dny: [bash]
`
    )
    const result = await toolgate(["policy", "check", bad])
    expect(result.code).toBe(1)
    const lines = result.stdout.trim().split("\n")
    expect(lines.at(-1)).toBe(`${bad}: invalid policy, ${lines.length - 1} problem(s)`)
    const located = lines.slice(0, -1).map((line) => {
      const match = new RegExp(`^${bad}:(\\d+):(\\d+): (\\S+): error: (.+)$`).exec(line)
      if (match === null) throw new Error(`not FILE:LINE:COL: PATH: error: MESSAGE: ${line}`)
      return { line: Number(match[1]), column: Number(match[2]), path: match[3], message: match[4] }
    })
    expect(located).toEqual(expect.arrayContaining([
      expect.objectContaining({ path: "default", line: 1, column: 10 }),
      expect.objectContaining({ path: "ttlMs", line: 2, column: 8 }),
      expect.objectContaining({ path: "requireApproval[1].sessionScope", line: 6, column: 19 }),
      // an unknown key is reported at the key, with the key it most likely meant
      { path: "allow[0].agnet", line: 11, column: 5, message: "unknown key (did you mean \"agent\"?)" },
      { path: "bogus", line: 12, column: 1, message: "unknown key" },
      { path: "dny", line: 13, column: 1, message: "unknown key (did you mean \"deny\"?)" }
    ]))
  })

  test("JSON problems carry line and column too, not only syntax errors", async () => {
    const json = file(
      "located.json",
      "{\n  \"deny\": [\n    { \"tool\": \"bash\", \"reasn\": \"x\" }\n  ],\n  \"ttlMs\": 0\n}\n"
    )
    const result = await toolgate(["policy", "check", json])
    expect(result.code).toBe(1)
    expect(result.stdout).toContain(`${json}:3:23: deny[0].reasn: error: unknown key (did you mean "reason"?)`)
    expect(result.stdout).toMatch(new RegExp(`^${json}:5:12: ttlMs: error: `, "m"))
  })

  test("syntax errors carry line and column, in YAML and JSON", async () => {
    const yaml = file("broken.yaml", "deny:\n  - tool: bash\n   reason: [unclosed\n")
    const yamlResult = await toolgate(["policy", "check", yaml])
    expect(yamlResult.code).toBe(1)
    expect(yamlResult.stdout).toMatch(new RegExp(`^${yaml}:\\d+:\\d+: error: `, "m"))

    const json = file("broken.json", "{\n  \"deny\": [\"bash\",]\n}\n")
    const jsonResult = await toolgate(["policy", "check", json])
    expect(jsonResult.code).toBe(1)
    expect(jsonResult.stdout).toContain(`${json}:2:19: error: expected a JSON value, found "]"`)
  })

  test("lint warnings are printed with their rule's path and place; the policy is still valid (exit 0)", async () => {
    const shadowed = file("shadowed.yaml", "requireApproval:\n  - bash\nallow:\n  - bash\n  - read_file\n")
    const result = await toolgate(["policy", "check", shadowed])
    expect(result.code).toBe(0)
    const [warning, summary] = result.stdout.trim().split("\n")
    expect(warning).toStartWith(`${shadowed}:4:5: allow[0]: warning (shadowed): `)
    expect(summary).toMatch(/valid policy, 3 rule\(s\), 1 warning\(s\)/)
    // --strict: any warning fails the check
    expect((await toolgate(["policy", "check", shadowed, "--strict"])).code).toBe(1)
  })

  test("glob syntax these globs lack is a warning at the glob, not a silent literal", async () => {
    const globs = file("globs.yaml", "deny:\n  - tool: read_file\n    args:\n      path: \"*.{env,pem}\"\n")
    const result = await toolgate(["policy", "check", globs])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain(
      `${globs}:4:13: deny[0].args.path: warning (unsupportedGlob): deny[0] (tool "read_file"): "{env,pem}" looks like brace alternatives`
    )
  })

  test("--json: the problems and warnings as data, with their line and column", async () => {
    const shadowed = file("shadowed.json", JSON.stringify({ requireApproval: ["bash"], allow: ["bash"] }))
    const valid = JSON.parse((await toolgate(["policy", "check", shadowed, "--json"])).stdout)
    expect(valid).toMatchObject({
      file: shadowed,
      valid: true,
      rules: 2,
      problems: [],
      warnings: [{ path: "allow[0]", kind: "shadowed", ruleId: "allow[0]", line: 1, column: 38 }]
    })

    const invalid = await toolgate(["policy", "check", file("invalid.json", "{\"default\": 1}"), "--format", "json"])
    expect(invalid.code).toBe(1)
    expect(JSON.parse(invalid.stdout)).toMatchObject({
      valid: false,
      problems: [{ path: "default", line: 1, column: 13 }],
      warnings: []
    })
  })

  test("--format github: one workflow annotation per problem, with file, line and column", async () => {
    const bad = file("annotated.yaml", "deny:\n  - tool: bash\n    resaon: \"50%, then: more\"\n")
    const result = await toolgate(["policy", "check", bad, "--format", "github"])
    expect(result.code).toBe(1)
    const [annotation] = result.stdout.trim().split("\n")
    expect(annotation).toBe(
      `::error file=${bad},line=3,col=5,title=toolgate policy deny[0].resaon::unknown key (did you mean "reason"?)`
    )
    const warned = file("warned.yaml", "allow:\n  - \"task-[0-9]\"\n")
    const warning = await toolgate(["policy", "check", warned, "--format", "github"])
    expect(warning.code).toBe(0)
    expect(warning.stdout).toStartWith(`::warning file=${warned},line=2,col=5,title=toolgate policy allow[0]::`)
    expect(warning.stdout).toContain("(unsupportedGlob)")
  })

  test("a missing file or an unknown extension is invalid (exit 1), a missing argument is a usage error (exit 2)", async () => {
    const missing = await toolgate(["policy", "check", join(dir, "nope.yaml")])
    expect(missing.code).toBe(1)
    expect(missing.stdout).toContain(`${join(dir, "nope.yaml")}: error: cannot read the file`)
    const text = await toolgate(["policy", "check", file("policy.txt", "deny: [bash]")])
    expect(text.code).toBe(1)
    expect(text.stdout).toContain("unknown file type: expected a .json, .yaml or .yml file")
    expect((await toolgate(["policy", "check"])).code).toBe(2)
  })
})

describe("toolgate policy check --tools", () => {
  const typo = `deny:
  - id: no-rm
    tool: bash
    args:
      comand: { shell: "rm *" }
allow:
  - reed_file
  - tool: write_file
    args:
      options.overwrite: false
`

  test("a directory of JSON Schema files, one per tool: the issue's typo, and a tool that does not exist", async () => {
    const tools = join(dir, "tools")
    mkdirSync(tools, { recursive: true })
    writeFileSync(
      join(tools, "bash.json"),
      JSON.stringify({ type: "object", properties: { command: { type: "string" } }, required: ["command"] })
    )
    writeFileSync(
      join(tools, "read_file.schema.json"),
      JSON.stringify({ type: "object", properties: { path: { type: "string" } } })
    )
    writeFileSync(
      join(tools, "write_file.json"),
      JSON.stringify({
        type: "object",
        properties: { path: { type: "string" }, options: { type: "object", properties: { overwrite: {} } } }
      })
    )
    const policy = file("typo.yaml", typo)
    const result = await toolgate(["policy", "check", policy, "--tools", tools])
    expect(result.code).toBe(0)
    const lines = result.stdout.trim().split("\n")
    expect(lines).toHaveLength(3)
    expect(lines[0]).toStartWith(`${policy}:5:7: deny[0].args.comand: warning (unknownArgument): `)
    expect(lines[0]).toContain("no parameter is named \"comand\" (did you mean \"command\"?)")
    expect(lines[0]).toContain("so this deny rule never denies anything")
    expect(lines[1]).toStartWith(`${policy}:7:5: allow[0]: warning (unknownTool): `)
    expect(lines[1]).toContain("(did you mean \"read_file\"?)")
    expect(lines[2]).toMatch(/valid policy, 3 rule\(s\), 2 warning\(s\), checked against 3 tool\(s\)/)
    // fixed, the same check is quiet; --strict makes the typo fail the build
    expect((await toolgate(["policy", "check", policy, "--tools", tools, "--strict"])).code).toBe(1)
    const fixed = file("fixed.yaml", typo.replace("comand", "command").replace("reed_file", "read_file"))
    const quiet = await toolgate(["policy", "check", fixed, "--tools", tools, "--strict"])
    expect({ code: quiet.code, lines: quiet.stdout.trim().split("\n").length }).toEqual({ code: 0, lines: 1 })
  })

  test("one file of tool definitions (MCP tools/list), and a bad tools file is a usage error (exit 2)", async () => {
    const mcp = file(
      "mcp-tools.json",
      JSON.stringify({
        tools: [
          { name: "bash", inputSchema: { type: "object", properties: { command: { type: "string" } } } },
          { name: "read_file", inputSchema: { type: "object", properties: { path: { type: "string" } } } },
          { name: "write_file", inputSchema: { type: "object", properties: { path: { type: "string" } } } }
        ]
      })
    )
    const result = await toolgate(["policy", "check", file("typo2.yaml", typo), "--tools", mcp, "--json"])
    expect(result.code).toBe(0)
    const report = JSON.parse(result.stdout)
    expect(report.tools).toBe(3)
    expect(report.warnings.map((w: { path: string; kind: string }) => `${w.path} ${w.kind}`)).toEqual([
      "deny[0].args.comand unknownArgument",
      "allow[0] unknownTool",
      "allow[1].args[\"options.overwrite\"] unknownArgument"
    ])

    const broken = await toolgate(["policy", "check", "examples/policy.yaml", "--tools", file("t.json", "[{}]")])
    expect(broken.code).toBe(2)
    expect(broken.stderr).toContain("a tool definition needs a \"name\"")
    expect((await toolgate(["policy", "check", "examples/policy.yaml", "--tools", join(dir, "none")])).code).toBe(2)
  })
})

describe("toolgate policy eval", () => {
  test("prints the decision, the rule and why; --json the same as data", async () => {
    const call = JSON.stringify({ name: "bash", args: { command: "git push origin main --force" } })
    const result = await toolgate(["policy", "eval", "examples/policy.yaml", "--call", call])
    expect(result.code).toBe(0)
    const lines = result.stdout.trim().split("\n")
    expect(lines[0]).toBe("deny by rule no-force-push (deny[0])")
    expect(lines[1]).toBe("reason: Force-pushing rewrites shared history; ask a maintainer.")
    expect(lines).toContain("also matching, but lower in precedence or later: rule shell (requireApproval[0])")

    const asked = await toolgate([
      "policy",
      "eval",
      "examples/policy.yaml",
      "--json",
      "--call",
      JSON.stringify({ name: "deploy", args: { env: "prod" }, agentId: "release-2" })
    ])
    expect(JSON.parse(asked.stdout)).toMatchObject({
      outcome: "requireApproval",
      decision: { _tag: "RequireApproval", rule: { id: "release" }, ttlMs: 600000 },
      rule: { id: "release", path: "requireApproval[2]", matcher: { tool: "deploy", agent: "release-*" } },
      alsoMatching: []
    })

    const fallback = await toolgate(["policy", "eval", "examples/policy.yaml", "--call", "{\"name\":\"unknown_tool\"}"])
    expect(fallback.stdout).toStartWith("requireApproval by the policy default: no rule matches this call\n")
  })

  test("a malformed call is a usage error (exit 2); an invalid policy exits 1", async () => {
    const bad = await toolgate(["policy", "eval", "examples/policy.yaml", "--call", "{\"nme\":\"bash\"}"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("--call: ")
    expect((await toolgate(["policy", "eval", "examples/policy.yaml", "--call", "{oops"])).code).toBe(2)
    const invalid = await toolgate([
      "policy",
      "eval",
      file("inv.yaml", "default: maybe\n"),
      "--call",
      "{\"name\":\"x\"}"
    ])
    expect(invalid.code).toBe(1)
    expect(invalid.stderr).toContain("Invalid policy")
  })
})

describe("toolgate policy test", () => {
  const cases = `cases:
  - name: force push is denied
    call: { name: bash, args: { command: "git push origin main --force" } }
    expect: deny
    rule: no-force-push
  - name: reading a file is allowed
    call: { name: read_file, args: { path: README.md } }
    expect: allow
  - call: { name: deploy, args: {}, agentId: release-7 }
    expect: requireApproval
    rule: release
`

  test("a passing table exits 0, one PASS line per case", async () => {
    const result = await toolgate(["policy", "test", "examples/policy.yaml", file("cases.yaml", cases)])
    expect(result.code).toBe(0)
    expect(result.stdout.trim().split("\n")).toEqual([
      "PASS force push is denied",
      "PASS reading a file is allowed",
      "PASS cases[2]: deploy {} agent=release-7",
      `3 passed, 0 failed (${join(dir, "cases.yaml")})`
    ])
  })

  test("each mismatch is explained, and the run exits 1", async () => {
    const wrong = cases.replace("expect: allow", "expect: deny").replace("rule: release", "rule: shell")
    const result = await toolgate(["policy", "test", "examples/policy.yaml", file("wrong.yaml", wrong)])
    expect(result.code).toBe(1)
    expect(result.stdout).toContain("FAIL reading a file is allowed: expected deny, got allow by rule allow[0]\n")
    expect(result.stdout).toContain(
      "FAIL cases[2]: deploy {} agent=release-7: expected requireApproval by rule shell, got requireApproval by rule release\n"
    )
    expect(result.stdout).toContain("1 passed, 2 failed")

    const json = await toolgate(["policy", "test", "examples/policy.yaml", join(dir, "wrong.yaml"), "--json"])
    expect(JSON.parse(json.stdout)).toMatchObject({ passed: 1, failed: 2 })
  })

  test("a cases file that is not a table is a usage error (exit 2) naming the problem", async () => {
    const result = await toolgate([
      "policy",
      "test",
      "examples/policy.yaml",
      file("bad-cases.json", JSON.stringify([{ call: { name: "bash" }, expect: "maybe" }]))
    ])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("0.expect")
  })
})

describe("toolgate policy diff", () => {
  test("the calls of the audit log that a new policy decides differently", async () => {
    const gate = await fixture()
    try {
      const calls = [
        { id: "c1", name: "bash", args: { command: "rm -rf build" } },
        { id: "c2", name: "bash", args: { command: "git status" } },
        { id: "c3", name: "read_file", args: { path: "a.txt" } }
      ]
      for (const call of calls) {
        await Effect.runPromise(Effect.either(gate.gate.authorize({ ...call, sessionKey: "s-1" })))
      }
      // the answer is another event about c2 (counted once); clearing the session's approvals
      // is an event about no call (skipped)
      const [pending] = await Effect.runPromise(gate.gate.pending({}))
      await Effect.runPromise(gate.gate.respond(pending!.requestId, { decision: "deny", respondedBy: "ana" }))
      await Effect.runPromise(gate.gate.clearApprovals(ToolCall.SessionKey.make("s-1"), "ana"))
      const audit = await toolgate(["audit", "--db", gate.db, "--json"])
      expect(audit.code).toBe(0)
      const log = join(gate.dir, "audit.jsonl")
      writeFileSync(log, audit.stdout)
      const candidate = file(
        "candidate.yaml",
        "deny:\n  - id: no-rm\n    tool: bash\n    args:\n      command: \"rm *\"\nrequireApproval:\n  - tool: bash\n    args:\n      command: \"git push*\"\n"
      )
      const result = await toolgate(["policy", "diff", gate.policyFile, candidate, "--calls", log])
      expect(result.code).toBe(0)
      const lines = result.stdout.trim().split("\n")
      expect(lines).toHaveLength(2)
      expect(lines[0]).toMatch(
        /^line \d+: bash \{"command":"git status"\}: requireApproval \(requireApproval\[0\]\) -> allow \(default\)$/
      )
      expect(lines[1]).toMatch(
        /^1 of 3 call\(s\) decided differently \(\d+ line\(s\) without a call and 1 repeat\(s\) of a call skipped\)$/
      )

      const exit = await toolgate(["policy", "diff", gate.policyFile, candidate, "--calls", log, "--exit-code"])
      expect(exit.code).toBe(1)
      const same = await toolgate(["policy", "diff", gate.policyFile, gate.policyFile, "--calls", log, "--exit-code"])
      expect(same.code).toBe(0)
      expect(same.stdout).toStartWith("0 of 3 call(s) decided differently")
    } finally {
      await gate.close()
    }
  })

  test("plain calls as JSON Lines, --json, and a bad line is a usage error naming it", async () => {
    const calls = file(
      "calls.jsonl",
      [
        JSON.stringify({ name: "deploy", args: { env: "prod" }, agentId: "release-1" }),
        "",
        JSON.stringify({ name: "read_file", args: { path: ".env" } })
      ].join("\n")
    )
    const after = file("after.yaml", "default: deny\nallow:\n  - read_file\n")
    const result = await toolgate(["policy", "diff", "examples/policy.yaml", after, "--calls", calls, "--json"])
    expect(result.code).toBe(0)
    const report = JSON.parse(result.stdout)
    expect(report).toMatchObject({ calls: 2, changed: 2 })
    expect(report.differences).toEqual([
      {
        line: 1,
        call: { name: "deploy", args: { env: "prod" }, agentId: "release-1" },
        before: { outcome: "requireApproval", rule: "release" },
        after: { outcome: "deny", rule: "default" }
      },
      {
        line: 3,
        call: { name: "read_file", args: { path: ".env" } },
        before: { outcome: "deny", rule: "no-env-files" },
        after: { outcome: "allow", rule: "allow[0]" }
      }
    ])

    const bad = await toolgate([
      "policy",
      "diff",
      "examples/policy.yaml",
      after,
      "--calls",
      file("bad.jsonl", "{}\n[1]\n")
    ])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("line 2: expected a JSON object")
  })
})
