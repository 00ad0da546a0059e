/**
 * The compiled form of a policy's rules and the hot path that finds the first matching one.
 * Everything that can be decided from the tool name alone is decided once per name and cached,
 * so an evaluation is a map lookup plus the remaining candidates' argument checks.
 */
import { canonicalJson } from "./canonical.js"
import * as Glob from "./glob.js"
import * as Newest from "./newest.js"
import * as ShellCommand from "./shellCommand.js"

/** The parts of a tool call a rule can look at. */
export interface Call {
  readonly name: string
  readonly args: Readonly<Record<string, unknown>>
  readonly agentId?: string | undefined
  readonly intentId?: string | undefined
}

/** What a rule requires beyond its tool name. */
export interface Conditions {
  readonly args?: Readonly<Record<string, unknown>> | undefined
  readonly agent?: string | undefined
  readonly intent?: string | undefined
}

/** Marks an argument path the call does not have (distinct from a `null` or `undefined` value). */
export const missing: unique symbol = Symbol.for("@tool-gate/core/Policy/missing")

const hasOwn = Object.prototype.hasOwnProperty

/** Argument paths are dot-separated: `options.recursive`, `files.0` (an array index). */
export const splitPath = (path: string): Array<string> => path.split(".")

/** Why an argument path is unusable, or `undefined`. */
export const pathProblem = (path: string): string | undefined =>
  splitPath(path).some((segment) => segment === "")
    ? `expected an argument path like "path" or "options.recursive", got ${JSON.stringify(path)}`
    : undefined

const arrayIndex = /^(?:0|[1-9][0-9]*)$/

/** The value at a path, or `missing`. Only own properties count, so `constructor` is not found. */
export const resolve = (value: unknown, segments: ReadonlyArray<string>): unknown => {
  let current = value
  for (const segment of segments) {
    if (typeof current !== "object" || current === null) return missing
    if (Array.isArray(current)) {
      if (!arrayIndex.test(segment)) return missing
      const index = Number(segment)
      if (index >= current.length) return missing
      current = current[index]
    } else {
      if (!hasOwn.call(current, segment)) return missing
      current = (current as Record<string, unknown>)[segment]
    }
  }
  return current
}

/** The keys that make an object in `args` a matcher rather than an exact value. */
export const matcherKeys = ["glob", "shell", "equals"] as const

/**
 * An argument matcher object: `{ glob, caseInsensitive? }` (a glob over the value's text),
 * `{ shell, caseInsensitive? }` (a glob over each simple command of a command line) or
 * `{ equals }` (an exact value, for values that look like matchers or contain `*`).
 */
export type ArgMatcher =
  | { readonly glob: string; readonly caseInsensitive?: boolean }
  | { readonly shell: string; readonly caseInsensitive?: boolean }
  | { readonly equals: unknown }

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The matcher an argument pattern is, when it is an object with one of `matcherKeys`. */
export const asMatcher = (pattern: unknown): ArgMatcher | undefined =>
  isRecord(pattern) && matcherKeys.some((key) => hasOwn.call(pattern, key)) ? pattern as ArgMatcher : undefined

/** Why a matcher object is unusable, each problem with the key it is about (`""` for the object). */
export const matcherProblems = (matcher: Readonly<Record<string, unknown>>): Array<[string, string]> => {
  const out: Array<[string, string]> = []
  const kinds = matcherKeys.filter((key) => hasOwn.call(matcher, key))
  if (kinds.length > 1) out.push(["", `a matcher takes one of glob, shell or equals, got ${kinds.join(" and ")}`])
  for (const key of Object.keys(matcher)) {
    if (key === "equals") continue
    if (key === "glob" || key === "shell") {
      const pattern = matcher[key]
      const problem = typeof pattern === "string" ? Glob.problem(pattern) : "expected a glob string"
      if (problem !== undefined) out.push([key, problem])
    } else if (key === "caseInsensitive") {
      if (hasOwn.call(matcher, "equals")) out.push([key, "caseInsensitive applies to glob and shell, not equals"])
      else if (typeof matcher[key] !== "boolean") out.push([key, "expected true or false"])
    } else out.push([key, "unknown key (a matcher takes glob, shell or equals, and caseInsensitive)"])
  }
  return out
}

/** A glob over strings and over the JSON text of numbers and booleans. */
const globTest = (glob: Glob.Glob, lowerCase: boolean) => (value: unknown): boolean => {
  const text = typeof value === "string"
    ? value
    : (typeof value === "number" && Number.isFinite(value)) || typeof value === "boolean"
    ? String(value)
    : undefined
  return text !== undefined && glob.test(lowerCase ? text.toLowerCase() : text)
}

/** Deep equality with `pattern`, key order ignored. */
const equalsTest = (pattern: unknown): (value: unknown) => boolean => {
  if (typeof pattern !== "object" || pattern === null) return (value) => value === pattern
  const expected = canonicalJson(pattern)
  return (value) => typeof value === "object" && value !== null && canonicalJson(value) === expected
}

/**
 * A test for one argument value. A string pattern is a case-sensitive glob over string values
 * and over the JSON text of numbers and booleans; a matcher object does what `ArgMatcher` says;
 * any other pattern must be deep-equal (key order ignored). `side` is what a shell matcher does
 * with a command line it cannot fully see: on the `deny` side (deny and requireApproval rules)
 * it matches, on the `allow` side it does not.
 */
export const valueTest = (pattern: unknown, side: "deny" | "allow" = "deny"): (value: unknown) => boolean => {
  if (typeof pattern === "string") return globTest(Glob.compile(pattern), false)
  const matcher = asMatcher(pattern)
  if (matcher === undefined) return equalsTest(pattern)
  if ("equals" in matcher) return equalsTest(matcher.equals)
  const caseInsensitive = matcher.caseInsensitive === true
  if ("glob" in matcher) return globTest(Glob.compile(matcher.glob, caseInsensitive), caseInsensitive)
  return ShellCommand.matcher(Glob.compile(matcher.shell, caseInsensitive), caseInsensitive, side)
}

/** Compiles a rule's conditions into one predicate; `undefined` when it has none. */
export const compileConditions = (
  conditions: Conditions,
  side: "deny" | "allow" = "deny"
): ((call: Call) => boolean) | undefined => {
  const checks: Array<(call: Call) => boolean> = []
  if (conditions.agent !== undefined) {
    const glob = Glob.compile(conditions.agent)
    checks.push((call) => call.agentId !== undefined && glob.test(call.agentId))
  }
  if (conditions.intent !== undefined) {
    const glob = Glob.compile(conditions.intent)
    checks.push((call) => call.intentId !== undefined && glob.test(call.intentId))
  }
  for (const [path, pattern] of Object.entries(conditions.args ?? {})) {
    const test = valueTest(pattern, side)
    const segments = splitPath(path)
    if (segments.length === 1) {
      checks.push((call) => hasOwn.call(call.args, path) && test(call.args[path]))
    } else {
      checks.push((call) => {
        const value = resolve(call.args, segments)
        return value !== missing && test(value)
      })
    }
  }
  if (checks.length === 0) return undefined
  if (checks.length === 1) return checks[0]
  return (call) => {
    for (let i = 0; i < checks.length; i++) if (!checks[i](call)) return false
    return true
  }
}

/** One compiled rule: its place in precedence order, tool glob, conditions and payload. */
export interface Entry<A> {
  /** position in precedence order (deny list, then requireApproval, then allow) */
  readonly order: number
  /** the tool-name glob, compiled lower-cased */
  readonly tool: Glob.Glob
  readonly test: ((call: Call) => boolean) | undefined
  readonly value: A
}

/**
 * Builds the lookup: the payload of the first entry (in `order`) whose tool glob and conditions
 * match, or `undefined`. Candidate lists are cached per raw tool name, up to `cacheSize` names
 * (the oldest name is dropped first), so a flood of distinct names cannot grow memory.
 */
export const make = <A>(entries: ReadonlyArray<Entry<A>>, cacheSize = 10_000): (call: Call) => A | undefined => {
  const exact = new Map<string, Array<Entry<A>>>()
  const globs: Array<Entry<A>> = []
  for (const entry of [...entries].sort((a, b) => a.order - b.order)) {
    const literal = entry.tool.literal
    if (literal === undefined) globs.push(entry)
    else {
      const list = exact.get(literal)
      if (list === undefined) exact.set(literal, [entry])
      else list.push(entry)
    }
  }

  const candidatesOf = (lowerName: string): ReadonlyArray<Entry<A>> => {
    const all = [...(exact.get(lowerName) ?? []), ...globs.filter((entry) => entry.tool.test(lowerName))]
      .sort((a, b) => a.order - b.order)
    // nothing after an unconditional entry can ever be reached for this name
    const stop = all.findIndex((entry) => entry.test === undefined)
    return stop === -1 ? all : all.slice(0, stop + 1)
  }

  const cache = new Map<string, ReadonlyArray<Entry<A>>>()
  const keepCache = Newest.keeper(cache, cacheSize)
  return (call) => {
    let candidates = cache.get(call.name)
    if (candidates === undefined) {
      candidates = candidatesOf(call.name.toLowerCase())
      cache.set(call.name, candidates)
      keepCache()
    }
    for (let i = 0; i < candidates.length; i++) {
      const entry = candidates[i]
      if (entry.test === undefined || entry.test(call)) return entry.value
    }
    return undefined
  }
}
