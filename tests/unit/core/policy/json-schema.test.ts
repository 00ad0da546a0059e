/**
 * The policy file's JSON Schema, as editors and validators use it: the file the core package
 * ships (`@tool-gate/core/policy.schema.json`) is what `Policy.makeJsonSchema()` generates from
 * the policy's Effect Schema (run with TOOLGATE_UPDATE_SCHEMA=1 to rewrite it), a standard
 * validator (Ajv, draft-07 as generated) accepts every example policy and refuses what the
 * policy's Schema refuses for its form, and the example YAML points editors at it.
 */
import * as Policy from "@tool-gate/core/Policy"
import Ajv from "ajv"
import { describe, expect, it } from "bun:test"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import * as YAML from "yaml"

const root = path.resolve(import.meta.dir, "../../../..")
const shipped = path.join(root, "packages/core/policy.schema.json")
const generated = `${JSON.stringify(Policy.makeJsonSchema(), null, 2)}\n`
if (process.env.TOOLGATE_UPDATE_SCHEMA === "1") fs.writeFileSync(shipped, generated)

const validate = new Ajv({ allErrors: true }).compile(JSON.parse(fs.readFileSync(shipped, "utf8")))
const accepts = (document: unknown) => validate(document) === true
/** What the policy's own Schema says about the document's form (glob and id checks aside). */
const decodes = (document: unknown) => Either.isRight(Effect.runSync(Effect.either(Policy.make(document))))

/** Every policy in the docs' fenced YAML and JSON blocks, and the example files. */
const documentedPolicies = (): Array<{ readonly where: string; readonly document: unknown }> => {
  const page = fs.readFileSync(path.join(root, "docs/policy.md"), "utf8")
  const out: Array<{ where: string; document: unknown }> = []
  for (const match of page.matchAll(/^```(yaml|json)\n([\s\S]*?)^```$/gm)) {
    const text = match[2]!
    if (text.startsWith("# an invalid policy")) continue
    const document = match[1] === "json" ? JSON.parse(text) : YAML.parse(text)
    out.push({ where: `docs/policy.md: ${text.split("\n")[0]}`, document })
  }
  out.push({
    where: "examples/policy.yaml",
    document: YAML.parse(fs.readFileSync(path.join(root, "examples/policy.yaml"), "utf8"))
  })
  out.push({
    where: "examples/policy.json",
    document: JSON.parse(fs.readFileSync(path.join(root, "examples/policy.json"), "utf8"))
  })
  out.push({
    where: "tests/packaging/app/policy.yaml",
    document: YAML.parse(fs.readFileSync(path.join(root, "tests/packaging/app/policy.yaml"), "utf8"))
  })
  return out
}

describe("policy.schema.json", () => {
  it("is what the policy's Effect Schema generates (TOOLGATE_UPDATE_SCHEMA=1 rewrites it)", () => {
    expect(fs.readFileSync(shipped, "utf8")).toBe(generated)
  })

  it("is exported by the core package and shipped in its tarball", () => {
    const resolved = createRequire(import.meta.url).resolve("@tool-gate/core/policy.schema.json")
    expect(fs.realpathSync(resolved)).toBe(fs.realpathSync(shipped))
    const manifest = JSON.parse(fs.readFileSync(path.join(root, "packages/core/package.json"), "utf8"))
    expect(manifest.files).toContain("policy.schema.json")
  })

  it("accepts every example policy (docs, examples/, the packaging app)", () => {
    const policies = documentedPolicies()
    expect(policies.length).toBeGreaterThanOrEqual(8)
    for (const { document, where } of policies) {
      expect({ where, decodes: decodes(document) }).toEqual({ where, decodes: true })
      expect({ where, accepts: accepts(document), errors: validate.errors ?? null }).toEqual({
        where,
        accepts: true,
        errors: null
      })
    }
  })

  it("refuses what the policy's Schema refuses for its form, and accepts what it accepts", () => {
    const table: Array<unknown> = [
      {},
      { default: "deny", ttlMs: 60_000 },
      { dny: ["bash"] },
      { default: "sometimes" },
      { ttlMs: 0 },
      { ttlMs: 1.5 },
      { ttlMs: 31_536_000_001 },
      { ttlMs: "1000" },
      { allow: "bash" },
      { allow: [3] },
      { allow: [{ tool: "x", agnet: "a" }] },
      { allow: [{ args: {} }] },
      { requireApproval: [{ tool: "x", sessionScope: "forever" }] },
      { requireApproval: [{ tool: "x", sessionScope: "tool", ttlMs: 1000, reason: "r", id: "i", intent: "i*" }] },
      { deny: [{ tool: "bash", args: { command: { shell: "rm *", caseInsensitive: true } } }] },
      { deny: [{ tool: "bash", args: { command: { shell: "rm *", caseInsenstive: true } } }] },
      { deny: [{ tool: "bash", args: { command: { glob: 3 } } }] },
      { deny: [{ tool: "x", args: { "options.force": true, "files.0": { equals: { glob: "*" } }, n: 3, v: null } }] },
      { deny: [{ tool: "x", args: { o: { equals: 1, extra: 2 } } }] },
      { deny: [{ tool: "x", args: { o: { anything: "else", nested: [1] } } }] }
    ]
    for (const document of table) {
      expect({ document, accepts: accepts(document) }).toEqual({ document, accepts: decodes(document) })
    }
    // both sides of the table occur
    expect(new Set(table.map(accepts))).toEqual(new Set([true, false]))
  })

  it("examples/policy.yaml points editors at it (yaml-language-server), by a path that resolves", () => {
    const first = fs.readFileSync(path.join(root, "examples/policy.yaml"), "utf8").split("\n")[0]!
    const match = /^# yaml-language-server: \$schema=(.+)$/.exec(first)
    expect(match).not.toBeNull()
    expect(path.resolve(root, "examples", match![1]!)).toBe(shipped)
  })
})
