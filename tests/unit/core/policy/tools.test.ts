/**
 * `Policy.lint(policy, { tools })`: with the tools' parameters known, a rule that names no known
 * tool and an argument path that no parameter has are reported (each is a rule that never matches:
 * on a deny rule, a typo that fails open). Tools come as Effect Schemas (GatedTool parameters), an
 * `@effect/ai` Toolkit, or JSON Schemas from files in the common tool-definition formats.
 */
import { Tool, Toolkit } from "@effect/ai"
import * as Glob from "@tool-gate/core/Glob"
import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"
import { Either, FastCheck, Schema } from "effect"

const bash = {
  name: "bash",
  parameters: Schema.Struct({ command: Schema.String, cwd: Schema.optional(Schema.String) })
}
const write = {
  name: "write_file",
  parameters: Schema.Struct({
    path: Schema.String,
    options: Schema.optional(Schema.Struct({ overwrite: Schema.Boolean, mode: Schema.Number })),
    files: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.String })))
  })
}
const tools = [bash, write]

const found = (input: Policy.PolicyInput, with_: Policy.Tools = tools) =>
  Policy.lint(Policy.unsafeMake(input), { tools: with_ })
    .filter(({ kind }) => kind === "unknownTool" || kind === "unknownArgument")
    .map(({ kind, path }) => `${path} ${kind}`)

describe("Policy.lint with tools", () => {
  it("the issue's typo: a deny rule on `comand` is reported, with the parameter it meant", () => {
    const warnings = Policy.lint(Policy.unsafeMake({ deny: [{ tool: "bash", args: { comand: "rm*" } }] }), { tools })
    const typo = warnings.find((w) => w.kind === "unknownArgument")!
    expect(typo).toMatchObject({ ruleId: "deny[0]", path: "deny[0].args.comand" })
    expect(typo.message).toContain("no parameter is named \"comand\" (did you mean \"command\"?)")
    expect(typo.message).toContain("never denies anything")
    // without the tools, the same policy has no such warning: the check needs them
    expect(Policy.unsafeMake({ deny: [{ tool: "bash", args: { comand: "rm*" } }] }).warnings.map((w) => w.kind))
      .not.toContain("unknownArgument")
  })

  it("paths that exist are quiet: nested, array items, case-insensitive tool names, globs over several tools", () => {
    expect(found({
      deny: [{ tool: "BASH", args: { command: { shell: "rm *" }, cwd: "/etc*" } }],
      requireApproval: [{ tool: "write_*", args: { "options.overwrite": true, "files.0.name": "*.env" } }],
      allow: ["bash", { tool: "*", args: { path: "/tmp/*" } }]
    })).toEqual([])
  })

  it("reports each unknown path once, at the depth it leaves the parameters", () => {
    const warnings = Policy.lint(
      Policy.unsafeMake({
        allow: [{ tool: "write_file", args: { "options.overwirte": true, "path.x": "a", "files.0.nmae": "x" } }]
      }),
      { tools }
    ).filter((w) => w.kind === "unknownArgument")
    // in the rule's canonical (sorted) order
    expect(warnings.map((w) => w.path)).toEqual([
      "allow[0].args[\"files.0.nmae\"]",
      "allow[0].args[\"options.overwirte\"]",
      "allow[0].args[\"path.x\"]"
    ])
    expect(warnings[0]!.message).toContain("did you mean \"name\"?")
    expect(warnings[1]!.message).toContain(
      "no parameter at \"options\" is named \"overwirte\" (did you mean \"overwrite\"?)"
    )
    expect(warnings[2]!.message).toContain("\"path\" is a single value, with nothing inside")
  })

  it("a glob rule is checked against every tool it matches: a path any of them has is fine", () => {
    expect(found({ deny: [{ tool: "*", args: { command: "rm*" } }] })).toEqual([])
    expect(found({ deny: [{ tool: "*", args: { comand: "rm*" } }] })).toEqual(["deny[0].args.comand unknownArgument"])
  })

  it("a rule whose tool glob matches no known tool", () => {
    const warnings = Policy.lint(Policy.unsafeMake({ deny: ["bsah", "mcp__*"], allow: ["bash"] }), { tools })
    expect(warnings.map((w) => `${w.path} ${w.kind}`)).toEqual([
      "deny[0] unknownTool",
      "deny[1] unknownTool"
    ])
    expect(warnings[0]!.message).toContain("(did you mean \"bash\"?)")
    expect(warnings[0]!.message).toContain("known: \"bash\", \"write_file\"")
  })

  it("tools whose parameters are open or unknown accept any path", () => {
    const open = [{ name: "bash", parameters: { type: "object", additionalProperties: true } }]
    expect(found({ deny: [{ tool: "bash", args: { anything: "x" } }] }, open)).toEqual([])
    expect(found({ deny: [{ tool: "bash", args: { anything: "x" } }] }, [{ name: "bash" }])).toEqual([])
    const record = [{
      name: "env",
      parameters: Schema.Struct({ vars: Schema.Record({ key: Schema.String, value: Schema.String }) })
    }]
    expect(found({ deny: [{ tool: "env", args: { "vars.PATH": "*" } }] }, record)).toEqual([])
    const declared = [{ name: "x", parameters: Schema.declare((u): u is object => typeof u === "object") }]
    expect(found({ deny: [{ tool: "x", args: { anything: "x" } }] }, declared)).toEqual([])
  })

  it("JSON Schemas with $ref, $defs, anyOf and tuple items", () => {
    const parameters = {
      type: "object",
      properties: {
        target: { $ref: "#/$defs/Target" },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "object", properties: { n: {} } }] }
      },
      $defs: {
        Target: { anyOf: [{ type: "object", properties: { host: { type: "string" } } }, { type: "string" }] }
      }
    }
    const deploy = [{ name: "deploy", parameters }]
    expect(found({ deny: [{ tool: "deploy", args: { "target.host": "prod*", "pair.1.n": 1 } }] }, deploy)).toEqual([])
    expect(found({ deny: [{ tool: "deploy", args: { "target.hots": "prod*", "pair.2": 1 } }] }, deploy)).toEqual([
      "deny[0].args[\"pair.2\"] unknownArgument",
      "deny[0].args[\"target.hots\"] unknownArgument"
    ])
  })

  it("a condition no value of the parameter can meet: an enum it misses, a type it never matches", () => {
    const deploy = [{
      name: "deploy",
      parameters: Schema.Struct({
        env: Schema.Literal("production", "staging"),
        replicas: Schema.Int,
        files: Schema.Array(Schema.String),
        note: Schema.optional(Schema.NullOr(Schema.String))
      })
    }]
    const neverMatching = (args: Record<string, unknown>) =>
      Policy.lint(Policy.unsafeMake({ deny: [{ tool: "deploy", args }] }), { tools: deploy })
        .filter((w) => w.kind === "neverMatches").map((w) => w.path)
    expect(neverMatching({ env: "prod" })).toEqual(["deny[0].args.env"])
    expect(neverMatching({ env: "prod*" })).toEqual([])
    expect(neverMatching({ env: { glob: "PROD*", caseInsensitive: true } })).toEqual([])
    expect(neverMatching({ replicas: "3" })).toEqual([])
    expect(neverMatching({ replicas: 3 })).toEqual([])
    expect(neverMatching({ replicas: "three" })).toEqual([])
    expect(neverMatching({ replicas: { equals: "3" } })).toEqual(["deny[0].args.replicas"])
    expect(neverMatching({ replicas: 2.5 })).toEqual(["deny[0].args.replicas"])
    expect(neverMatching({ files: "*.env" })).toEqual(["deny[0].args.files"])
    expect(neverMatching({ "files.0": "*.env", note: null })).toEqual([])
    const [warning] = Policy.lint(Policy.unsafeMake({ deny: [{ tool: "deploy", args: { env: "prod" } }] }), {
      tools: deploy
    }).filter((w) => w.kind === "neverMatches")
    expect(warning!.message).toContain("args \"env\" is one of \"production\", \"staging\" for tool \"deploy\"")
    expect(warning!.message).toContain("never denies anything")
  })

  it("an @effect/ai Toolkit", () => {
    const toolkit = Toolkit.make(
      Tool.make("deploy", { parameters: { env: Schema.String, version: Schema.String }, success: Schema.String })
    )
    expect(found({ requireApproval: [{ tool: "deploy", args: { env: "prod*", verison: "1.*" } }] }, toolkit)).toEqual([
      "requireApproval[0].args.verison unknownArgument"
    ])
    expect(found({ requireApproval: ["deploi"] }, toolkit)).toEqual(["requireApproval[0] unknownTool"])
  })
})

describe("Policy.toolsFromJson", () => {
  const schema = { type: "object", properties: { command: { type: "string" } }, required: ["command"] }
  const names = (value: unknown, fallback?: string) =>
    Either.map(Policy.toolsFromJson(value, fallback), (tools) => tools.map((tool) => tool.name))

  it("reads the common tool-definition formats", () => {
    expect(names({ name: "bash", parameters: schema })).toEqual(Either.right(["bash"]))
    expect(names({ tools: [{ name: "bash", inputSchema: schema }, { name: "ls" }] })).toEqual(
      Either.right(["bash", "ls"])
    )
    expect(names([{ name: "bash", input_schema: schema }])).toEqual(Either.right(["bash"]))
    expect(names([{ type: "function", function: { name: "bash", parameters: schema } }])).toEqual(
      Either.right(["bash"])
    )
    expect(names(schema, "bash")).toEqual(Either.right(["bash"]))
  })

  it("what it reads is what lint checks against; a tool without parameters takes none", () => {
    const tools = Either.getOrThrow(
      Policy.toolsFromJson({ tools: [{ name: "bash", inputSchema: schema }, { name: "ls" }] })
    )
    expect(found({ deny: [{ tool: "bash", args: { comand: "rm*" } }, { tool: "ls", args: { path: "/" } }] }, tools))
      .toEqual(["deny[0].args.comand unknownArgument", "deny[1].args.path unknownArgument"])
  })

  it("refuses what is not a tool definition, saying where", () => {
    expect(Policy.toolsFromJson([{ name: "bash" }, { parameters: schema }])).toEqual(
      Either.left("[1]: a tool definition needs a \"name\"")
    )
    expect(Either.isLeft(Policy.toolsFromJson(schema))).toBe(true)
    expect(Either.isLeft(Policy.toolsFromJson({ name: "bash", parameters: "string" }))).toBe(true)
  })
})

describe("Policy lint: glob syntax these globs do not have", () => {
  const unsupported = (input: Policy.PolicyInput) =>
    Policy.unsafeMake(input).warnings.filter((w) => w.kind === "unsupportedGlob").map((w) => w.path)

  it("character classes, braces and extended globs are warnings, and match literally", () => {
    const policy = Policy.unsafeMake({
      deny: [
        "task-[0-9]",
        { tool: "read_file", args: { path: "*.{env,pem}" } },
        { tool: "bash", args: { command: { shell: "rm !(safe)" } } },
        { tool: "x", agent: "bot-[ab]", args: { p: { glob: "@(a|b)", caseInsensitive: true } } }
      ]
    })
    expect(policy.warnings.filter((w) => w.kind === "unsupportedGlob").map((w) => w.path)).toEqual([
      "deny[0]",
      "deny[1].args.path",
      "deny[2].args.command.shell",
      "deny[3].agent",
      "deny[3].args.p.glob"
    ])
    expect(policy.warnings.find((w) => w.path === "deny[0]")!.message).toContain(
      "\"[0-9]\" looks like a character class"
    )
    // matched literally: the class is no class
    expect(policy.evaluate({ name: "task-1", args: {} })._tag).toBe("Allow")
    expect(policy.evaluate({ name: "task-[0-9]", args: {} })._tag).toBe("Deny")
  })

  it("escaped or incomplete syntax is quiet", () => {
    expect(unsupported({ deny: ["task-\\[0-9]", "a[", "{a}", "x{a\\,b}", "(a)", "fn!x"] })).toEqual([])
  })
})

describe("Policy lint: escaped globs", () => {
  it("a pattern with every special character escaped matches the text itself and warns about nothing", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.string({ minLength: 1, unit: FastCheck.constantFrom(..."ab[]{},!()@+*?\\ ") }),
        (text) => {
          const escaped = text.replace(/[\\*?[\]{}!()@+,]/g, "\\$&")
          expect(Glob.make(escaped).test(text)).toBe(true)
          const policy = Policy.unsafeMake({ deny: [{ tool: "x", args: { p: escaped } }] })
          expect(policy.warnings.filter((w) => w.kind === "unsupportedGlob")).toEqual([])
        }
      )
    )
  })

  it("unescaped, the same texts warn whenever they hold a class, braces with a comma or an extended glob", () => {
    const warns = (pattern: string) =>
      Policy.unsafeMake({ deny: [{ tool: "x", args: { p: `*${pattern}` } }] }).warnings.some((w) =>
        w.kind === "unsupportedGlob"
      )
    expect(["[ab]", "a{b,c}", "!(a)", "+(a|b)", "@(x)"].map(warns)).toEqual([true, true, true, true, true])
    expect(["[]", "a{b}", "(a)", "!a", "a,b"].map(warns)).toEqual([false, false, false, false, false])
  })
})
