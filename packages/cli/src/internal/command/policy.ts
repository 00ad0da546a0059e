/**
 * `toolgate policy`: `check` a policy file (every problem and warning with its line and column;
 * with `--tools`, rules and argument paths no tool has), `eval` one call (the decision, the rule,
 * why), `test` a table of calls with their expected outcomes, and `diff` two policies over
 * recorded calls, and `import` the permission rules of a Claude Code settings file.
 */
import { Args, Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Policy, PolicyImport } from "@tool-gate/core"
import { Console, Effect, Either, Option, ParseResult, Schema } from "effect"
import { homedir } from "node:os"
import { Failed, InvalidInput } from "../errors.js"
import { ExitCode } from "../exit.js"
import { duration } from "../format.js"
import { json } from "../options.js"
import * as PolicyFiles from "../policyFiles.js"
import { printLines } from "../print.js"
import * as Terminal from "../terminal.js"

const policyFile = (name: string, description: string) => Args.text({ name }).pipe(Args.withDescription(description))

const printJson = (value: unknown) => printLines(Terminal.json(value).split("\n"))

// check ------------------------------------------------------------------------------------------

const tools = Options.text("tools").pipe(
  Options.withPseudoName("FILE_OR_DIR"),
  Options.withDescription(
    "the tools' parameter schemas: a JSON file, or a directory of them, each a tool definition " +
      "({ name, parameters }, MCP { name, inputSchema }, Anthropic { name, input_schema }, OpenAI " +
      "{ type: \"function\", function }), a list of them, { tools: [...] }, or NAME.json holding the JSON " +
      "Schema of tool NAME's parameters; rules naming no such tool and argument paths no parameter has are warned about"
  ),
  Options.optional
)

const format = Options.choice("format", ["text", "json", "github"]).pipe(
  Options.withDescription(
    "text (FILE:LINE:COL: PATH: error|warning: MESSAGE), json (as --json) or github (workflow annotations)"
  ),
  Options.withDefault("text" as const)
)

const strict = Options.boolean("strict").pipe(Options.withDescription("exit 1 on warnings too"))

/** GitHub's workflow-command escaping: `%`, line breaks, and in properties `:` and `,`. */
const githubData = (text: string) => text.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A")
const githubProperty = (text: string) => githubData(text).replace(/:/g, "%3A").replace(/,/g, "%2C")

const annotation = (file: string, diagnostic: Policy.Diagnostic) => {
  const properties = [
    `file=${githubProperty(file)}`,
    ...(diagnostic.line === undefined ? [] : [`line=${diagnostic.line}`, `col=${diagnostic.column}`]),
    `title=${githubProperty(`toolgate policy${diagnostic.path === "" ? "" : ` ${diagnostic.path}`}`)}`
  ]
  const kind = diagnostic.kind === undefined ? "" : ` (${diagnostic.kind})`
  return `::${diagnostic.severity} ${properties.join(",")}::${githubData(`${diagnostic.message}${kind}`)}`
}

const textLine = (file: string, diagnostic: Policy.Diagnostic) => {
  const where = diagnostic.line === undefined ? file : `${file}:${diagnostic.line}:${diagnostic.column}`
  const path = diagnostic.path === "" ? "" : ` ${diagnostic.path}:`
  const severity = diagnostic.kind === undefined ? diagnostic.severity : `${diagnostic.severity} (${diagnostic.kind})`
  return `${where}:${path} ${severity}: ${diagnostic.message}`
}

const check = Command.make(
  "check",
  { json, format, tools, strict, file: policyFile("file", "a .yaml, .yml or .json policy") },
  (options) =>
    Effect.gen(function*() {
      const { file } = options
      const known = yield* Option.match(options.tools, {
        onNone: () => Effect.succeed(undefined),
        onSome: PolicyFiles.tools
      })
      const result = yield* Policy.checkFile(file, known === undefined ? {} : { tools: known })
      const { diagnostics, policy } = result
      const problems = diagnostics.filter((d) => d.severity === "error")
      const warnings = diagnostics.filter((d) => d.severity === "warning")
      const output = options.json ? "json" : options.format
      if (output === "json") {
        yield* printJson({
          file,
          valid: policy !== undefined,
          ...(policy !== undefined ? { version: policy.version, rules: policy.rules.length } : {}),
          ...(known !== undefined ? { tools: known.length } : {}),
          problems: problems.map(({ kind: _, ruleId: __, severity: ___, ...problem }) => problem),
          warnings: warnings.map(({ severity: _, ...warning }) => warning)
        })
      } else {
        const line = output === "github" ? annotation : textLine
        for (const diagnostic of diagnostics) yield* Console.log(line(file, diagnostic))
        const checked = known === undefined ? "" : `, checked against ${known.length} tool(s)`
        yield* Console.log(
          policy === undefined
            ? `${file}: invalid policy, ${problems.length} problem(s)`
            : `${file}: valid policy, ${policy.rules.length} rule(s), ${warnings.length} warning(s)${checked}, version ${
              policy.version.slice(0, 12)
            }`
        )
      }
      if (policy === undefined || (options.strict && warnings.length > 0)) {
        return yield* new Failed({ code: ExitCode.policyInvalid })
      }
    })
).pipe(
  Command.withDescription(
    "Validate a policy file: every problem and lint warning with its path, line and column; exit 1 if invalid " +
      "(or, with --strict, if anything is reported)"
  )
)

// eval -------------------------------------------------------------------------------------------

const decodeCall = Schema.decodeUnknownEither(Policy.TestCase.fields.call, { errors: "all", onExcessProperty: "error" })

const call = Options.text("call").pipe(
  Options.withPseudoName("JSON"),
  Options.withDescription("the call: {\"name\": \"bash\", \"args\": {...}, \"agentId\": ..., \"intentId\": ...}")
)

const parseCall = (text: string) =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (error) => new InvalidInput({ message: `--call is not JSON: ${(error as Error).message}` })
  }).pipe(Effect.flatMap((value) =>
    Either.match(decodeCall(value), {
      onLeft: (error) =>
        Effect.fail(
          new InvalidInput({
            message: `--call: ${
              ParseResult.ArrayFormatter.formatErrorSync(error)
                .map((issue) => `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${issue.message}`)
                .join("; ")
            }`
          })
        ),
      onRight: Effect.succeed
    })
  ))

const by = (rule: { readonly id: string; readonly path: string }) =>
  rule.id === rule.path ? `rule ${rule.id}` : `rule ${rule.id} (${rule.path})`

/** The decision and why, one fact a line. */
const explanationLines = (policy: Policy.Policy, explanation: Policy.Explanation): Array<string> => {
  const { decision, rule } = explanation
  const head = rule === undefined
    ? `${explanation.outcome} by the policy default: no rule matches this call`
    : `${explanation.outcome} by ${by(rule)}`
  const why = decision._tag === "Deny"
    ? [`reason: ${decision.reason}`]
    : decision._tag === "RequireApproval"
    ? [
      `a human has ${duration(decision.ttlMs)} to answer, then the call is denied; approving for the session covers ${
        decision.sessionScope === "tool" ? "every call of the tool" : "this exact call"
      }`,
      ...(decision.reason === undefined ? [] : [`reason: ${decision.reason}`])
    ]
    : []
  return [
    head,
    ...why,
    ...(rule === undefined ? [] : [`rule: ${JSON.stringify(rule.matcher)}`]),
    ...(explanation.alsoMatching.length === 0
      ? []
      : [`also matching, but lower in precedence or later: ${explanation.alsoMatching.map(by).join(", ")}`]),
    `policy version ${policy.version.slice(0, 12)}`
  ]
}

const evaluate = Command.make(
  "eval",
  { json, call, file: policyFile("policy", "a .yaml, .yml or .json policy") },
  (options) =>
    Effect.gen(function*() {
      const policy = yield* Policy.load(options.file)
      const input = yield* parseCall(options.call)
      const explanation = Policy.explain(policy, input)
      if (options.json) yield* printJson({ ...explanation, policyVersion: policy.version })
      else yield* printLines(explanationLines(policy, explanation))
    })
).pipe(Command.withDescription("Show how a policy decides one call: the outcome, the rule that decides it, and why"))

// test -------------------------------------------------------------------------------------------

const test = Command.make(
  "test",
  {
    json,
    file: policyFile("policy", "a .yaml, .yml or .json policy"),
    cases: policyFile("cases", "a .yaml, .yml or .json table: [{ name?, call, expect, rule? }] or { cases: [...] }")
  },
  (options) =>
    Effect.gen(function*() {
      const policy = yield* Policy.load(options.file)
      const cases = yield* PolicyFiles.cases(options.cases)
      const results = Policy.test(policy, cases)
      const failed = results.filter((result) => result.failure !== undefined)
      if (options.json) {
        yield* printJson({ passed: results.length - failed.length, failed: failed.length, results })
      } else {
        for (const result of results) {
          yield* Console.log(
            result.failure === undefined ? `PASS ${result.name}` : `FAIL ${result.name}: ${result.failure}`
          )
        }
        yield* Console.log(`${results.length - failed.length} passed, ${failed.length} failed (${options.cases})`)
      }
      if (failed.length > 0) return yield* new Failed({ code: ExitCode.policyInvalid })
    })
).pipe(
  Command.withDescription(
    "Run a table of calls against a policy, each with the outcome (and optionally the rule) it must get; exit 1 on a mismatch"
  )
)

// diff -------------------------------------------------------------------------------------------

const calls = Options.text("calls").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription(
    "JSON Lines of calls ({ name, args, agentId?, intentId? }) or of audit events (toolgate audit --json)"
  )
)

const exitCode = Options.boolean("exit-code").pipe(
  Options.withDescription("exit 1 when a call is decided differently (like git diff --exit-code)")
)

const decided = (side: Policy.Difference["before"]) => `${side.outcome} (${side.rule})`

const diff = Command.make(
  "diff",
  {
    json,
    calls,
    exitCode,
    before: policyFile("old", "the policy in force"),
    after: policyFile("new", "the candidate policy")
  },
  (options) =>
    Effect.gen(function*() {
      const before = yield* Policy.load(options.before)
      const after = yield* Policy.load(options.after)
      const recorded = yield* PolicyFiles.calls(options.calls)
      const differences = Policy.diff(before, after, recorded.calls)
      if (options.json) {
        yield* printJson({
          calls: recorded.calls.length,
          skipped: recorded.skipped,
          duplicates: recorded.duplicates,
          changed: differences.length,
          differences
        })
      } else {
        for (const difference of differences) {
          yield* Console.log(
            `line ${difference.line}: ${difference.call.name} ${JSON.stringify(difference.call.args)}: ${
              decided(difference.before)
            } -> ${decided(difference.after)}`
          )
        }
        const skipped = recorded.skipped + recorded.duplicates === 0
          ? ""
          : ` (${recorded.skipped} line(s) without a call and ${recorded.duplicates} repeat(s) of a call skipped)`
        yield* Console.log(
          `${differences.length} of ${recorded.calls.length} call(s) decided differently${skipped}`
        )
      }
      // 1, as diff(1) and git diff --exit-code end when there are differences
      if (options.exitCode && differences.length > 0) return yield* new Failed({ code: 1 })
    })
).pipe(
  Command.withDescription(
    "Show which recorded calls (JSON Lines, e.g. from the audit log) a new policy decides differently from the old one"
  )
)

// import -----------------------------------------------------------------------------------------

const from = Options.choice("from", ["claude"]).pipe(
  Options.withDescription("the settings' kind: claude (a Claude Code settings.json's permissions)")
)

const importFormat = Options.choice("format", ["yaml", "json"]).pipe(
  Options.withDescription("the policy's format (default: json for an --out FILE ending in .json, else yaml)"),
  Options.optional
)

const out = Options.text("out").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription("write the policy to FILE instead of stdout"),
  Options.optional
)

const projectRoot = Options.directory("root").pipe(
  Options.withDescription(
    "the project folder that /path and ./path rules are relative to (default: the folder holding .claude/ " +
      "when the file is in one, else the file's folder)"
  ),
  Options.optional
)

/** `permissions.allow[3] "Read(./src/**)"`, or the setting's path. */
const warningLine = (file: string, warning: PolicyImport.Warning) =>
  `${file}: ${warning.path}${
    warning.rule === undefined ? "" : ` ${JSON.stringify(warning.rule)}`
  }: warning: ${warning.message}`

const importSettings = Command.make(
  "import",
  { from, format: importFormat, out, root: projectRoot, file: policyFile("file", "the settings file (JSON)") },
  (options) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const { file } = options
      const text = yield* fs.readFileString(file).pipe(
        Effect.mapError((error) => new InvalidInput({ message: `${file}: cannot read the file: ${error.message}` }))
      )
      const folder = path.dirname(path.resolve(file))
      const root = Option.match(options.root, {
        onNone: () => path.basename(folder) === ".claude" ? path.dirname(folder) : folder,
        onSome: (root) => path.resolve(root)
      })
      const imported = yield* PolicyImport.fromClaudeSettingsText(text, {
        projectRoot: root,
        home: homedir(),
        source: file
      }).pipe(Effect.mapError((error) => new InvalidInput({ message: error.message })))
      const format = Option.getOrElse(
        options.format,
        () => Option.exists(options.out, (out) => /\.json$/i.test(out)) ? "json" as const : "yaml" as const
      )
      const policy = PolicyImport.toText(imported.policy, format)
      for (const warning of imported.warnings) yield* Console.error(warningLine(file, warning))
      yield* Option.match(options.out, {
        onNone: () => printLines(policy.trimEnd().split("\n")),
        onSome: (out) =>
          fs.writeFileString(out, policy).pipe(
            Effect.mapError((error) => new InvalidInput({ message: `${out}: cannot write the file: ${error.message}` }))
          )
      })
    })
).pipe(
  Command.withDescription(
    "Turn a Claude Code settings file's permissions (allow, ask, deny) into a policy; a warning on stderr for " +
      "every rule the policy cannot say exactly (an allow is then narrower, a deny or ask broader)"
  )
)

/** `toolgate policy` */
export const policy = Command.make("policy").pipe(
  Command.withDescription("Policy files: check, evaluate, test and compare them, or import them from Claude Code"),
  Command.withSubcommands([check, evaluate, test, diff, importSettings])
)
