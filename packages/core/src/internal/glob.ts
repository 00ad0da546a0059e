/**
 * Glob patterns for tool names, argument values, agent and intent ids: `*` matches any sequence
 * (including none), `?` exactly one code point, `\` makes the next character literal. Compiled
 * once per rule; a pattern without wildcards is a plain string comparison. Matching never
 * backtracks: the time is linear in the text for a given pattern (argument values come from the
 * model, and must not be able to stall the gate).
 */

/** One step of a pattern: a literal character (a code point), `?` or `*`. */
export type Token =
  | { readonly _tag: "Char"; readonly char: string }
  | { readonly _tag: "One" }
  | { readonly _tag: "Any" }

const One: Token = { _tag: "One" }
const Any: Token = { _tag: "Any" }

/** Why a pattern cannot be used, or `undefined` when it can. */
export const problem = (pattern: string): string | undefined => {
  if (pattern.length === 0) return "must not be empty"
  let escaped = false
  for (const char of pattern) escaped = !escaped && char === "\\"
  return escaped ? "ends with a dangling \\ escape (write \\\\ for a literal backslash)" : undefined
}

/**
 * Syntax other glob dialects have and these patterns do not: a character class `[a-z]`, braces
 * `{a,b}`, an extended glob `!(x)`. Each of those characters matches itself here, so such a
 * pattern almost never matches what its author meant; this says so (a warning, the pattern is
 * valid), or `undefined`. Escaped characters (`\[`) are meant literally and pass.
 */
export const unsupported = (pattern: string): string | undefined => {
  const chars = Array.from(pattern)
  const escaped = chars.map(() => false)
  for (let i = 0, escape = false; i < chars.length; i++) {
    escaped[i] = escape
    escape = !escape && chars[i] === "\\"
  }
  const plain = (i: number, char: string) => chars[i] === char && !escaped[i]
  const closing = (from: number, char: string) => {
    for (let j = from; j < chars.length; j++) if (plain(j, char)) return j
    return -1
  }
  const literally = "it is matched literally (escape it with \\ to silence this warning)"
  for (let i = 0; i < chars.length; i++) {
    if (plain(i, "[") && closing(i + 2, "]") !== -1) {
      const end = closing(i + 2, "]")
      return `${JSON.stringify(chars.slice(i, end + 1).join(""))} looks like a character class, which globs here ` +
        `do not support: ${literally}; use ? for any one character, or one rule per alternative`
    }
    if (plain(i, "{")) {
      const end = closing(i + 1, "}")
      if (end !== -1 && chars.slice(i + 1, end).some((char, k) => char === "," && !escaped[i + 1 + k])) {
        return `${JSON.stringify(chars.slice(i, end + 1).join(""))} looks like brace alternatives, which globs ` +
          `here do not support: ${literally}; write one rule per alternative`
      }
    }
    if ((plain(i, "!") || plain(i, "+") || plain(i, "@")) && plain(i + 1, "(") && closing(i + 2, ")") !== -1) {
      const end = closing(i + 2, ")")
      return `${JSON.stringify(chars.slice(i, end + 1).join(""))} looks like an extended glob, which globs here ` +
        `do not support: ${literally}`
    }
  }
  return undefined
}

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff
const isPair = (high: string, low: string) => isHigh(high.charCodeAt(0)) && isLow(low.charCodeAt(0))

/** Splits a valid pattern into tokens; a dangling final `\` is kept literally. */
const tokenize = (pattern: string): Array<Token> => {
  const tokens: Array<Token> = []
  let escaped = false
  for (const char of pattern) {
    if (escaped) {
      const last = tokens.at(-1)
      // an escaped low surrogate after a lone high one forms a pair, as it does in the text
      if (last?._tag === "Char" && last.char.length === 1 && char.length === 1 && isPair(last.char, char)) {
        tokens[tokens.length - 1] = { _tag: "Char", char: last.char + char }
      } else tokens.push({ _tag: "Char", char })
      escaped = false
    } else if (char === "\\") escaped = true
    else if (char === "*") {
      // `**` means the same as `*`; collapsing keeps the inclusion test linear in practice
      if (tokens.at(-1)?._tag !== "Any") tokens.push(Any)
    } else if (char === "?") {
      // `*?` means the same as `?*`; with the `?` first, every piece after a `*` starts with a
      // literal, which a search finds fast
      if (tokens.at(-1)?._tag === "Any") tokens.splice(tokens.length - 1, 0, One)
      else tokens.push(One)
    } else tokens.push({ _tag: "Char", char })
  }
  if (escaped) tokens.push({ _tag: "Char", char: "\\" })
  return tokens
}

const literalOf = (tokens: ReadonlyArray<Token>): string | undefined => {
  let out = ""
  for (const token of tokens) {
    if (token._tag !== "Char") return undefined
    out += token.char
  }
  return out
}

/** A compiled pattern. `literal` is set when the pattern has no wildcards. */
export interface Glob {
  readonly pattern: string
  readonly tokens: ReadonlyArray<Token>
  readonly literal: string | undefined
  readonly test: (text: string) => boolean
}

/** The index after the code point at `i` (a surrogate pair is one code point, as with RegExp `u`). */
const next = (text: string, i: number): number =>
  isHigh(text.charCodeAt(i)) && isLow(text.charCodeAt(i + 1)) ? i + 2 : i + 1

/** The index of the code point that ends at `i`. */
const previous = (text: string, i: number): number =>
  isLow(text.charCodeAt(i - 1)) && isHigh(text.charCodeAt(i - 2)) ? i - 2 : i - 1

/**
 * Whether the literal `char` (one code point) is the whole code point at `i`: a lone surrogate in
 * a pattern never matches half of a pair in the text.
 */
const charAt = (text: string, i: number, char: string): boolean =>
  text.startsWith(char, i) &&
  !(char.length === 1 && isHigh(char.charCodeAt(0)) && isLow(text.charCodeAt(i + 1))) &&
  !(char.length === 1 && isLow(char.charCodeAt(0)) && isHigh(text.charCodeAt(i - 1)))

/** A run of `?` and literal code points between two `*`s. */
type Segment = ReadonlyArray<Exclude<Token, { readonly _tag: "Any" }>>

/** Where `segment` ends when it matches at `i`, or -1. `i` is a code-point boundary. */
const matchAt = (text: string, i: number, segment: Segment): number => {
  for (let k = 0; k < segment.length; k++) {
    if (i >= text.length) return -1
    const token = segment[k]
    if (token._tag === "One") i = next(text, i)
    else if (charAt(text, i, token.char)) i += token.char.length
    else return -1
  }
  return i
}

/** Where `segment` starts when it matches ending at `end`, or -1. `end` is a code-point boundary. */
const matchBefore = (text: string, end: number, segment: Segment, floor: number): number => {
  let i = end
  for (let k = segment.length - 1; k >= 0; k--) {
    if (i <= floor) return -1
    const token = segment[k]
    if (token._tag === "One") i = previous(text, i)
    else if (i - token.char.length >= floor && charAt(text, i - token.char.length, token.char)) i -= token.char.length
    else return -1
  }
  return i
}

/** Whether `i` is between two code points (not inside a surrogate pair). */
const boundary = (text: string, i: number): boolean => !(isLow(text.charCodeAt(i)) && isHigh(text.charCodeAt(i - 1)))

const escapeRegExp = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&")

/**
 * How to search for a middle segment: by `indexOf` when it is all literals, else by a RegExp of
 * fixed length (literals and `[^]`, no quantifier), which a RegExp engine searches in
 * O(text × segment) without backtracking, at native speed.
 */
type Plan = { readonly literal: string } | { readonly regExp: RegExp }

const plan = (segment: Segment): Plan => {
  const literal = literalOf(segment)
  if (literal !== undefined) return { literal }
  let source = ""
  for (const token of segment) source += token._tag === "Char" ? escapeRegExp(token.char) : "[^]"
  return { regExp: new RegExp(source, "gu") }
}

/**
 * The leftmost match of a segment starting at or after `from` and ending by `limit`: where it
 * ends, or -1. A later match would end later, so the first one found decides.
 */
const find = (text: string, from: number, limit: number, plan: Plan): number => {
  if ("literal" in plan) {
    const { literal } = plan
    let at = text.indexOf(literal, from)
    while (at !== -1 && at + literal.length <= limit) {
      if (boundary(text, at) && boundary(text, at + literal.length)) return at + literal.length
      at = text.indexOf(literal, at + 1)
    }
    return -1
  }
  const { regExp } = plan
  regExp.lastIndex = from
  const found = regExp.exec(text)
  if (found === null) return -1
  const end = found.index + found[0].length
  return end <= limit ? end : -1
}

/**
 * The matcher for a pattern with at least one `*`: the head segment must match at the start, the
 * tail segment at the end, and each middle segment is taken at its leftmost place after the
 * previous one. Taking the leftmost place is never wrong (a later place leaves less room for the
 * rest), so there is no backtracking: O(text × pattern) at worst, one pass for literal segments.
 */
const starMatcher = (tokens: ReadonlyArray<Token>): (text: string) => boolean => {
  const segments: Array<Array<Exclude<Token, { readonly _tag: "Any" }>>> = [[]]
  for (const token of tokens) {
    if (token._tag === "Any") segments.push([])
    else segments[segments.length - 1]!.push(token)
  }
  const head = segments[0]!
  const tail = segments[segments.length - 1]!
  const middle = segments.slice(1, -1).filter((segment) => segment.length > 0).map(plan)
  return (text) => {
    const start = matchAt(text, 0, head)
    if (start === -1) return false
    const end = matchBefore(text, text.length, tail, start)
    if (end === -1) return false
    let at = start
    for (let k = 0; k < middle.length; k++) {
      at = find(text, at, end, middle[k]!)
      if (at === -1) return false
    }
    return true
  }
}

/** Whether a literal can be compared by UTF-16 units: it does not start or end with a lone surrogate. */
const unitSafe = (literal: string): boolean =>
  literal === "" ||
  (!isLow(literal.charCodeAt(0)) && !isHigh(literal.charCodeAt(literal.length - 1)))

/**
 * Compiles a pattern. With `lowerCase` the literal parts are lower-cased, for matching against
 * lower-cased text (tool names, case-insensitive argument globs).
 */
export const compile = (pattern: string, lowerCase = false): Glob => {
  const tokens = tokenize(pattern).map((t): Token =>
    lowerCase && t._tag === "Char" ? { _tag: "Char", char: t.char.toLowerCase() } : t
  )
  const literal = literalOf(tokens)
  if (literal !== undefined) return { pattern, tokens, literal, test: (text) => text === literal }
  const last = tokens.length - 1
  // `prefix*` and `*suffix` are the common shapes (`mcp__github__*`, `*.env`)
  const prefix = tokens[last]._tag === "Any" ? literalOf(tokens.slice(0, last)) : undefined
  if (prefix !== undefined && unitSafe(prefix)) {
    return { pattern, tokens, literal, test: (text) => text.startsWith(prefix) }
  }
  const suffix = tokens[0]._tag === "Any" ? literalOf(tokens.slice(1)) : undefined
  if (suffix !== undefined && unitSafe(suffix)) {
    return { pattern, tokens, literal, test: (text) => text.endsWith(suffix) }
  }
  const pieces = tokens.filter((token): token is Segment[number] => token._tag !== "Any")
  if (pieces.length === tokens.length) {
    return { pattern, tokens, literal, test: (text) => matchAt(text, 0, pieces) === text.length }
  }
  return { pattern, tokens, literal, test: starMatcher(tokens) }
}

/**
 * Whether every text `inner` matches is also matched by `outer`. Sound, not complete: `inner`'s
 * `*` can only be consumed by `outer`'s `*`, and its `?` by `outer`'s `?` or `*`, so a `true`
 * is always right and a `false` may be too cautious.
 */
export const includes = (outer: ReadonlyArray<Token>, inner: ReadonlyArray<Token>): boolean => {
  // literal ends must agree position by position; this settles most unrelated pairs at once
  let head = 0
  while (head < outer.length && outer[head]._tag === "Char") {
    const n = inner[head]
    if (n === undefined || n._tag !== "Char" || n.char !== (outer[head] as { char: string }).char) return false
    head++
  }
  if (head === outer.length) return head === inner.length
  let tail = 0
  while (outer[outer.length - 1 - tail]._tag === "Char") {
    const n = inner[inner.length - 1 - tail]
    if (inner.length - 1 - tail < head || n._tag !== "Char") return false
    if (n.char !== (outer[outer.length - 1 - tail] as { char: string }).char) return false
    tail++
  }
  const o = outer.slice(head, outer.length - tail)
  const i = inner.slice(head, inner.length - tail)
  const width = i.length + 1
  // 0: not computed yet, 1: false, 2: true
  const memo = new Uint8Array((o.length + 1) * width)
  const go = (x: number, y: number): boolean => {
    const key = x * width + y
    if (memo[key] !== 0) return memo[key] === 2
    let result: boolean
    if (x === o.length) result = y === i.length
    else {
      const a = o[x]
      const b = i[y]
      if (a._tag === "Any") result = go(x + 1, y) || (b !== undefined && go(x, y + 1))
      else if (a._tag === "One") result = b !== undefined && b._tag !== "Any" && go(x + 1, y + 1)
      else result = b !== undefined && b._tag === "Char" && b.char === a.char && go(x + 1, y + 1)
    }
    memo[key] = result ? 2 : 1
    return result
  }
  return go(0, 0)
}
