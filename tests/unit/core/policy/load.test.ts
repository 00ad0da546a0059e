import { NodeFileSystem } from "@effect/platform-node"
import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const examples = path.resolve(import.meta.dir, "../../../../examples")
const load = (file: string) =>
  Effect.runPromise(Effect.either(Policy.load(file)).pipe(Effect.provide(NodeFileSystem.layer)))

describe("Policy.load", () => {
  it("loads the example YAML and JSON policies, which are the same policy", async () => {
    const yaml = await load(path.join(examples, "policy.yaml"))
    const json = await load(path.join(examples, "policy.json"))
    if (Either.isLeft(yaml) || Either.isLeft(json)) throw new Error("the example policies must load")
    expect(yaml.right.version).toBe(json.right.version)
    // only its plain deny globs are flagged as easy to step around (see the lint tests)
    expect(yaml.right.warnings.filter((w) => w.kind !== "easyToBypass")).toEqual([])
    expect(json.right.warnings.map((w) => w.kind)).toEqual(yaml.right.warnings.map((w) => w.kind))
    const policy = yaml.right
    expect(policy.default).toBe("requireApproval")
    expect(policy.evaluate({ name: "bash", args: { command: "git push origin main --force" } })).toMatchObject({
      _tag: "Deny",
      rule: { id: "no-force-push", source: "deny" },
      reason: "Force-pushing rewrites shared history; ask a maintainer."
    })
    expect(policy.evaluate({ name: "Bash", args: { command: "ls" } })).toMatchObject({ rule: { id: "shell" } })
    expect(policy.evaluate({ name: "mcp__github__create_issue", args: {} })).toMatchObject({
      _tag: "RequireApproval",
      ttlMs: 3_600_000,
      sessionScope: "tool"
    })
    expect(policy.evaluate({ name: "write_file", args: { path: "a", options: { overwrite: false } } })).toMatchObject({
      _tag: "Allow",
      rule: { id: "write-new-files" }
    })
    expect(policy.evaluate({ name: "write_file", args: { path: "a" } })).toMatchObject({
      _tag: "RequireApproval",
      rule: { id: "default", source: "default" },
      ttlMs: 600_000
    })
  })

  it("fails with the OS message when the file cannot be read", async () => {
    const missing = path.join(os.tmpdir(), `no-such-policy-${process.pid}.yaml`)
    const result = await load(missing)
    if (Either.isRight(result)) throw new Error("expected a failure")
    expect(result.left._tag).toBe("PolicyInvalid")
    expect(result.left.source).toBe(missing)
    expect(result.left.problems[0].message).toContain("ENOENT")
  })

  it("reports syntax errors with the file name", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "policy-"))
    try {
      const file = path.join(dir, "broken.json")
      fs.writeFileSync(file, "{\n  \"deny\": [\"rm\"\n}")
      const result = await load(file)
      if (Either.isRight(result)) throw new Error("expected a failure")
      expect(result.left.message).toBe(`Invalid policy ${file}: line 3, column 1: expected "," or "]", found "}"`)
      const yml = path.join(dir, "ok.YML")
      fs.writeFileSync(yml, "deny: [rm]\n")
      const loaded = await load(yml)
      expect(Either.isRight(loaded) && loaded.right.rules.length).toBe(1)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("refuses a file type it cannot read", async () => {
    const result = await load(path.join(examples, "policy.toml"))
    if (Either.isRight(result)) throw new Error("expected a failure")
    expect(result.left.problems[0].message).toContain(".json, .yaml or .yml")
  })
})
