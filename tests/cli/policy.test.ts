/**
 * `toolgate policy check FILE`: exit 0 for a valid policy (lint warnings printed), 1 for an
 * invalid one with every problem and its path (syntax errors with line and column).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { toolgate } from "./support/cli.js"

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

  test("every problem of an invalid policy, each with its path: exit 1", async () => {
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
`
    )
    const result = await toolgate(["policy", "check", bad])
    expect(result.code).toBe(1)
    const lines = result.stdout.trim().split("\n")
    expect(lines.at(-1)).toBe(`${bad}: invalid policy, ${lines.length - 1} problem(s)`)
    const paths = lines.slice(0, -1).map((line) => line.slice(bad.length + 2).split(": error: ")[0])
    expect(paths).toEqual(
      expect.arrayContaining(["default", "ttlMs", "requireApproval[1].sessionScope", "allow[0].agnet", "bogus"])
    )
    for (const line of lines.slice(0, -1)) expect(line).toMatch(new RegExp(`^${bad}: \\S+: error: .+`))
  })

  test("syntax errors carry line and column, in YAML and JSON", async () => {
    const yaml = file("broken.yaml", "deny:\n  - tool: bash\n   reason: [unclosed\n")
    const yamlResult = await toolgate(["policy", "check", yaml])
    expect(yamlResult.code).toBe(1)
    expect(yamlResult.stdout).toMatch(new RegExp(`^${yaml}: error: line \\d+, column \\d+: `, "m"))

    const json = file("broken.json", "{\n  \"deny\": [\"bash\",]\n}\n")
    const jsonResult = await toolgate(["policy", "check", json])
    expect(jsonResult.code).toBe(1)
    expect(jsonResult.stdout).toContain(`${json}: error: line 2, column 19: expected a JSON value, found "]"`)
  })

  test("lint warnings are printed with their rule's path; the policy is still valid (exit 0)", async () => {
    const shadowed = file("shadowed.yaml", "requireApproval:\n  - bash\nallow:\n  - bash\n  - read_file\n")
    const result = await toolgate(["policy", "check", shadowed])
    expect(result.code).toBe(0)
    const [warning, summary] = result.stdout.trim().split("\n")
    expect(warning).toStartWith(`${shadowed}: allow[0]: warning (shadowed): `)
    expect(summary).toMatch(/valid policy, 3 rule\(s\), 1 warning\(s\)/)
  })

  test("--json: the problems and warnings as data", async () => {
    const shadowed = file("shadowed.json", JSON.stringify({ requireApproval: ["bash"], allow: ["bash"] }))
    const valid = JSON.parse((await toolgate(["policy", "check", shadowed, "--json"])).stdout)
    expect(valid).toMatchObject({
      file: shadowed,
      valid: true,
      rules: 2,
      problems: [],
      warnings: [{ path: "allow[0]", kind: "shadowed" }]
    })

    const invalid = await toolgate(["policy", "check", file("invalid.json", "{\"default\": 1}"), "--json"])
    expect(invalid.code).toBe(1)
    expect(JSON.parse(invalid.stdout)).toMatchObject({ valid: false, problems: [{ path: "default" }], warnings: [] })
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
