/**
 * Glob patterns for tool names, argument values, agent and intent ids: `*` matches any sequence
 * (including none), `?` exactly one character, `\` makes the next character literal. Compiled
 * once per rule; a pattern without wildcards is a plain string comparison.
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

/** Splits a valid pattern into tokens; a dangling final `\` is kept literally. */
const tokenize = (pattern: string): Array<Token> => {
  const tokens: Array<Token> = []
  let escaped = false
  for (const char of pattern) {
    if (escaped) {
      tokens.push({ _tag: "Char", char })
      escaped = false
    } else if (char === "\\") escaped = true
    else if (char === "*") {
      // `**` means the same as `*`; collapsing keeps the inclusion test linear in practice
      if (tokens.at(-1)?._tag !== "Any") tokens.push(Any)
    } else if (char === "?") tokens.push(One)
    else tokens.push({ _tag: "Char", char })
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

const escapeRegExp = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&")

/** A compiled pattern. `literal` is set when the pattern has no wildcards. */
export interface Glob {
  readonly pattern: string
  readonly tokens: ReadonlyArray<Token>
  readonly literal: string | undefined
  readonly test: (text: string) => boolean
}

/**
 * Compiles a pattern. With `lowerCase` the literal parts are lower-cased, for matching against
 * lower-cased tool names.
 */
export const compile = (pattern: string, lowerCase = false): Glob => {
  const tokens = tokenize(pattern).map((t): Token =>
    lowerCase && t._tag === "Char" ? { _tag: "Char", char: t.char.toLowerCase() } : t
  )
  const literal = literalOf(tokens)
  if (literal !== undefined) return { pattern, tokens, literal, test: (text) => text === literal }
  const last = tokens.length - 1
  // `prefix*` and `*suffix` are the common shapes (`mcp__github__*`, `*.env`); skip the RegExp
  const prefix = tokens[last]._tag === "Any" ? literalOf(tokens.slice(0, last)) : undefined
  if (prefix !== undefined) return { pattern, tokens, literal, test: (text) => text.startsWith(prefix) }
  const suffix = tokens[0]._tag === "Any" ? literalOf(tokens.slice(1)) : undefined
  if (suffix !== undefined) return { pattern, tokens, literal, test: (text) => text.endsWith(suffix) }
  let source = "^"
  for (const token of tokens) {
    source += token._tag === "Char" ? escapeRegExp(token.char) : token._tag === "One" ? "[^]" : "[^]*"
  }
  const regExp = new RegExp(`${source}$`, "u")
  return { pattern, tokens, literal, test: (text) => regExp.test(text) }
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
