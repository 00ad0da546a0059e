/**
 * Trying a policy before enforcing it: why it decides a call as it does (`explain`), a table of
 * calls with the outcome each must get (`runCases`, like `opa test`), and the recorded calls two
 * policies decide differently (`diff`), read from JSON Lines of calls or of audit events.
 */
import { Either, ParseResult, Schema } from "effect"
import type * as Decision from "../Decision.js"
import type * as Policy from "../Policy.js"
import { canonicalJson } from "./canonical.js"
import * as PolicyText from "./policyText.js"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A call as a test case or a calls file gives it: what a policy looks at. */
export const Call = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1)),
  args: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), {
    exact: true,
    default: () => ({})
  }),
  agentId: Schema.optionalWith(Schema.String, { exact: true }),
  intentId: Schema.optionalWith(Schema.String, { exact: true })
})
export type Call = typeof Call.Type

export const Outcome = Schema.Literal("allow", "deny", "requireApproval")
export type Outcome = typeof Outcome.Type

export const Case = Schema.Struct({
  name: Schema.optionalWith(Schema.String, { exact: true }),
  call: Call,
  expect: Outcome,
  rule: Schema.optionalWith(Schema.String, { exact: true })
})
export type Case = typeof Case.Type

const Cases = Schema.Union(Schema.Array(Case), Schema.Struct({ cases: Schema.Array(Case) }))

const outcomeOf = (decision: Decision.Decision): Outcome =>
  decision._tag === "Allow" ? "allow" : decision._tag === "Deny" ? "deny" : "requireApproval"

/** The rule id a decision cites: `default` when no rule matched. */
const ruleOf = (decision: Decision.Decision): string => decision.rule?.id ?? "default"

/** Why a policy decides a call as it does. */
export interface Explanation {
  readonly outcome: Outcome
  readonly decision: Decision.Decision
  /** the rule that decided, with the matcher as the policy holds it; absent when the default did */
  readonly rule?: { readonly id: string; readonly path: string; readonly matcher: Policy.Matcher }
  /** the other rules that match the call, which precedence or document order put behind it */
  readonly alsoMatching: ReadonlyArray<{ readonly id: string; readonly path: string }>
}

const matcherOf = (policy: Policy.Policy, rule: Policy.Rule): Policy.Matcher => policy.input[rule.source]![rule.index]!

export const explain = (
  policy: Policy.Policy,
  call: Policy.MatchInput,
  single: (rule: Policy.Rule, matcher: Policy.Matcher) => Policy.Policy
): Explanation => {
  const decision = policy.evaluate(call)
  const winner = policy.match(call)
  const alsoMatching = policy.rules
    .filter((rule) => rule !== winner && single(rule, matcherOf(policy, rule)).match(call) !== undefined)
    .map((rule) => ({ id: rule.id, path: `${rule.source}[${rule.index}]` }))
  return {
    outcome: outcomeOf(decision),
    decision,
    ...(winner !== undefined
      ? { rule: { id: winner.id, path: `${winner.source}[${winner.index}]`, matcher: matcherOf(policy, winner) } }
      : {}),
    alsoMatching
  }
}

/** One case's result: `failure` says what was expected and what the policy decided. */
export interface CaseResult {
  readonly index: number
  readonly name: string
  readonly outcome: Outcome
  readonly rule: string
  readonly failure?: string
}

const callText = (call: Call): string =>
  `${call.name} ${canonicalJson(call.args) ?? "{}"}${call.agentId === undefined ? "" : ` agent=${call.agentId}`}${
    call.intentId === undefined ? "" : ` intent=${call.intentId}`
  }`

export const runCases = (policy: Policy.Policy, cases: ReadonlyArray<Case>): Array<CaseResult> =>
  cases.map((testCase, index) => {
    const decision = policy.evaluate(testCase.call)
    const outcome = outcomeOf(decision)
    const rule = ruleOf(decision)
    const name = testCase.name ?? `cases[${index}]: ${callText(testCase.call)}`
    const wanted = testCase.rule === undefined ? testCase.expect : `${testCase.expect} by rule ${testCase.rule}`
    const failed = outcome !== testCase.expect || (testCase.rule !== undefined && testCase.rule !== rule)
    return {
      index,
      name,
      outcome,
      rule,
      ...(failed ? { failure: `expected ${wanted}, got ${outcome} by rule ${rule}` } : {})
    }
  })

/** The cases in a YAML or JSON text: a list, or `{ cases: [...] }`; or every problem, with its path. */
export const casesFromText = (text: string, format: "json" | "yaml"): Either.Either<Array<Case>, Array<string>> => {
  const parsed = format === "json" ? PolicyText.parseJson(text) : PolicyText.parseYaml(text)
  if (Either.isLeft(parsed)) return Either.left(parsed.left)
  return Schema.decodeUnknownEither(Cases, { errors: "all", onExcessProperty: "error" })(parsed.right).pipe(
    Either.map((cases) => Array.isArray(cases) ? [...cases] : [...(cases as { cases: ReadonlyArray<Case> }).cases]),
    Either.mapLeft((error) => {
      const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
      // a union reports each member's issues; those of the member the text was written as say more
      const shaped = Array.isArray(parsed.right)
        ? issues.filter((issue) => typeof issue.path[0] === "number")
        : issues.filter((issue) => issue.path[0] === "cases")
      return (shaped.length > 0 ? shaped : issues).map((issue) =>
        `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${
          issue._tag === "Unexpected" ? "unknown key" : issue.message
        }`
      )
    })
  )
}

// Recorded calls -------------------------------------------------------------------------------

/** A call read from a line of a calls file. */
export interface Recorded {
  readonly line: number
  readonly call: Call
}

/** What a calls file holds: the calls, and how many lines hold no call (audit events of other kinds). */
export interface RecordedCalls {
  readonly calls: ReadonlyArray<Recorded>
  readonly skipped: number
  readonly duplicates: number
}

const decodeCall = Schema.decodeUnknownEither(Call, { errors: "all" })

/**
 * The calls in JSON Lines: each line a call (`{ name, args, agentId?, intentId? }`) or an audit
 * event (`toolName`, `args` as an object or as its JSON text). Events without arguments (expiry,
 * grants, ...) are skipped; the same call (session and tool-call id) seen in several events (the
 * decision, the request, the answer) is counted once. Fails with the first bad line.
 */
export const callsFromJsonLines = (text: string): Either.Either<RecordedCalls, string> => {
  const calls: Array<Recorded> = []
  const seen = new Set<string>()
  let skipped = 0
  let duplicates = 0
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim()
    if (line === "") continue
    const parsed = PolicyText.parseJson(line)
    if (Either.isLeft(parsed)) return Either.left(`line ${i + 1}: not JSON (${parsed.left.join("; ")})`)
    const value = parsed.right
    if (!isRecord(value)) return Either.left(`line ${i + 1}: expected a JSON object (a call or an audit event)`)
    let candidate: unknown = value
    if (typeof value.toolName === "string" && !("name" in value)) {
      if (value.args === undefined) {
        skipped++
        continue
      }
      let args: unknown = value.args
      if (typeof args === "string") {
        const inner = PolicyText.parseJson(args)
        if (Either.isLeft(inner)) return Either.left(`line ${i + 1}: the event's args are not JSON`)
        args = inner.right
      }
      const key = typeof value.sessionKey === "string" && typeof value.toolCallId === "string"
        ? JSON.stringify([value.sessionKey, value.toolCallId])
        : undefined
      if (key !== undefined && seen.has(key)) {
        duplicates++
        continue
      }
      if (key !== undefined) seen.add(key)
      candidate = {
        name: value.toolName,
        args,
        ...(typeof value.agentId === "string" ? { agentId: value.agentId } : {}),
        ...(typeof value.intentId === "string" ? { intentId: value.intentId } : {})
      }
    } else if (!("name" in value)) {
      skipped++
      continue
    }
    const call = decodeCall(candidate)
    if (Either.isLeft(call)) {
      return Either.left(
        `line ${i + 1}: ${
          ParseResult.ArrayFormatter.formatErrorSync(call.left)
            .map((issue) => `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${issue.message}`)
            .join("; ")
        }`
      )
    }
    calls.push({ line: i + 1, call: call.right })
  }
  return Either.right({ calls, skipped, duplicates })
}

/** A recorded call the two policies decide differently. */
export interface Difference {
  readonly line: number
  readonly call: Call
  readonly before: { readonly outcome: Outcome; readonly rule: string }
  readonly after: { readonly outcome: Outcome; readonly rule: string }
}

/**
 * The calls `before` and `after` decide differently: another outcome, or the same outcome by
 * another rule (so an audit trail would cite another rule).
 */
export const diff = (
  before: Policy.Policy,
  after: Policy.Policy,
  calls: ReadonlyArray<Recorded>
): Array<Difference> =>
  calls.flatMap(({ call, line }) => {
    const old = before.evaluate(call)
    const now = after.evaluate(call)
    const a = { outcome: outcomeOf(old), rule: ruleOf(old) }
    const b = { outcome: outcomeOf(now), rule: ruleOf(now) }
    return a.outcome === b.outcome && a.rule === b.rule ? [] : [{ line, call, before: a, after: b }]
  })

export { callText }
