/**
 * Policy validation: every problem of a policy document, each with its path (`allow[2].args.path`),
 * in document order. The Schema finds the problems of form; the rest (globs, argument paths and
 * matchers, rule ids) are read from the raw document, and a document too deep or too large is
 * refused before either looks at it.
 */
import { Either, ParseResult } from "effect"
import { PolicyInvalid } from "../ToolGateError.js"
import { didYouMean } from "./closest.js"
import * as Evaluator from "./evaluator.js"
import * as Glob from "./glob.js"

/** The rule lists, in precedence order. */
export const lists = ["deny", "requireApproval", "allow"] as const
export type ListName = typeof lists[number]

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

/** The keys a policy document takes (the `PolicyInput` Schema's). */
const policyKeys = ["default", "ttlMs", "deny", "requireApproval", "allow"]

/** The keys a matcher object takes (the `Matcher` Schema's object form). */
const matcherKeys = ["id", "tool", "args", "agent", "intent", "ttlMs", "sessionScope", "reason"]

/** The keys an argument matcher takes. */
const argMatcherKeys = [...Evaluator.matcherKeys, "caseInsensitive"]

/** `unknown key`, with the known key it most likely meant. */
const unknownKey = (segments: Segments): string => {
  const parent = segments.slice(0, -1)
  const known = parent.length === 0 ? policyKeys : isMatcherPath(parent) ? matcherKeys : []
  return `unknown key${didYouMean(String(segments.at(-1)), known)}`
}

/** `requireApproval[3].args.path` read back as `["requireApproval", 3, "args", "path"]`. */
export const parsePath = (path: string): Array<string | number> => {
  const out: Array<string | number> = []
  const token = /^(?:\.?([A-Za-z_$][\w$-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\])/
  let rest = path
  while (rest !== "") {
    const match = token.exec(rest)
    if (match === null) break
    out.push(match[1] ?? (match[2] !== undefined ? Number(match[2]) : JSON.parse(match[3]!) as string))
    rest = rest.slice(match[0].length)
  }
  return out
}

/** Schema issues, reworded. A union reports one issue per member; keep the one that explains. */
const schemaProblems = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): Array<Found> => {
  const reworded = issues.map((issue): Found => ({
    segments: issue.path,
    message: issue._tag === "Unexpected"
      ? unknownKey(issue.path)
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

/** A rule's id when its author gave none: its list and index, `requireApproval[2]`. */
export const autoId = (list: ListName, index: number): string => `${list}[${index}]`

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
                out.push({
                  segments: key === "" ? [...at, "args", path] : [...at, "args", path, key],
                  message: message.startsWith("unknown key") ? `${message}${didYouMean(key, argMatcherKeys)}` : message
                })
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

const invalid = (problems: ReadonlyArray<{ path: string; message: string }>, source: string | undefined) =>
  new PolicyInvalid({ problems, ...(source ? { source } : {}) })

/**
 * `raw` decoded by `decode` (the `PolicyInput` Schema), or a `PolicyInvalid` that names every
 * problem, the Schema's and those it cannot see; `source` (a file name) goes in the error.
 */
export const validate = <A>(
  raw: unknown,
  decode: (raw: unknown) => Either.Either<A, ParseResult.ParseError>,
  source: string | undefined
): Either.Either<A, PolicyInvalid> => {
  const shape = shapeProblem(raw)
  if (shape !== undefined) return Either.left(invalid(sortProblems(raw, [shape]), source))
  const decoded = decode(raw)
  const found = [
    ...(Either.isLeft(decoded) ? schemaProblems(ParseResult.ArrayFormatter.formatErrorSync(decoded.left)) : []),
    ...semanticProblems(raw)
  ]
  if (found.length > 0 || Either.isLeft(decoded)) return Either.left(invalid(sortProblems(raw, found), source))
  return Either.right(decoded.right)
}

/** A document that does not parse: each message (with its line and column) at the root. */
export const unparsable = (messages: ReadonlyArray<string>, source: string | undefined): PolicyInvalid =>
  invalid(messages.map((message) => ({ path: "", message })), source)
