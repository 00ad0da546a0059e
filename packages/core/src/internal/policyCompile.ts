/**
 * Policy compilation: a validated document becomes an immutable `Policy`. Matchers are
 * normalized (so the version hash does not depend on how a rule was written), rules get their
 * ids and precomputed decisions, and the evaluator and the lint checks are built from them.
 */
import type { Schema } from "effect"
import type * as Decision from "../Decision.js"
import type * as Policy from "../Policy.js"
import { canonicalJson, sha256 } from "./canonical.js"
import * as Evaluator from "./evaluator.js"
import * as Glob from "./glob.js"
import * as PolicyLint from "./policyLint.js"
import { autoId, type ListName, lists } from "./policyValidate.js"

type Decoded = Schema.Schema.Type<typeof Policy.PolicyInput>
type DecodedMatcher = Schema.Schema.Type<typeof Policy.Matcher>

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

const normalizeMatcher = (matcher: DecodedMatcher): Policy.Matcher => {
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

const toRule = (source: ListName, index: number, matcher: Policy.Matcher): Policy.Rule => {
  if (typeof matcher === "string") return Object.freeze({ id: autoId(source, index), source, index, tool: matcher })
  const { id, ...fields } = matcher
  return Object.freeze({ id: id ?? autoId(source, index), source, index, ...fields })
}

const ruleDecision = (rule: Policy.Rule, ttlMs: number, policyVersion: string): Decision.Decision => {
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

const defaultDecision = (verdict: Policy.Verdict, ttlMs: number, policyVersion: string): Decision.Decision => {
  const rule = Object.freeze({ id: "default", source: "default" as const })
  switch (verdict) {
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

/** The compiled, frozen policy; `decoded` is valid (see `policyValidate`). */
export const compile = (decoded: Decoded): Policy.Policy => {
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
    evaluate: (call: Policy.MatchInput) => find(call)?.decision ?? fallback,
    match: (call: Policy.MatchInput) => find(call)?.rule
  })
}
