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
import { Data, type Duration, Effect, Either, Schema, Stream } from "effect"
import type * as Decision from "./Decision.js"
import { canonicalJson } from "./internal/canonical.js"
import type * as Evaluator from "./internal/evaluator.js"
import * as PolicyCompile from "./internal/policyCompile.js"
import * as PolicyText from "./internal/policyText.js"
import * as PolicyValidate from "./internal/policyValidate.js"
import * as PolicyWatch from "./internal/policyWatch.js"
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

const fromText = (parsed: Either.Either<unknown, Array<string>>, source: string | undefined) =>
  Either.isLeft(parsed) ? Effect.fail(PolicyValidate.unparsable(parsed.left, source)) : build(parsed.right, source)

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
 * Parses and compiles a JSON policy. Syntax errors (and duplicate keys) are reported with their
 * line and column; `source` (a file name) appears in the error message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromJson = (text: string, source?: string): Effect.Effect<Policy, PolicyInvalid> =>
  fromText(PolicyText.parseJson(text), source)

/**
 * Parses and compiles a YAML policy (YAML 1.2, so `no` is a string, not `false`). Syntax errors
 * are reported with their line and column.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromYaml = (text: string, source?: string): Effect.Effect<Policy, PolicyInvalid> =>
  fromText(PolicyText.parseYaml(text), source)

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
