/**
 * Load-time checks that find rules which do not do what their author meant: rules that can never
 * match, rules that can never apply because an earlier or higher-precedence rule always wins,
 * and fields that have no effect. Every "shadowed" report is certain; some shadowing (through
 * patterns the inclusion test cannot prove) goes unreported.
 */
import { canonicalJson } from "./canonical.js"
import { missing, resolve, splitPath, valueTest } from "./evaluator.js"
import * as Glob from "./glob.js"

/** The parts of a rule the checks read, in precedence order. */
export interface LintRule {
  readonly id: string
  readonly source: "allow" | "deny" | "requireApproval"
  readonly index: number
  readonly tool: string
  readonly args?: Readonly<Record<string, unknown>> | undefined
  readonly agent?: string | undefined
  readonly intent?: string | undefined
  readonly ttlMs?: number | undefined
  readonly sessionScope?: "exact" | "tool" | undefined
}

export interface Warning {
  readonly ruleId: string
  readonly path: string
  readonly kind: "shadowed" | "neverMatches" | "noEffect"
  readonly message: string
}

const pathOf = (rule: LintRule): string => `${rule.source}[${rule.index}]`

const label = (rule: LintRule): string => {
  const path = pathOf(rule)
  return rule.id === path ? `${path} (tool "${rule.tool}")` : `${path} "${rule.id}" (tool "${rule.tool}")`
}

const tokens = (pattern: string, lowerCase = false): ReadonlyArray<Glob.Token> => Glob.compile(pattern, lowerCase).tokens

const isSpace = (token: Glob.Token | undefined): boolean => token?._tag === "Char" && /^\s$/u.test(token.char)

/** Why the rule can never match any call, or `undefined` when it might. */
const neverMatches = (rule: LintRule): string | undefined => {
  const tool = tokens(rule.tool)
  if (isSpace(tool[0]) || isSpace(tool.at(-1))) {
    return `tool "${rule.tool}" starts or ends with a space, and tool names never do`
  }
  const args = Object.entries(rule.args ?? {})
  for (const [outer, outerPattern] of args) {
    for (const [inner, innerPattern] of args) {
      if (!inner.startsWith(`${outer}.`)) continue
      const rest = splitPath(inner).slice(splitPath(outer).length)
      if (typeof outerPattern === "string") {
        return `args "${inner}" looks inside "${outer}", but "${outer}" is matched as text`
      }
      const value = resolve(outerPattern, rest)
      if (value === missing || !valueTest(innerPattern)(value)) {
        return `args "${inner}" contradicts the exact value given for "${outer}"`
      }
    }
  }
  return undefined
}

/** Whether `outer` matches every value `inner` matches (sound, not complete). */
const valueCovers = (outer: unknown, inner: unknown): boolean => {
  if (typeof outer === "string") {
    if (typeof inner === "string") return Glob.includes(tokens(outer), tokens(inner))
    return (typeof inner === "number" || typeof inner === "boolean") && Glob.compile(outer).test(String(inner))
  }
  return typeof inner !== "string" && canonicalJson(outer) === canonicalJson(inner)
}

const optionalCovers = (outer: string | undefined, inner: string | undefined): boolean =>
  outer === undefined || (inner !== undefined && Glob.includes(tokens(outer), tokens(inner)))

/** Whether `outer` matches every call `inner` matches. */
const covers = (outer: LintRule, inner: LintRule): boolean => {
  if (!Glob.includes(tokens(outer.tool, true), tokens(inner.tool, true))) return false
  if (!optionalCovers(outer.agent, inner.agent) || !optionalCovers(outer.intent, inner.intent)) return false
  const innerArgs = inner.args ?? {}
  return Object.entries(outer.args ?? {}).every(([path, pattern]) =>
    Object.prototype.hasOwnProperty.call(innerArgs, path) && valueCovers(pattern, innerArgs[path])
  )
}

/** All warnings, rule by rule in precedence order. `rules` must be in precedence order. */
export const lint = (rules: ReadonlyArray<LintRule>): Array<Warning> => {
  const warnings: Array<Warning> = []
  const live: Array<LintRule> = []
  for (const rule of rules) {
    const path = pathOf(rule)
    const warn = (kind: Warning["kind"], message: string) =>
      warnings.push({ ruleId: rule.id, path, kind, message: `${label(rule)}: ${message}` })
    if (rule.source !== "requireApproval") {
      if (rule.ttlMs !== undefined) {
        warn("noEffect", `ttlMs has no effect on a ${rule.source} rule (only requireApproval rules wait)`)
      }
      if (rule.sessionScope !== undefined) {
        warn("noEffect", `sessionScope has no effect on a ${rule.source} rule (only requireApproval rules are approved)`)
      }
    }
    const never = neverMatches(rule)
    if (never !== undefined) {
      warn("neverMatches", `never matches: ${never}`)
      continue
    }
    const winner = live.find((earlier) => covers(earlier, rule))
    if (winner !== undefined) {
      warn(
        "shadowed",
        winner.source === rule.source
          ? `never applies: the earlier rule ${label(winner)} matches every call it matches`
          : `never applies: ${label(winner)} matches every call it matches, and ${winner.source} takes precedence over ${rule.source}`
      )
    }
    live.push(rule)
  }
  return warnings
}
