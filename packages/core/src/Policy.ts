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
import { FileSystem } from "@effect/platform"
import { Effect as Effect_, Either, ParseResult, Schema } from "effect"
import type * as Decision from "./Decision.js"
import { canonicalJson, sha256 } from "./internal/canonical.js"
import * as Evaluator from "./internal/evaluator.js"
import * as Glob from "./internal/glob.js"
import * as PolicyLint from "./internal/policyLint.js"
import * as PolicyText from "./internal/policyText.js"
import { maxTtlMs, TtlMillis } from "./Limits.js"
import { PolicyInvalid } from "./ToolGateError.js"

const expected = (message: string) => ({ message: () => ({ message, override: true }) })

const GlobString = Schema.String.annotations(expected("expected a glob string"))

const EffectLiteral = Schema.Literal("allow", "deny", "requireApproval").annotations(
  expected("expected \"allow\" | \"deny\" | \"requireApproval\"")
)

/** A TTL in whole milliseconds, 1 ms to a year: `Infinity` or `NaN` would make a grant eternal. */
const TtlMs = Schema.Number.annotations(
  expected(`expected a whole number of milliseconds from 1 to ${maxTtlMs} (one year)`)
).pipe(Schema.compose(TtlMillis))

const ArgPattern = Schema.Unknown.pipe(
  Schema.filter((value) => canonicalJson(value) !== undefined, {
    message: () => "expected a glob string or a JSON value"
  })
)

const MatcherObject = Schema.Struct({
  id: Schema.optionalWith(Schema.String.annotations(expected("expected a string")), { exact: true }),
  tool: GlobString,
  args: Schema.optionalWith(
    Schema.Record({ key: Schema.String, value: ArgPattern }).annotations({
      message: () => "expected an object mapping argument paths to globs or JSON values"
    }),
    { exact: true }
  ),
  agent: Schema.optionalWith(GlobString, { exact: true }),
  intent: Schema.optionalWith(GlobString, { exact: true }),
  ttlMs: Schema.optionalWith(TtlMs, { exact: true }),
  sessionScope: Schema.optionalWith(
    Schema.Literal("exact", "tool").annotations(expected("expected \"exact\" | \"tool\"")),
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
export const Matcher = Schema.Union(GlobString, MatcherObject)
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
  allow: Schema.optionalWith(Matchers, { default: () => [], exact: true }),
  deny: Schema.optionalWith(Matchers, { default: () => [], exact: true }),
  requireApproval: Schema.optionalWith(Matchers, { default: () => [], exact: true })
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
export type Effect = "allow" | "deny" | "requireApproval"

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
 * an earlier or higher-precedence rule, one that `neverMatches`, a field with `noEffect`, or a
 * deny condition on an argument that is `easyToBypass` (a case-sensitive glob, one without a
 * leading `*`, a command line matched as one string). `path` is the rule's place in the
 * document (`allow[2]`).
 *
 * @since 0.1.0
 * @category models
 */
export interface LintWarning {
  readonly ruleId: string
  readonly path: string
  readonly kind: "shadowed" | "neverMatches" | "noEffect" | "easyToBypass"
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
  readonly default: Effect
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

// Validation -------------------------------------------------------------------------------------

const lists = ["deny", "requireApproval", "allow"] as const
type ListName = typeof lists[number]

type Segments = ReadonlyArray<PropertyKey>
interface Found {
  readonly segments: Segments
  readonly message: string
}

const plainKey = /^[A-Za-z_$][\w$-]*$/

/** `["requireApproval", 3, "args", "path"]` reads `requireApproval[3].args.path`. */
const formatPath = (segments: Segments): string => {
  let out = ""
  for (const segment of segments) {
    if (typeof segment === "number") out += `[${segment}]`
    else {
      const key = String(segment)
      out += plainKey.test(key) ? (out === "" ? key : `.${key}`) : `[${JSON.stringify(key)}]`
    }
  }
  return out
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const isMatcherPath = (segments: Segments): boolean =>
  segments.length === 2 && (lists as ReadonlyArray<PropertyKey>).includes(segments[0]) &&
  typeof segments[1] === "number"

/** Schema issues, reworded. A union reports one issue per member; keep the one that explains. */
const schemaProblems = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): Array<Found> => {
  const reworded = issues.map((issue): Found => ({
    segments: issue.path,
    message: issue._tag === "Unexpected"
      ? "unknown key"
      : issue._tag === "Missing"
      ? "is required"
      : issue.path.length === 0
      ? "expected a policy object with any of: default, ttlMs, deny, requireApproval, allow"
      : issue.message
  }))
  const insideMatcher = (found: Found, matcher: Segments) =>
    found.segments.length > 2 && found.segments[0] === matcher[0] && found.segments[1] === matcher[1]
  const out: Array<Found> = []
  for (const found of reworded) {
    if (!isMatcherPath(found.segments)) out.push(found)
    // a matcher object with bad fields also fails as a string; its field problems say more
    else if (reworded.some((other) => insideMatcher(other, found.segments))) continue
    else if (!out.some((other) => formatPath(other.segments) === formatPath(found.segments))) {
      out.push({ segments: found.segments, message: "expected a tool-name glob or a matcher object" })
    }
  }
  return out
}

const autoId = (list: ListName, index: number): string => `${list}[${index}]`

/** Problems a schema cannot see; read from the raw input so they are listed with the rest. */
const semanticProblems = (raw: unknown): Array<Found> => {
  const out: Array<Found> = []
  if (!isRecord(raw)) return out
  const glob = (segments: Segments, pattern: unknown) => {
    const problem = typeof pattern === "string" ? Glob.problem(pattern) : undefined
    if (problem !== undefined) out.push({ segments, message: problem })
  }
  const ids = new Map<string, string>()
  for (const list of lists) {
    const matchers = raw[list]
    if (!Array.isArray(matchers)) continue
    matchers.forEach((matcher: unknown, index) => {
      const at: Segments = [list, index]
      if (typeof matcher === "string") glob(at, matcher)
      if (!isRecord(matcher) && typeof matcher !== "string") return
      let id = autoId(list, index)
      if (isRecord(matcher)) {
        glob([...at, "tool"], matcher.tool)
        glob([...at, "agent"], matcher.agent)
        glob([...at, "intent"], matcher.intent)
        if (isRecord(matcher.args)) {
          for (const [path, pattern] of Object.entries(matcher.args)) {
            const problem = Evaluator.pathProblem(path)
            if (problem !== undefined) out.push({ segments: [...at, "args", path], message: problem })
            else if (Evaluator.asMatcher(pattern) !== undefined) {
              for (const [key, message] of Evaluator.matcherProblems(pattern as Record<string, unknown>)) {
                out.push({ segments: key === "" ? [...at, "args", path] : [...at, "args", path, key], message })
              }
            } else glob([...at, "args", path], pattern)
          }
        }
        if (typeof matcher.id === "string") {
          if (matcher.id === "") out.push({ segments: [...at, "id"], message: "must not be empty" })
          else if (matcher.id === "default") {
            out.push({ segments: [...at, "id"], message: "\"default\" is reserved for the policy default" })
          } else id = matcher.id
        }
      }
      const first = ids.get(id)
      if (first === undefined) ids.set(id, formatPath(at))
      else {
        const segments = isRecord(matcher) && matcher.id !== undefined ? [...at, "id"] : at
        out.push({ segments, message: `duplicate rule id ${JSON.stringify(id)} (also ${first})` })
      }
    })
  }
  return out
}

/** How deep a policy document may nest (rules' exact argument values included). */
const maxDepth = 64

/** How many values a policy document may hold. */
const maxValues = 1_000_000

/**
 * A document too deep or too large to validate, found without recursion (so a 100,000-level
 * document or a cyclic object from code is a problem, not a stack overflow or a hang).
 */
const shapeProblem = (raw: unknown): Found | undefined => {
  const stack: Array<{ readonly value: unknown; readonly segments: Segments }> = [{ value: raw, segments: [] }]
  let values = 1
  while (stack.length > 0) {
    const { segments, value } = stack.pop()!
    if (typeof value !== "object" || value === null) continue
    if (segments.length >= maxDepth) {
      return { segments: segments.slice(0, 4), message: `nests more than ${maxDepth} levels deep (or contains itself)` }
    }
    const keys: ReadonlyArray<PropertyKey> = Array.isArray(value) ? [] : Object.keys(value)
    const count = Array.isArray(value) ? value.length : keys.length
    values += count
    if (values > maxValues) return { segments, message: `the policy holds more than ${maxValues} values` }
    if (Array.isArray(value)) {
      for (let i = 0; i < count; i++) stack.push({ value: value[i], segments: [...segments, i] })
    } else {for (const key of keys) {
        stack.push({ value: (value as Record<PropertyKey, unknown>)[key], segments: [...segments, key] })
      }}
  }
  return undefined
}

/** Problems in document order: by top-level key as written, then by list index. */
const sortProblems = (raw: unknown, found: Array<Found>): Array<{ path: string; message: string }> => {
  const keys = isRecord(raw) ? Object.keys(raw) : []
  const rank = (f: Found) => keys.indexOf(String(f.segments[0]))
  const index = (f: Found) => (typeof f.segments[1] === "number" ? f.segments[1] : -1)
  return [...found]
    .sort((a, b) => rank(a) - rank(b) || index(a) - index(b))
    .map((f) => ({ path: formatPath(f.segments), message: f.message }))
}

// Compilation ------------------------------------------------------------------------------------

type Decoded = Schema.Schema.Type<typeof PolicyInput>
type DecodedMatcher = Schema.Schema.Type<typeof Matcher>

const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key])
  }
  return value
}

/** A detached, frozen copy of JSON argument patterns (the author's object may change later). */
const copyArgs = (args: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> =>
  deepFreeze(JSON.parse(canonicalJson(args)!) as Record<string, unknown>)

const normalizeMatcher = (matcher: DecodedMatcher): Matcher => {
  if (typeof matcher === "string") return matcher
  const hasArgs = matcher.args !== undefined && Object.keys(matcher.args).length > 0
  const rest = {
    ...(matcher.id !== undefined ? { id: matcher.id } : {}),
    ...(hasArgs ? { args: copyArgs(matcher.args!) } : {}),
    ...(matcher.agent !== undefined ? { agent: matcher.agent } : {}),
    ...(matcher.intent !== undefined ? { intent: matcher.intent } : {}),
    ...(matcher.ttlMs !== undefined ? { ttlMs: matcher.ttlMs } : {}),
    ...(matcher.sessionScope !== undefined ? { sessionScope: matcher.sessionScope } : {}),
    ...(matcher.reason !== undefined ? { reason: matcher.reason } : {})
  }
  return Object.keys(rest).length === 0 ? matcher.tool : { tool: matcher.tool, ...rest }
}

const toRule = (source: ListName, index: number, matcher: Matcher): Rule => {
  if (typeof matcher === "string") return Object.freeze({ id: autoId(source, index), source, index, tool: matcher })
  const { id, ...fields } = matcher
  return Object.freeze({ id: id ?? autoId(source, index), source, index, ...fields })
}

const ruleDecision = (rule: Rule, ttlMs: number, policyVersion: string): Decision.Decision => {
  const ref = Object.freeze({ id: rule.id, source: rule.source })
  switch (rule.source) {
    case "deny":
      return Object.freeze({
        _tag: "Deny",
        rule: ref,
        reason: rule.reason ?? `denied by policy rule ${rule.id} (tool "${rule.tool}")`,
        policyVersion
      })
    case "requireApproval":
      return Object.freeze({
        _tag: "RequireApproval",
        rule: ref,
        ttlMs: rule.ttlMs ?? ttlMs,
        sessionScope: rule.sessionScope ?? "exact",
        ...(rule.reason !== undefined ? { reason: rule.reason } : {}),
        policyVersion
      })
    case "allow":
      return Object.freeze({ _tag: "Allow", via: "policy", rule: ref, policyVersion })
  }
}

const defaultDecision = (effect: Effect, ttlMs: number, policyVersion: string): Decision.Decision => {
  const rule = Object.freeze({ id: "default", source: "default" as const })
  switch (effect) {
    case "allow":
      return Object.freeze({ _tag: "Allow", via: "default", policyVersion })
    case "deny":
      return Object.freeze({
        _tag: "Deny",
        rule,
        reason: "no policy rule matches this tool call and the policy default is deny",
        policyVersion
      })
    case "requireApproval":
      return Object.freeze({ _tag: "RequireApproval", rule, ttlMs, sessionScope: "exact", policyVersion })
  }
}

const compile = (decoded: Decoded): Policy => {
  const input = deepFreeze({
    default: decoded.default,
    ttlMs: decoded.ttlMs,
    deny: decoded.deny.map(normalizeMatcher),
    requireApproval: decoded.requireApproval.map(normalizeMatcher),
    allow: decoded.allow.map(normalizeMatcher)
  })
  const version = sha256(canonicalJson(input)!)
  const rules = Object.freeze(
    lists.flatMap((list) => input[list].map((matcher, index) => toRule(list, index, matcher)))
  )
  const find = Evaluator.make(rules.map((rule, order) => ({
    order,
    tool: Glob.compile(rule.tool, true),
    test: Evaluator.compileConditions(rule, rule.source === "allow" ? "allow" : "deny"),
    value: { rule, decision: ruleDecision(rule, input.ttlMs, version) }
  })))
  const fallback = defaultDecision(input.default, input.ttlMs, version)
  return Object.freeze({
    version,
    default: input.default,
    ttlMs: input.ttlMs,
    rules,
    warnings: Object.freeze(PolicyLint.lint(rules).map((warning) => Object.freeze(warning))),
    input,
    evaluate: (call: MatchInput) => find(call)?.decision ?? fallback,
    match: (call: MatchInput) => find(call)?.rule
  })
}

const decodeInput = Schema.decodeUnknownEither(PolicyInput, { errors: "all", onExcessProperty: "error" })

const build = (raw: unknown, source: string | undefined): Either.Either<Policy, PolicyInvalid> => {
  const shape = shapeProblem(raw)
  if (shape !== undefined) {
    return Either.left(new PolicyInvalid({ problems: sortProblems(raw, [shape]), ...(source ? { source } : {}) }))
  }
  const decoded = decodeInput(raw)
  const found = [
    ...(Either.isLeft(decoded) ? schemaProblems(ParseResult.ArrayFormatter.formatErrorSync(decoded.left)) : []),
    ...semanticProblems(raw)
  ]
  if (found.length > 0 || Either.isLeft(decoded)) {
    return Either.left(new PolicyInvalid({ problems: sortProblems(raw, found), ...(source ? { source } : {}) }))
  }
  return Either.right(compile(decoded.right))
}

const fromText = (parsed: Either.Either<unknown, Array<string>>, source: string | undefined) =>
  Either.isLeft(parsed)
    ? Effect_.fail(
      new PolicyInvalid({
        problems: parsed.left.map((message) => ({ path: "", message })),
        ...(source ? { source } : {})
      })
    )
    : build(parsed.right, source)

// Constructors -----------------------------------------------------------------------------------

/**
 * Validates and compiles a policy given as a value (from code, or data decoded elsewhere).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (input: unknown): Effect_.Effect<Policy, PolicyInvalid> => build(input, undefined)

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
 * Parses and compiles a JSON policy. Syntax errors (and duplicate keys) are reported with their
 * line and column; `source` (a file name) appears in the error message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromJson = (text: string, source?: string): Effect_.Effect<Policy, PolicyInvalid> =>
  fromText(PolicyText.parseJson(text), source)

/**
 * Parses and compiles a YAML policy (YAML 1.2, so `no` is a string, not `false`). Syntax errors
 * are reported with their line and column.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromYaml = (text: string, source?: string): Effect_.Effect<Policy, PolicyInvalid> =>
  fromText(PolicyText.parseYaml(text), source)

/**
 * Reads a policy file: `.json` as JSON, `.yaml` / `.yml` as YAML. A file that cannot be read
 * fails with a `PolicyInvalid` carrying the operating system's message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const load = (path: string): Effect_.Effect<Policy, PolicyInvalid, FileSystem.FileSystem> => {
  const extension = /\.(json|ya?ml)$/i.exec(path)?.[1]?.toLowerCase()
  if (extension === undefined) {
    return Effect_.fail(
      new PolicyInvalid({
        problems: [{ path: "", message: "unknown file type: expected a .json, .yaml or .yml file" }],
        source: path
      })
    )
  }
  return FileSystem.FileSystem.pipe(
    Effect_.flatMap((fs) => fs.readFileString(path)),
    Effect_.mapError((error) =>
      new PolicyInvalid({ problems: [{ path: "", message: `cannot read the file: ${error.message}` }], source: path })
    ),
    Effect_.flatMap((text) => extension === "json" ? fromJson(text, path) : fromYaml(text, path))
  )
}

/**
 * A policy with no rules that allows everything (`Allow` via `default`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const allowAll: Policy = unsafeMake({})
