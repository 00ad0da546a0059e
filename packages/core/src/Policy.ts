/**
 * Policies: which tool calls are allowed, denied, or need a human's approval. A policy has a
 * `default` effect, a default approval `ttlMs`, and three lists of matchers (`deny`,
 * `requireApproval`, `allow`); deny beats requireApproval beats allow beats the default. Policies
 * come from code, JSON or YAML; an invalid one fails with a `PolicyInvalid` naming the path of
 * every problem, and a valid one carries lint warnings for rules that can never apply.
 *
 * @example
 * import { Policy } from "@tool-gate/core"
 *
 * const policy = Policy.unsafeMake({
 *   deny: [{ tool: "bash", args: { command: { shell: "rm -rf*" } }, reason: "no recursive deletes" }],
 *   requireApproval: ["bash", { tool: "mcp__github__*", args: { repo: "acme/*" }, ttlMs: 60_000 }],
 *   allow: ["read_*"]
 * })
 *
 * policy.evaluate({ name: "Bash", args: { command: "ls" } })._tag // "RequireApproval"
 * policy.evaluate({ name: "read_file", args: { path: "a.txt" } })._tag // "Allow"
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Data, type Duration, Effect, Either, JSONSchema, Schema, Stream } from "effect"
import type * as Decision from "./Decision.js"
import { canonicalJson } from "./internal/canonical.js"
import type * as Evaluator from "./internal/evaluator.js"
import * as PolicyCases from "./internal/policyCases.js"
import * as PolicyCheck from "./internal/policyCheck.js"
import * as PolicyCompile from "./internal/policyCompile.js"
import * as PolicyText from "./internal/policyText.js"
import * as PolicyTools from "./internal/policyTools.js"
import * as PolicyValidate from "./internal/policyValidate.js"
import * as PolicyWatch from "./internal/policyWatch.js"
import { maxTtlMs, TtlMillis } from "./Limits.js"
import { PolicyInvalid } from "./ToolGateError.js"

const expected = (message: string) => ({ message: () => ({ message, override: true }) })

const GlobString = Schema.String.annotations(expected("expected a glob string"))

const EffectLiteral = Schema.Literal("allow", "deny", "requireApproval").annotations({
  ...expected("expected \"allow\" | \"deny\" | \"requireApproval\""),
  description: "the decision for a call no rule matches"
})

/** A TTL in whole milliseconds, 1 ms to a year: `Infinity` or `NaN` would make a grant eternal. */
const TtlMs = Schema.Number.annotations(
  expected(`expected a whole number of milliseconds from 1 to ${maxTtlMs} (one year)`)
).pipe(Schema.compose(TtlMillis)).annotations({
  jsonSchema: {
    type: "integer",
    minimum: 1,
    maximum: maxTtlMs,
    description: "how long a human has to answer, in milliseconds (then the call is denied as expired)"
  }
})

const globMatcherJsonSchema = (key: "glob" | "shell", description: string) => ({
  type: "object",
  required: [key],
  properties: { [key]: { type: "string", description }, caseInsensitive: { type: "boolean" } },
  additionalProperties: false
})

const ArgPattern = Schema.Unknown.pipe(
  Schema.filter((value) => canonicalJson(value) !== undefined, {
    message: () => "expected a glob string or a JSON value"
  })
).annotations({
  jsonSchema: {
    description: "a glob over the argument's text, an argument matcher, or an exact JSON value",
    anyOf: [
      { type: "string", description: "a case-sensitive glob over the whole value (* any text, ? one character)" },
      globMatcherJsonSchema("glob", "a glob over the value's text"),
      globMatcherJsonSchema("shell", "a glob over each simple command of a command line"),
      {
        type: "object",
        required: ["equals"],
        properties: { equals: { description: "an exact value" } },
        additionalProperties: false
      },
      // any other value is compared exactly; an object with a matcher key must be one of the above
      { not: { type: "object", anyOf: [{ required: ["glob"] }, { required: ["shell"] }, { required: ["equals"] }] } }
    ]
  }
})

const MatcherObject = Schema.Struct({
  id: Schema.optionalWith(
    Schema.String.annotations({
      ...expected("expected a string"),
      description: "the rule's id, cited by decisions and audit events"
    }),
    { exact: true }
  ),
  tool: GlobString.annotations({ description: "a glob over the tool name, compared case-insensitively" }),
  args: Schema.optionalWith(
    Schema.Record({ key: Schema.String, value: ArgPattern }).annotations({
      message: () => "expected an object mapping argument paths to globs or JSON values"
    }),
    { exact: true }
  ),
  agent: Schema.optionalWith(GlobString.annotations({ description: "a glob over the call's agentId" }), {
    exact: true
  }),
  intent: Schema.optionalWith(GlobString.annotations({ description: "a glob over the call's intentId" }), {
    exact: true
  }),
  ttlMs: Schema.optionalWith(TtlMs, { exact: true }),
  sessionScope: Schema.optionalWith(
    Schema.Literal("exact", "tool").annotations({
      ...expected("expected \"exact\" | \"tool\""),
      description: "what \"approve for this session\" covers: the exact call, or every call of the tool"
    }),
    { exact: true }
  ),
  reason: Schema.optionalWith(Schema.String.annotations(expected("expected a string")), { exact: true })
})

/**
 * An argument matcher object, for `args` values: `{ glob, caseInsensitive? }` (a glob over the
 * value's text), `{ shell, caseInsensitive? }` (a glob over each simple command of a command line;
 * on deny and requireApproval rules a line it cannot fully see matches, on allow rules it does
 * not) or `{ equals }` (an exact value). A plain string is a case-sensitive glob over the whole
 * value; any other value must be deep-equal.
 *
 * @since 0.1.0
 * @category models
 */
export type ArgMatcher = Evaluator.ArgMatcher

/**
 * One rule: a tool-name glob (`"bash"`, `"task-*"`, `"mcp__github__*"`), or an object that adds
 * conditions on arguments (`args` maps a path such as `"path"`, `"options.recursive"` or
 * `"files.0"` to a glob, an `ArgMatcher` or an exact JSON value), on `agent` and `intent` (globs), and, for
 * requireApproval rules, the approval `ttlMs` and `sessionScope`. `id` names the rule in
 * decisions and audit events (default: its list and index, `requireApproval[2]`).
 *
 * @since 0.1.0
 * @category models
 */
export const Matcher = Schema.Union(
  GlobString.annotations({ description: "a glob over the tool name, compared case-insensitively" }),
  MatcherObject
)
/**
 * @since 0.1.0
 * @category models
 */
export type Matcher = Schema.Schema.Encoded<typeof Matcher>

const Matchers = Schema.Array(Matcher).annotations({ message: () => "expected a list of matchers" })

/**
 * A policy as authors write it (JSON, YAML or code). Unknown keys are refused.
 *
 * @since 0.1.0
 * @category models
 */
export const PolicyInput = Schema.Struct({
  default: Schema.optionalWith(EffectLiteral, { default: () => "allow" as const, exact: true }),
  ttlMs: Schema.optionalWith(TtlMs, { default: () => 300_000, exact: true }),
  allow: Schema.optionalWith(Matchers.annotations({ description: "calls that run at once" }), {
    default: () => [],
    exact: true
  }),
  deny: Schema.optionalWith(Matchers.annotations({ description: "calls that never run" }), {
    default: () => [],
    exact: true
  }),
  requireApproval: Schema.optionalWith(Matchers.annotations({ description: "calls that wait for a human" }), {
    default: () => [],
    exact: true
  })
})
/**
 * @since 0.1.0
 * @category models
 */
export type PolicyInput = Schema.Schema.Encoded<typeof PolicyInput>

/**
 * What a policy says about a call: the three possible outcomes.
 *
 * @since 0.1.0
 * @category models
 */
export type Verdict = "allow" | "deny" | "requireApproval"

/**
 * A compiled rule, with the stable `id` decisions cite and its place in the document.
 *
 * @since 0.1.0
 * @category models
 */
export interface Rule {
  readonly id: string
  readonly source: "allow" | "deny" | "requireApproval"
  /** position in its list, in document order */
  readonly index: number
  readonly tool: string
  readonly args?: Readonly<Record<string, unknown>>
  readonly agent?: string
  readonly intent?: string
  readonly ttlMs?: number
  readonly sessionScope?: "exact" | "tool"
  readonly reason?: string
}

/**
 * A load-time finding that does not stop the policy from loading: a rule that is `shadowed` by
 * an earlier or higher-precedence rule, one that `neverMatches`, a field with `noEffect`, a
 * deny condition on an argument that is `easyToBypass` (a case-sensitive glob, one without a
 * leading `*`, a command line matched as one string), or a glob with syntax these globs do not
 * have (`unsupportedGlob`: `[a-z]`, `{a,b}`, `!(x)`, matched literally). With the tools known
 * (`lint`), also a rule whose tool glob names no known tool (`unknownTool`) and an argument path
 * no parameter of its tools has (`unknownArgument`). `path` is the rule's place in the document
 * (`allow[2]`), or the field's when the finding is about one field (`deny[0].args.comand`).
 *
 * @since 0.1.0
 * @category models
 */
export interface LintWarning {
  readonly ruleId: string
  readonly path: string
  readonly kind:
    | "shadowed"
    | "neverMatches"
    | "noEffect"
    | "easyToBypass"
    | "unsupportedGlob"
    | "unknownTool"
    | "unknownArgument"
  readonly message: string
}

/**
 * The parts of a tool call a policy looks at (a `ToolCall` is one).
 *
 * @since 0.1.0
 * @category models
 */
export interface MatchInput {
  readonly name: string
  readonly args: Readonly<Record<string, unknown>>
  readonly agentId?: string | undefined
  readonly intentId?: string | undefined
}

/**
 * A compiled, immutable policy. `version` is the SHA-256 of the canonical JSON of `input`, so
 * the same rules written with keys in another order have the same version.
 *
 * @since 0.1.0
 * @category models
 */
export interface Policy {
  readonly version: string
  readonly default: Verdict
  readonly ttlMs: number
  /** deny rules, then requireApproval, then allow, each in document order */
  readonly rules: ReadonlyArray<Rule>
  readonly warnings: ReadonlyArray<LintWarning>
  /** the normalized policy: defaults filled in, bare `{ tool }` matchers written as strings */
  readonly input: PolicyInput
  /** the policy's decision alone (session approvals are the `ToolGate`'s business) */
  readonly evaluate: (call: MatchInput) => Decision.Decision
  /** the highest-precedence rule that matches, if any */
  readonly match: (call: MatchInput) => Rule | undefined
}

const decodeInput = Schema.decodeUnknownEither(PolicyInput, { errors: "all", onExcessProperty: "error" })

const build = (raw: unknown, source: string | undefined): Either.Either<Policy, PolicyInvalid> =>
  Either.map(PolicyValidate.validate(raw, decodeInput, source), PolicyCompile.compile)

const fromText = (parsed: Either.Either<PolicyText.Located, Array<string>>, source: string | undefined) =>
  Either.isLeft(parsed)
    ? Effect.fail(PolicyValidate.unparsable(parsed.left, source))
    : Either.mapLeft(build(parsed.right.value, source), (error) => PolicyCheck.located(error, parsed.right.locate))

// Constructors -----------------------------------------------------------------------------------

/**
 * Validates and compiles a policy given as a value (from code, or data decoded elsewhere).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (input: unknown): Effect.Effect<Policy, PolicyInvalid> => build(input, undefined)

/**
 * Like `make`, but throws the `PolicyInvalid`: for tests, benchmarks and quick starts whose
 * policy is a literal in the code.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMake = (input: PolicyInput): Policy =>
  Either.getOrThrowWith(build(input, undefined), (error) => error)

/**
 * Parses and compiles a JSON policy. Every problem (syntax errors, duplicate keys, invalid rules)
 * carries its line and column; `source` (a file name) appears in the error message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromJson = (text: string, source?: string): Effect.Effect<Policy, PolicyInvalid> =>
  fromText(PolicyText.parseJsonLocated(text), source)

/**
 * Parses and compiles a YAML policy (YAML 1.2, so `no` is a string, not `false`). Every problem
 * carries its line and column.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromYaml = (text: string, source?: string): Effect.Effect<Policy, PolicyInvalid> =>
  fromText(PolicyText.parseYamlLocated(text), source)

/**
 * Reads a policy file: `.json` as JSON, `.yaml` / `.yml` as YAML. A file that cannot be read
 * fails with a `PolicyInvalid` carrying the operating system's message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const load = (path: string): Effect.Effect<Policy, PolicyInvalid, FileSystem.FileSystem> => {
  const parse = parserFor(path)
  if (Either.isLeft(parse)) return Effect.fail(parse.left)
  return FileSystem.FileSystem.pipe(
    Effect.flatMap((fs) => fs.readFileString(path)),
    Effect.mapError((error) => unreadable(path, error.message)),
    Effect.flatMap(parse.right)
  )
}

const unreadable = (path: string, message: string) =>
  new PolicyInvalid({ problems: [{ path: "", message: `cannot read the file: ${message}` }], source: path })

/** The parser for a file, by its extension. */
const parserFor = (
  path: string
): Either.Either<(text: string) => Effect.Effect<Policy, PolicyInvalid>, PolicyInvalid> => {
  const extension = /\.(json|ya?ml)$/i.exec(path)?.[1]?.toLowerCase()
  return extension === undefined
    ? Either.left(
      new PolicyInvalid({
        problems: [{ path: "", message: "unknown file type: expected a .json, .yaml or .yml file" }],
        source: path
      })
    )
    : Either.right((text) => extension === "json" ? fromJson(text, path) : fromYaml(text, path))
}

// Reload ----------------------------------------------------------------------------------------

/**
 * What a watched policy file gives each time its content changes: the policy it now holds
 * (`Loaded`), or why the new content is not a policy (`Rejected`: a syntax error, an invalid rule,
 * a file that cannot be read), in which case whoever enforces keeps the policy it had.
 *
 * @since 0.1.0
 * @category models
 */
export type Reload = Data.TaggedEnum<{
  Loaded: { readonly policy: Policy; readonly source: string }
  Rejected: { readonly error: PolicyInvalid; readonly source: string }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Reload = Data.taggedEnum<Reload>()

/**
 * @since 0.1.0
 * @category models
 */
export interface WatchOptions {
  /** the poll behind the file-system watch, in case an event is dropped (default 1 second) */
  readonly interval?: Duration.DurationInput | undefined
  /**
   * how long a changed file must read the same before it counts as saved (default 50 ms), so a
   * file caught halfway through being written is not enforced
   */
  readonly settle?: Duration.DurationInput | undefined
}

/**
 * Watches a policy file (`.json`, `.yaml`, `.yml`): the file as it is now, then each new content
 * as it is saved, as a `Reload` (`Loaded` or `Rejected`). A rejected file never ends the stream:
 * the next save is read again. Give it to the gate as `ToolGate.Options.reload` to enforce each
 * new version without a restart.
 *
 * @example
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { Policy } from "@tool-gate/core"
 * import { Effect, Stream } from "effect"
 *
 * const versions = Policy.watch("policy.yaml").pipe(
 *   Stream.runForEach((reload) =>
 *     Effect.log(reload._tag === "Loaded" ? `policy ${reload.policy.version}` : reload.error.message)
 *   ),
 *   Effect.provide(NodeFileSystem.layer)
 * )
 *
 * @since 0.1.0
 * @category constructors
 */
export const watch = (path: string, options?: WatchOptions): Stream.Stream<Reload, never, FileSystem.FileSystem> => {
  const parse = parserFor(path)
  if (Either.isLeft(parse)) return Stream.make(Reload.Rejected({ error: parse.left, source: path }))
  return PolicyWatch.texts(path, options?.interval ?? "1 second", options?.settle ?? "50 millis").pipe(
    Stream.mapEffect((text) =>
      (Either.isLeft(text) ? Effect.fail(unreadable(path, text.left)) : parse.right(text.right)).pipe(
        Effect.match({
          onFailure: (error) => Reload.Rejected({ error, source: path }),
          onSuccess: (policy) => Reload.Loaded({ policy, source: path })
        })
      )
    )
  )
}

/**
 * A policy with no rules that allows everything (`Allow` via `default`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const allowAll: Policy = unsafeMake({})

// Tools ------------------------------------------------------------------------------------------

/**
 * A tool a policy is written for: its name and its parameters, as an Effect Schema (a
 * `GatedTool`'s `parameters`) or a JSON Schema object (from a file); without parameters, only
 * the name is checked.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tool {
  readonly name: string
  readonly parameters?: Schema.Schema.All | Readonly<Record<string, unknown>> | undefined
}

/**
 * What `lint` accepts as the tools: a list of `Tool`s, or an `@effect/ai` `Toolkit` (anything
 * with `tools` whose entries have a `name` and a `parametersSchema`).
 *
 * @since 0.1.0
 * @category models
 */
export type Tools =
  | ReadonlyArray<Tool>
  | {
    readonly tools: Readonly<Record<string, { readonly name: string; readonly parametersSchema: Schema.Schema.All }>>
  }

const knownTools = (tools: Tools): Array<PolicyTools.KnownTool> =>
  "tools" in tools && !Array.isArray(tools)
    ? Object.values(tools.tools).map((tool) => ({
      name: tool.name,
      parameters: PolicyTools.jsonSchemaOf(tool.parametersSchema)
    }))
    : (tools as ReadonlyArray<Tool>).map((tool) => ({
      name: tool.name,
      parameters: tool.parameters === undefined
        ? undefined
        : Schema.isSchema(tool.parameters)
        ? PolicyTools.jsonSchemaOf(tool.parameters)
        : tool.parameters
    }))

/**
 * The policy's warnings, and with the tools known, the typos that make a rule fail open: a rule
 * whose tool glob matches no known tool (`unknownTool`), an argument path that no parameter of
 * the rule's tools has (`unknownArgument`, with the closest parameter name when there is one).
 * A condition on a path that exists but that no value of the parameter can meet (an `enum` it
 * misses, a type it never matches) is `neverMatches`.
 * A tool whose parameter schema cannot be read (a `Schema.declare` without a JSON Schema) has its
 * argument paths left unchecked; a schema that allows any property (`additionalProperties`, no
 * `properties` at all) accepts every path below it.
 *
 * @example
 * import { Policy } from "@tool-gate/core"
 * import { Schema } from "effect"
 *
 * const policy = Policy.unsafeMake({ deny: [{ tool: "bash", args: { comand: { shell: "rm *" } } }] })
 * const warnings = Policy.lint(policy, {
 *   tools: [{ name: "bash", parameters: Schema.Struct({ command: Schema.String }) }]
 * })
 * warnings[0]?.kind // "unknownArgument": 'no parameter is named "comand" (did you mean "command"?)'
 *
 * @since 0.1.0
 * @category lint
 */
export const lint = (policy: Policy, options: { readonly tools: Tools }): ReadonlyArray<LintWarning> => [
  ...policy.warnings,
  ...PolicyTools.lint(policy.rules, knownTools(options.tools))
]

/**
 * The tools in a JSON value read from a tool file: a definition, a list of them or
 * `{ tools: [...] }` (an MCP `tools/list` result), where a definition is `{ name, parameters }`,
 * `{ name, inputSchema }` (MCP), `{ name, input_schema }` (Anthropic) or `{ type: "function",
 * function: { name, parameters } }` (OpenAI). A bare JSON Schema is the parameters of the tool
 * `fallbackName` (a file `bash.json` describing bash's parameters). Fails with why not.
 *
 * @since 0.1.0
 * @category lint
 */
export const toolsFromJson = (value: unknown, fallbackName?: string): Either.Either<Array<Tool>, string> =>
  Either.map(
    PolicyTools.fromJson(value, fallbackName),
    (tools) => tools.map((tool): Tool => ({ name: tool.name, parameters: tool.parameters as Record<string, unknown> }))
  )

// Trying a policy ---------------------------------------------------------------------------------

/**
 * Why a policy decides a call as it does: the outcome, the decision, the rule that decided (its
 * id, its place `deny[0]` and its matcher; absent when the default did), and the other rules that
 * match the call but lose to it by precedence or document order.
 *
 * @since 0.1.0
 * @category models
 */
export interface Explanation extends PolicyCases.Explanation {}

/**
 * Explains the decision for one call (see `Explanation`).
 *
 * @since 0.1.0
 * @category testing
 */
export const explain = (policy: Policy, call: MatchInput): Explanation =>
  PolicyCases.explain(policy, call, (rule, matcher) => unsafeMake({ default: "allow", [rule.source]: [matcher] }))

/**
 * One row of a policy's test table: a `call` (`{ name, args?, agentId?, intentId? }`), the outcome
 * it must get (`expect`: `allow`, `deny` or `requireApproval`) and optionally the `rule` id that must
 * decide it (`default` when no rule may match), with an optional `name`.
 *
 * @since 0.1.0
 * @category testing
 */
export const TestCase = PolicyCases.Case
/**
 * @since 0.1.0
 * @category testing
 */
export type TestCase = PolicyCases.Case

/**
 * A test case's result; `failure` (when it failed) says what was expected and what was decided.
 *
 * @since 0.1.0
 * @category testing
 */
export interface TestResult extends PolicyCases.CaseResult {}

/**
 * Runs a table of cases against a policy, like `opa test`: one result per case, in order.
 *
 * @example
 * import { Policy } from "@tool-gate/core"
 *
 * const policy = Policy.unsafeMake({ deny: [{ id: "no-rm", tool: "bash", args: { command: { shell: "rm *" } } }] })
 * const [result] = Policy.test(policy, [
 *   { call: { name: "bash", args: { command: "ls && rm -rf /" } }, expect: "deny", rule: "no-rm" }
 * ])
 * result?.failure // undefined: the case passed
 *
 * @since 0.1.0
 * @category testing
 */
export const test = (policy: Policy, cases: ReadonlyArray<TestCase>): Array<TestResult> =>
  PolicyCases.runCases(policy, cases)

/**
 * The test cases in a YAML or JSON text (a list, or `{ cases: [...] }`), or every problem with
 * its path (`cases.2.expect: ...`); syntax errors with their line and column.
 *
 * @since 0.1.0
 * @category testing
 */
export const testCasesFromText = (
  text: string,
  format: "json" | "yaml"
): Either.Either<Array<TestCase>, Array<string>> => PolicyCases.casesFromText(text, format)

/**
 * A call read from line `line` of a calls file.
 *
 * @since 0.1.0
 * @category testing
 */
export interface RecordedCall extends PolicyCases.Recorded {}

/**
 * The calls in JSON Lines (one call `{ name, args, agentId?, intentId? }` or one audit event per
 * line, as `toolgate audit --json` writes them; `args` as an object or as its JSON text). Events
 * without a call are `skipped`; the same call (session and tool-call id) in several events is
 * counted once (`duplicates`). Fails with the first bad line.
 *
 * @since 0.1.0
 * @category testing
 */
export const recordedCalls = (text: string): Either.Either<RecordedCalls, string> =>
  PolicyCases.callsFromJsonLines(text)

/**
 * What a calls file holds: its calls, the lines `skipped` (audit events without a call) and the
 * `duplicates` (events about a call already read).
 *
 * @since 0.1.0
 * @category testing
 */
export interface RecordedCalls extends PolicyCases.RecordedCalls {}

/**
 * A recorded call that two policies decide differently: another outcome, or the same outcome by
 * another rule.
 *
 * @since 0.1.0
 * @category testing
 */
export interface Difference extends PolicyCases.Difference {}

/**
 * The recorded calls `after` decides differently from `before`, in order.
 *
 * @since 0.1.0
 * @category testing
 */
export const diff = (before: Policy, after: Policy, calls: ReadonlyArray<RecordedCall>): Array<Difference> =>
  PolicyCases.diff(before, after, calls)

// Diagnostics ------------------------------------------------------------------------------------

const extensionOf = (path: string): "json" | "yaml" | undefined => {
  const extension = /\.(json|ya?ml)$/i.exec(path)?.[1]?.toLowerCase()
  return extension === undefined ? undefined : extension === "json" ? "json" : "yaml"
}

/**
 * One problem (`error`) or lint warning (`warning`) of a policy file, with its `path` in the
 * document and, when the text is known, the `line` and `column` (from 1) where it is written:
 * syntax errors where the parser stopped, other problems at the offending value (or key, for an
 * unknown key or an argument path no tool has), warnings at their rule or field.
 *
 * @since 0.1.0
 * @category models
 */
export interface Diagnostic extends PolicyCheck.Diagnostic {}

/**
 * What `check` finds: the compiled `policy` when it is valid, and every diagnostic (errors when
 * it is invalid, else its warnings).
 *
 * @since 0.1.0
 * @category models
 */
export interface CheckResult extends PolicyCheck.CheckResult {}

/**
 * Checks a policy's text as an editor or a CI job wants it: every problem and every warning with
 * its line and column. With `tools`, the warnings are `lint`'s (unknown tools and argument paths
 * too).
 *
 * @since 0.1.0
 * @category lint
 */
export const check = (
  text: string,
  options: { readonly format: "json" | "yaml"; readonly source?: string; readonly tools?: Tools }
): CheckResult =>
  PolicyCheck.check(
    text,
    options.format,
    (raw) => build(raw, options.source),
    (policy) => options.tools === undefined ? policy.warnings : lint(policy, { tools: options.tools })
  )

/**
 * `check` on a file (`.json`, `.yaml` or `.yml`); a file that cannot be read, or of another type,
 * is one error.
 *
 * @since 0.1.0
 * @category lint
 */
export const checkFile = (
  path: string,
  options: { readonly tools?: Tools } = {}
): Effect.Effect<CheckResult, never, FileSystem.FileSystem> => {
  const format = extensionOf(path)
  const error = (message: string): CheckResult => ({ diagnostics: [{ severity: "error", path: "", message }] })
  if (format === undefined) return Effect.succeed(error("unknown file type: expected a .json, .yaml or .yml file"))
  return FileSystem.FileSystem.pipe(
    Effect.flatMap((fs) => fs.readFileString(path)),
    Effect.map((text) => check(text, { format, source: path, ...options })),
    Effect.catchAll((failure) => Effect.succeed(error(`cannot read the file: ${failure.message}`)))
  )
}

// JSON Schema ------------------------------------------------------------------------------------

/**
 * The JSON Schema (draft-07) of a policy file, generated from `PolicyInput`, for editors and
 * validators; the package ships it as `@tool-gate/core/policy.schema.json`. A YAML file points
 * editors at it with `# yaml-language-server: $schema=<path or URL>`. What it cannot say (glob
 * problems, duplicate rule ids, lint warnings) `check` reports.
 *
 * @since 0.1.0
 * @category lint
 */
export const makeJsonSchema = (): JSONSchema.JsonSchema7Root =>
  JSONSchema.make(
    PolicyInput.annotations({
      title: "tool-gate policy",
      description: "Which tool calls an AI agent may make (allow), may not (deny), or makes only after a human's " +
        "approval (requireApproval). Precedence: deny > requireApproval > allow > default."
    })
  )
