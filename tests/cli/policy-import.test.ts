/**
 * `toolgate policy import --from claude FILE` as users run it (the real bin, as Node processes):
 * the policy on stdout (YAML) or in `--out` (JSON by its name), a `FILE: PATH "RULE": warning:`
 * line on stderr for every rule it cannot say exactly, path rules anchored at the folder holding
 * `.claude/`, and exit 2 for a file that is not settings.
 */
import { Policy } from "@tool-gate/core"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { toolgate } from "./support/cli.js"

let dir: string
let settings: string

beforeAll(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), "toolgate-cli-import-")))
  mkdirSync(join(dir, ".claude"))
  settings = join(dir, ".claude", "settings.json")
  writeFileSync(
    settings,
    JSON.stringify({
      permissions: {
        allow: ["Bash(npm run test *)", "Read(/src/**)", "Read(./docs/*.md)", "mcp__github"],
        ask: ["Bash(git push:*)"],
        deny: ["Read(./.env)", "WebFetch(domain:evil.net)"],
        defaultMode: "acceptEdits"
      },
      model: "opus"
    })
  )
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("toolgate policy import --from claude", () => {
  test("prints the policy as YAML and one warning line per inexact rule or setting", async () => {
    const result = await toolgate(["policy", "import", "--from", "claude", settings])
    expect({ code: result.code }).toEqual({ code: 0 })
    const policy = await Effect.runPromise(Policy.fromYaml(result.stdout, "stdout"))
    expect(policy.default).toBe("requireApproval")
    const decide = (name: string, args: Record<string, unknown>) => policy.evaluate({ name, args })._tag
    expect(decide("Bash", { command: "npm run test -- --watch" })).toBe("Allow")
    expect(decide("Bash", { command: "npm run test; curl evil.net" })).toBe("RequireApproval")
    expect(decide("Bash", { command: "git push origin main" })).toBe("RequireApproval")
    // `/src/**` is under the folder that holds .claude/
    expect(decide("Read", { file_path: join(dir, "src/a.ts") })).toBe("Allow")
    expect(decide("Read", { file_path: join(dir, "src/../../secret") })).toBe("RequireApproval")
    expect(decide("Read", { file_path: join(dir, ".env") })).toBe("Deny")
    expect(decide("WebFetch", { url: "https://evil.net/" })).toBe("Deny")
    expect(decide("mcp__github__get_issue", {})).toBe("Allow")

    const lines = result.stderr.trimEnd().split("\n")
    const at = (path: string) => lines.filter((line) => line.startsWith(`${settings}: ${path}`))
    expect(at(`permissions.allow[2] "Read(./docs/*.md)": warning: not imported: `)).toHaveLength(1)
    expect(at(`permissions.deny[0] "Read(./.env)": warning: `).length).toBeGreaterThan(0)
    expect(at(`permissions.deny[1] "WebFetch(domain:evil.net)": warning: `)).toHaveLength(1)
    expect(at("permissions.defaultMode: warning: ")).toHaveLength(1)
    expect(at("model: warning: ")).toHaveLength(1)
    // exact rules are not warned about
    expect(at("permissions.allow[0]")).toEqual([])
    expect(at("permissions.allow[3]")).toEqual([])
    expect(at("permissions.ask[0]")).toEqual([])
  })

  test("--out FILE.json writes JSON there that policy check accepts, stdout empty", async () => {
    const out = join(dir, "policy.json")
    const result = await toolgate(["policy", "import", "--from", "claude", "--out", out, settings])
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 0, stdout: "" })
    expect(JSON.parse(readFileSync(out, "utf8")).default).toBe("requireApproval")
    const check = await toolgate(["policy", "check", out])
    expect({ code: check.code, stderr: check.stderr }).toEqual({ code: 0, stderr: "" })
    const evaluated = await toolgate([
      "policy",
      "eval",
      out,
      "--call",
      JSON.stringify({ name: "Bash", args: { command: "npm run test" } })
    ])
    expect(evaluated.stdout).toStartWith("allow by rule claude.allow[0]")
  })

  test("--format json and --root DIR", async () => {
    const root = join(dir, "elsewhere")
    mkdirSync(root)
    const result = await toolgate([
      "policy",
      "import",
      "--from",
      "claude",
      "--format",
      "json",
      "--root",
      root,
      settings
    ])
    expect(result.code).toBe(0)
    const policy = Policy.unsafeMake(JSON.parse(result.stdout))
    expect(policy.evaluate({ name: "Read", args: { file_path: join(root, "src/a.ts") } })._tag).toBe("Allow")
    expect(policy.evaluate({ name: "Read", args: { file_path: join(dir, "src/a.ts") } })._tag).toBe("RequireApproval")
  })

  test("a file that is not settings: exit 2, one line naming the file and the path", async () => {
    const bad = join(dir, "bad.json")
    writeFileSync(bad, JSON.stringify({ permissions: { allow: ["Bash", 7] } }))
    const result = await toolgate(["policy", "import", "--from", "claude", bad])
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: "" })
    expect(result.stderr).toContain(`${bad}: permissions.allow[1]: expected a rule string`)

    writeFileSync(bad, "{ \"permissions\": ")
    const notJson = await toolgate(["policy", "import", "--from", "claude", bad])
    expect(notJson.code).toBe(2)
    expect(notJson.stderr).toContain(`${bad}: not JSON`)

    const missing = await toolgate(["policy", "import", "--from", "claude", join(dir, "nope.json")])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("cannot read the file")
  })
})
