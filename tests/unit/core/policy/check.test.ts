/**
 * `Policy.check` / `Policy.checkFile`: every problem and warning of a policy text with its line
 * and column, in YAML and JSON (not only syntax errors), and unknown keys with the closest known
 * key.
 */
import { NodeFileSystem } from "@effect/platform-node"
import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"
import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const located = (result: Policy.CheckResult) =>
  result.diagnostics.map(({ column, line, path, severity }) => `${line}:${column} ${severity} ${path}`)

describe("Policy.check: positions", () => {
  it("YAML: values where they are written, unknown keys at the key, missing keys at their object", () => {
    const text = `default: maybe
deny:
  - tool: bash
    args:
      command: { shell: "" }
  - id: x
  - tool: read_file
    resaon: secrets
allow:
  - [not, a, matcher]
`
    expect(located(Policy.check(text, { format: "yaml" }))).toEqual([
      "1:10 error default",
      "5:25 error deny[0].args.command.shell",
      "6:5 error deny[1].tool",
      "8:5 error deny[2].resaon",
      "10:5 error allow[0]"
    ])
    const problems = Policy.check(text, { format: "yaml" }).diagnostics
    expect(problems[3]!.message).toBe("unknown key (did you mean \"reason\"?)")
  })

  it("JSON: the same, by the hand-written parser's offsets", () => {
    const text = `{
  "default": "maybe",
  "deny": [
    { "tool": "bash", "args": { "command": { "shell": "rm *", "caseInsenstive": true } } },
    { "id": "x" }
  ],
  "alow": []
}`
    const result = Policy.check(text, { format: "json" })
    expect(located(result)).toEqual([
      "2:14 error default",
      "4:63 error deny[0].args.command.caseInsenstive",
      "5:5 error deny[1].tool",
      "7:3 error alow"
    ])
    expect(result.diagnostics.map((d) => d.message)).toContain(
      "unknown key (a matcher takes glob, shell or equals, and caseInsensitive) (did you mean \"caseInsensitive\"?)"
    )
    expect(result.diagnostics.at(-1)!.message).toBe("unknown key (did you mean \"allow\"?)")
  })

  it("syntax errors keep their own position; nothing else is reported", () => {
    expect(located(Policy.check("{\n  \"deny\": [\"bash\",]\n}", { format: "json" }))).toEqual(["2:19 error "])
    const yaml = Policy.check("deny:\n  - tool: bash\n   reason: [unclosed\n", { format: "yaml" })
    expect(yaml.policy).toBeUndefined()
    expect(yaml.diagnostics.every((d) => d.severity === "error" && d.line !== undefined && d.path === "")).toBe(true)
  })

  it("warnings at their rule, or at the field they are about; in document order with the tools' warnings", () => {
    const text = `requireApproval:
  - bash
allow:
  - tool: bash
  - tool: write_file
    args:
      pth: "/tmp/*"
  - "task-[0-9]"
`
    const tools = [
      { name: "bash" },
      { name: "write_file", parameters: Schema.Struct({ path: Schema.String }) },
      { name: "task-1" }
    ]
    const result = Policy.check(text, { format: "yaml", tools })
    expect(result.policy?.rules).toHaveLength(4)
    expect(result.diagnostics.map((d) => `${d.line}:${d.column} ${d.kind} ${d.path}`)).toEqual([
      "4:5 shadowed allow[0]",
      "7:7 unknownArgument allow[1].args.pth",
      "8:5 unsupportedGlob allow[2]",
      "8:5 unknownTool allow[2]"
    ])
  })

  it("a YAML alias is followed to the value it names", () => {
    const text = "deny:\n  - &m { tool: bash, args: { command: \"\" } }\nallow:\n  - *m\n"
    expect(located(Policy.check(text, { format: "yaml" }))).toEqual([
      "2:39 error deny[0].args.command",
      "2:39 error allow[0].args.command"
    ])
  })
})

describe("Policy.check: did you mean", () => {
  it("suggests every key of the policy and of a matcher object when one letter is off", () => {
    const matcherObject = Policy.Matcher.members[1]
    for (const key of Object.keys(Policy.PolicyInput.fields)) {
      const [problem] = Policy.check(`${key}x: 1\n`, { format: "yaml" }).diagnostics
      expect(problem!.message).toBe(`unknown key (did you mean ${JSON.stringify(key)}?)`)
    }
    for (const key of Object.keys(matcherObject.fields)) {
      const [problem] = Policy.check(`allow:\n  - tool: t\n    ${key}x: 1\n`, { format: "yaml" }).diagnostics
      expect(problem!.message).toBe(`unknown key (did you mean ${JSON.stringify(key)}?)`)
    }
  })
})

describe("Policy.checkFile", () => {
  it("reads .yaml and .json files; a missing file or another type is one error", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "toolgate-check-"))
    try {
      fs.writeFileSync(path.join(dir, "p.yml"), "allow:\n  - tool: x\n    agnet: a\n")
      const run = (file: string) =>
        Effect.runPromise(Policy.checkFile(path.join(dir, file)).pipe(Effect.provide(NodeFileSystem.layer)))
      expect(located(await run("p.yml"))).toEqual(["3:5 error allow[0].agnet"])
      expect((await run("missing.json")).diagnostics[0]!.message).toStartWith("cannot read the file")
      expect((await run("p.txt")).diagnostics[0]!.message).toBe(
        "unknown file type: expected a .json, .yaml or .yml file"
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
