/**
 * docs/policy.md says what policies mean; these tests keep it true. Every YAML and JSON example
 * loads (and warns about nothing), the invalid example fails with exactly the problems the page
 * lists, and the decision table under "A complete example" is what that policy decides.
 */
import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const page = fs.readFileSync(path.resolve(import.meta.dir, "../../docs/policy.md"), "utf8")

interface Block {
  readonly lang: string
  readonly text: string
  /** the heading of the section the block is in */
  readonly section: string
}

const blocks: Array<Block> = []
{
  let section = ""
  const fence = /^```(\w*)\n([\s\S]*?)^```$|^(#{2,3}) (.+)$/gm
  for (const match of page.matchAll(fence)) {
    if (match[4] !== undefined) section = match[4]
    else blocks.push({ lang: match[1]!, text: match[2]!, section })
  }
}

const load = (block: Block) =>
  Effect.runSync(Effect.either(block.lang === "json" ? Policy.fromJson(block.text) : Policy.fromYaml(block.text)))

const isInvalidExample = (block: Block) => block.text.startsWith("# an invalid policy")
const policies = blocks.filter((block) => (block.lang === "yaml" || block.lang === "json") && !isInvalidExample(block))

describe("docs/policy.md", () => {
  it("has the examples these tests read", () => {
    expect(policies.length).toBeGreaterThanOrEqual(6)
    expect(blocks.filter(isInvalidExample)).toHaveLength(1)
  })

  it("every YAML and JSON example loads and warns about nothing", () => {
    for (const block of policies) {
      const loaded = load(block)
      if (Either.isLeft(loaded)) throw new Error(`${block.section}: ${loaded.left.message}\n${block.text}`)
      expect([block.section, loaded.right.warnings]).toEqual([block.section, []])
    }
  })

  it("the invalid example fails with exactly the problems listed after it, in that order", () => {
    const index = blocks.findIndex(isInvalidExample)
    const listed = blocks[index + 1]!
    expect(listed.lang).toBe("text")
    const loaded = load(blocks[index]!)
    if (Either.isRight(loaded)) throw new Error("the invalid example loaded")
    expect(loaded.left.problems.map(({ message, path }) => `${path}: ${message}`)).toEqual(
      listed.text.trimEnd().split("\n")
    )
  })

  it("the complete example's YAML and JSON are one policy, the same as examples/policy.yaml", () => {
    const [yaml, json] = policies.filter((block) => block.section === "A complete example").map(load)
    const file = Effect.runSync(
      Policy.fromYaml(fs.readFileSync(path.resolve(import.meta.dir, "../../examples/policy.yaml"), "utf8"))
    )
    expect(Either.getOrThrow(yaml!).version).toBe(file.version)
    expect(Either.getOrThrow(json!).version).toBe(file.version)
  })

  it("the complete example decides what its table says", () => {
    const policy = Either.getOrThrow(load(policies.find((block) => block.section === "A complete example")!))
    const table = page.slice(page.indexOf("What it decides:"))
    const rows = [
      ...table.matchAll(/^\| `(\w+) (\{.*?\})`( from agent `([^`]+)`| from another agent)? \| (\w+) \(`([^`]+)`\) \|/gm)
    ]
    expect(rows.length).toBe(9)
    for (const [row, name, argsText, from, agent, outcome, rule] of rows) {
      const args = new Function(`return (${argsText})`)() as Record<string, unknown>
      const agentId = agent ?? (from !== undefined ? "coder-7" : undefined)
      const decision = policy.evaluate({ name: name!, args, ...(agentId !== undefined ? { agentId } : {}) })
      const tags: Record<string, string> = { allow: "Allow", deny: "Deny", requireApproval: "RequireApproval" }
      expect([row, decision._tag]).toEqual([row, tags[outcome!]])
      expect([row, decision._tag === "Allow" ? decision.rule?.id : decision.rule.id]).toEqual([row, rule])
    }
  })

  it("the shell example denies recursive deletes, allows the safe commands, and asks for the rest", () => {
    const block = policies.find((b) => b.section === "The shell-command matcher")!
    const policy = Either.getOrThrow(load(block))
    const judge = (command: string) => policy.evaluate({ name: "bash", args: { command } })._tag
    expect(judge("sudo rm -rf /")).toBe("Deny")
    expect(judge("cd build && RM -R .")).toBe("Deny")
    expect(judge("git status --short")).toBe("Allow")
    expect(judge("npm test")).toBe("Allow")
    expect(judge("git status; curl example.com")).toBe("RequireApproval")
    expect(judge("npm test && npm publish")).toBe("RequireApproval")
  })

  it("the argument-conditions example asks for what its text says and nothing else", () => {
    const block = policies.find((b) => b.section === "Argument conditions" && b.lang === "json")!
    const policy = Either.getOrThrow(load(block))
    const base = { env: "Production", replicas: 3, labels: { team: "*" }, targets: [{ region: "eu-west-1" }] }
    const judge = (args: Record<string, unknown>) => policy.evaluate({ name: "deploy", args })._tag
    expect(judge(base)).toBe("RequireApproval")
    expect(judge({ ...base, env: "staging" })).toBe("Allow")
    expect(judge({ ...base, replicas: "3" })).toBe("Allow")
    expect(judge({ ...base, labels: { team: "core" } })).toBe("Allow")
    expect(judge({ ...base, targets: [{ region: "us-east-1" }, { region: "eu-west-1" }] })).toBe("Allow")
  })

  it("the lint table's examples warn as it says", () => {
    const kinds = (input: Policy.PolicyInput) => Policy.unsafeMake(input).warnings.map((w) => `${w.path} ${w.kind}`)
    expect(kinds({ allow: ["read_*", "read_file"] })).toEqual(["allow[1] shadowed"])
    expect(kinds({ deny: ["bash"], allow: ["bash"] })).toEqual(["allow[0] shadowed"])
    expect(kinds({ allow: [" bash"] })).toEqual(["allow[0] neverMatches"])
    expect(kinds({ allow: [{ tool: "x", args: { options: {}, "options.x": 1 } }] })).toEqual(["allow[0] neverMatches"])
    expect(kinds({ allow: [{ tool: "x", ttlMs: 1000 }], deny: [{ tool: "y", sessionScope: "tool" }] })).toEqual([
      "deny[0] noEffect",
      "allow[0] noEffect"
    ])
    expect(kinds({ deny: [{ tool: "bash", args: { command: "*rm -rf*" } }] })).toEqual(["deny[0] easyToBypass"])
  })
})
