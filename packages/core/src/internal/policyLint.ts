/**
 * Load-time checks that find rules which do not do what their author meant: rules that can never
 * match, rules that can never apply because an earlier or higher-precedence rule always wins,
 * fields that have no effect, and deny conditions on arguments that are easy to step around. Every "shadowed" report is certain; some shadowing (through
 * patterns the inclusion test cannot prove) goes unreported.
 */
import type { LintWarning } from "../Policy.js"
import { canonicalJson } from "./canonical.js"
import { asMatcher, missing, resolve, splitPath, valueTest } from "./evaluator.js"
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

/** What a warning is about; `unknownTool` and `unknownArgument` need the tools (`policyTools`). */
export type Kind = LintWarning["kind"]

export interface Warning {
  readonly ruleId: string
  readonly path: string
  readonly kind: Kind
  readonly message: string
}

const pathOf = (rule: LintRule): string => `${rule.source}[${rule.index}]`

export const label = (rule: LintRule): string => {
  const path = pathOf(rule)
  return rule.id === path ? `${path} (tool "${rule.tool}")` : `${path} "${rule.id}" (tool "${rule.tool}")`
}

const article = (source: LintRule["source"]): string => (source === "allow" ? "an allow" : `a ${source}`)

const tokens = (pattern: string, lowerCase = false): ReadonlyArray<Glob.Token> =>
  Glob.compile(pattern, lowerCase).tokens

const isSpace = (token: Glob.Token | undefined): boolean => token?._tag === "Char" && /^\s$/u.test(token.char)

/** An argument pattern with its glob tokens when it is a string, its canonical JSON otherwise. */
type ArgPattern = { readonly pattern: string; readonly tokens: ReadonlyArray<Glob.Token> } | {
  readonly pattern: unknown
  readonly canonical: string | undefined
}

/** A rule with its patterns tokenized once, for the pairwise shadowing checks. */
interface Prepared {
  readonly rule: LintRule
  readonly tool: ReadonlyArray<Glob.Token>
  readonly agent: ReadonlyArray<Glob.Token> | undefined
  readonly intent: ReadonlyArray<Glob.Token> | undefined
  readonly args: ReadonlyMap<string, ArgPattern>
}

const prepare = (rule: LintRule): Prepared => ({
  rule,
  tool: tokens(rule.tool, true),
  agent: rule.agent === undefined ? undefined : tokens(rule.agent),
  intent: rule.intent === undefined ? undefined : tokens(rule.intent),
  args: new Map(
    Object.entries(rule.args ?? {}).map(([path, pattern]): [string, ArgPattern] => [
      path,
      typeof pattern === "string"
        ? { pattern, tokens: tokens(pattern) }
        : { pattern, canonical: canonicalJson(pattern) }
    ])
  )
})

/** Why the rule can never match any call, or `undefined` when it might. */
const neverMatches = ({ rule, tool }: Prepared): string | undefined => {
  if (isSpace(tool[0]) || isSpace(tool.at(-1))) {
    return `tool "${rule.tool}" starts or ends with a space, and tool names never do`
  }
  const args = Object.entries(rule.args ?? {})
  for (const [outer, outerPattern] of args) {
    for (const [inner, innerPattern] of args) {
      if (!inner.startsWith(`${outer}.`)) continue
      const rest = splitPath(inner).slice(splitPath(outer).length)
      const matcher = asMatcher(outerPattern)
      if (typeof outerPattern === "string" || (matcher !== undefined && !("equals" in matcher))) {
        return `args "${inner}" looks inside "${outer}", but "${outer}" is matched as text`
      }
      const value = resolve(matcher !== undefined && "equals" in matcher ? matcher.equals : outerPattern, rest)
      if (value === missing || !valueTest(innerPattern)(value)) {
        return `args "${inner}" contradicts the exact value given for "${outer}"`
      }
    }
  }
  return undefined
}

/** Whether `outer` matches every argument value `inner` matches (sound, not complete). */
const valueCovers = (outer: ArgPattern, inner: ArgPattern): boolean => {
  if ("tokens" in outer) {
    if ("tokens" in inner) return Glob.includes(outer.tokens, inner.tokens)
    // a glob sees numbers and booleans as their JSON text
    return (typeof inner.pattern === "number" || typeof inner.pattern === "boolean") &&
      Glob.compile(outer.pattern).test(String(inner.pattern))
  }
  return "canonical" in inner && outer.canonical === inner.canonical
}

const optionalCovers = (outer: ReadonlyArray<Glob.Token> | undefined, inner: ReadonlyArray<Glob.Token> | undefined) =>
  outer === undefined || (inner !== undefined && Glob.includes(outer, inner))

/** Whether `outer` matches every call `inner` matches. */
const covers = (outer: Prepared, inner: Prepared): boolean => {
  if (!Glob.includes(outer.tool, inner.tool)) return false
  if (!optionalCovers(outer.agent, inner.agent) || !optionalCovers(outer.intent, inner.intent)) return false
  for (const [path, pattern] of outer.args) {
    const other = inner.args.get(path)
    if (other === undefined || !valueCovers(pattern, other)) return false
  }
  return true
}

/** Argument names that usually hold a command line. */
const commandLike = /^(command|cmd|cmdline|command_?line|script|shell_?command)$/i

/**
 * Why a deny rule's condition on one argument is easy to step around, or `undefined`. Argument
 * values come from the model, which can add a space, a prefix or capitals, or chain commands.
 */
const easyToBypass = (path: string, pattern: unknown): string | undefined => {
  const matcher = asMatcher(pattern)
  const glob = typeof pattern === "string"
    ? { text: pattern, caseInsensitive: false }
    : matcher !== undefined && "glob" in matcher && typeof matcher.glob === "string"
    ? { text: matcher.glob, caseInsensitive: matcher.caseInsensitive === true }
    : undefined
  const shell = matcher !== undefined && "shell" in matcher
  const reasons: Array<string> = []
  const name = splitPath(path).at(-1)!
  if (commandLike.test(name) && !shell) {
    reasons.push(
      `"${name}" looks like a command line, which a glob sees as one string ("cd / && ..." or "x; ..." ` +
        `before the command escapes it): use { shell: "..." }`
    )
  }
  if (glob !== undefined) {
    if (!glob.text.startsWith("*")) {
      reasons.push(
        `the glob has no leading *, so a value with a leading space or prefix (" ...", "sudo ...") escapes it`
      )
    }
    if (!glob.caseInsensitive && glob.text.toLowerCase() !== glob.text.toUpperCase()) {
      reasons.push(
        `the glob is case-sensitive, so ${JSON.stringify(glob.text.toUpperCase())} escapes it ` +
          `(add caseInsensitive: true where case does not matter to the tool)`
      )
    }
  }
  return reasons.length === 0 ? undefined : `args "${path}" is easy to step around: ${reasons.join("; ")}`
}

/** A field of a rule, written like the validation problems' paths (`deny[0].args["a.b"]`). */
export const fieldPath = (rule: LintRule, ...keys: ReadonlyArray<string>): string =>
  keys.reduce(
    (out, key) => `${out}${/^[A-Za-z_$][\w$-]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`,
    pathOf(rule)
  )

/** Whether the rule is a bare tool glob (written as a string, or as `{ tool }` alone). */
const isPlain = (rule: LintRule): boolean =>
  rule.id === pathOf(rule) && rule.args === undefined && rule.agent === undefined && rule.intent === undefined &&
  rule.ttlMs === undefined && rule.sessionScope === undefined

/** Every glob of a rule with its path: the tool, agent and intent, and the argument globs. */
const globsOf = (rule: LintRule, plain: boolean): Array<readonly [string, string]> => {
  const out: Array<readonly [string, string]> = [[plain ? pathOf(rule) : fieldPath(rule, "tool"), rule.tool]]
  if (rule.agent !== undefined) out.push([fieldPath(rule, "agent"), rule.agent])
  if (rule.intent !== undefined) out.push([fieldPath(rule, "intent"), rule.intent])
  for (const [path, pattern] of Object.entries(rule.args ?? {})) {
    const matcher = asMatcher(pattern)
    if (typeof pattern === "string") out.push([fieldPath(rule, "args", path), pattern])
    else if (matcher !== undefined && "glob" in matcher) out.push([fieldPath(rule, "args", path, "glob"), matcher.glob])
    else if (matcher !== undefined && "shell" in matcher) {
      out.push([fieldPath(rule, "args", path, "shell"), matcher.shell])
    }
  }
  return out
}

/** All warnings, rule by rule in precedence order. `rules` must be in precedence order. */
export const lint = (rules: ReadonlyArray<LintRule>): Array<Warning> => {
  const warnings: Array<Warning> = []
  const live: Array<Prepared> = []
  for (const rule of rules) {
    const prepared = prepare(rule)
    const path = pathOf(rule)
    const warn = (kind: Warning["kind"], message: string) =>
      warnings.push({ ruleId: rule.id, path, kind, message: `${label(rule)}: ${message}` })
    if (rule.source !== "requireApproval") {
      if (rule.ttlMs !== undefined) {
        warn("noEffect", `ttlMs has no effect on ${article(rule.source)} rule (only requireApproval rules wait)`)
      }
      if (rule.sessionScope !== undefined) {
        warn(
          "noEffect",
          `sessionScope has no effect on ${article(rule.source)} rule (only requireApproval rules are approved)`
        )
      }
    }
    for (const [at, pattern] of globsOf(rule, isPlain(rule))) {
      const unsupported = Glob.unsupported(pattern)
      if (unsupported !== undefined) {
        warnings.push({ ruleId: rule.id, path: at, kind: "unsupportedGlob", message: `${label(rule)}: ${unsupported}` })
      }
    }
    if (rule.source === "deny") {
      for (const [path, pattern] of Object.entries(rule.args ?? {})) {
        const bypass = easyToBypass(path, pattern)
        if (bypass !== undefined) warn("easyToBypass", bypass)
      }
    }
    const never = neverMatches(prepared)
    if (never !== undefined) {
      warn("neverMatches", `never matches: ${never}`)
      continue
    }
    const winner = live.find((earlier) => covers(earlier, prepared))?.rule
    if (winner !== undefined) {
      warn(
        "shadowed",
        winner.source === rule.source
          ? `never applies: the earlier rule ${label(winner)} matches every call it matches`
          : `never applies: ${label(winner)} matches every call it matches, and ${winner.source} ` +
            `takes precedence over ${rule.source}`
      )
    }
    live.push(prepared)
  }
  return warnings
}
