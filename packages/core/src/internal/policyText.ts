/**
 * Policy files as text: JSON and YAML parsed into plain values, with every syntax problem
 * located by line and column. JSON is parsed by hand because runtimes disagree on whether
 * `JSON.parse` errors carry a position (Bun's do not), and because a duplicated key such as a
 * second `"deny"` must be an error, not a silent overwrite of the first list.
 */
import { Either } from "effect"
import * as YAML from "yaml"

const locate = (text: string, offset: number): string => {
  let line = 1
  let lineStart = 0
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++
      lineStart = i + 1
    }
  }
  return `line ${line}, column ${offset - lineStart + 1}`
}

class JsonSyntaxError {
  constructor(readonly offset: number, readonly reason: string) {}
}

/** Deeper documents are refused while parsing, before any recursion can exhaust the stack. */
const maxDepth = 512

const numberToken = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
const whitespace = /[ \t\n\r]*/y

/** Where each value (and each object key) of a parsed document starts, by its path. */
interface Offsets {
  readonly values: Map<string, number>
  readonly keys: Map<string, number>
}

/**
 * Parses strict JSON (RFC 8259) with duplicate object keys refused; with `offsets`, records where
 * each value and key starts.
 */
export const parseJson = (text: string, offsets?: Offsets): Either.Either<unknown, Array<string>> => {
  let pos = 0
  const path: Array<string | number> = []
  const fail = (reason: string, at = pos): never => {
    throw new JsonSyntaxError(at, reason)
  }
  const found = () => (pos >= text.length ? "the end of the text" : JSON.stringify(text[pos]))
  const skip = () => {
    whitespace.lastIndex = pos
    whitespace.test(text)
    pos = whitespace.lastIndex
  }
  const expect = (char: string) => {
    if (text[pos] !== char) fail(`expected ${JSON.stringify(char)}, found ${found()}`)
    pos++
  }
  const string = (): string => {
    const start = pos
    expect("\"")
    for (;;) {
      if (pos >= text.length) fail("unterminated string", start)
      const code = text.charCodeAt(pos)
      if (code === 34) break
      if (code < 0x20) fail("control character in string (escape it)")
      if (code === 92) {
        const escape = text[pos + 1] ?? ""
        if (escape === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(pos + 2, pos + 6))) fail("invalid \\u escape")
          pos += 6
        } else if ("\"\\/bfnrt".includes(escape) && escape !== "") pos += 2
        else fail(`invalid escape \\${escape}`)
      } else pos++
    }
    pos++
    return JSON.parse(text.slice(start, pos)) as string
  }
  let depth = 0
  const value = (): unknown => {
    skip()
    offsets?.values.set(JSON.stringify(path), pos)
    const char = text[pos]
    if ((char === "{" || char === "[") && depth >= maxDepth) fail(`nested more than ${maxDepth} levels deep`)
    depth++
    try {
      return valueAt(char)
    } finally {
      depth--
    }
  }
  const valueAt = (char: string | undefined): unknown => {
    if (char === "{") {
      pos++
      const out: Record<string, unknown> = {}
      skip()
      if (text[pos] === "}") {
        pos++
        return out
      }
      for (;;) {
        skip()
        const keyAt = pos
        const key = string()
        if (Object.prototype.hasOwnProperty.call(out, key)) fail(`duplicate key ${JSON.stringify(key)}`, keyAt)
        skip()
        expect(":")
        path.push(key)
        offsets?.keys.set(JSON.stringify(path), keyAt)
        // defineProperty, so a `"__proto__"` key stays an ordinary key as with JSON.parse
        Object.defineProperty(out, key, { value: value(), enumerable: true, writable: true, configurable: true })
        path.pop()
        skip()
        if (text[pos] === ",") pos++
        else if (text[pos] === "}") {
          pos++
          return out
        } else fail(`expected "," or "}", found ${found()}`)
      }
    }
    if (char === "[") {
      pos++
      const out: Array<unknown> = []
      skip()
      if (text[pos] === "]") {
        pos++
        return out
      }
      for (;;) {
        path.push(out.length)
        out.push(value())
        path.pop()
        skip()
        if (text[pos] === ",") pos++
        else if (text[pos] === "]") {
          pos++
          return out
        } else fail(`expected "," or "]", found ${found()}`)
      }
    }
    if (char === "\"") return string()
    for (const [word, result] of [["true", true], ["false", false], ["null", null]] as const) {
      if (text.startsWith(word, pos)) {
        pos += word.length
        return result
      }
    }
    numberToken.lastIndex = pos
    if (numberToken.test(text)) {
      const start = pos
      pos = numberToken.lastIndex
      return Number(text.slice(start, pos))
    }
    return fail(`expected a JSON value, found ${found()}`)
  }
  try {
    const result = value()
    skip()
    if (pos < text.length) fail(`unexpected ${found()} after the JSON value`)
    return Either.right(result)
  } catch (error) {
    if (error instanceof JsonSyntaxError) return Either.left([`${locate(text, error.offset)}: ${error.reason}`])
    throw error
  }
}

/** Parses YAML 1.2 (core schema): every syntax error, each with its line and column. */
export const parseYaml = (text: string): Either.Either<unknown, Array<string>> =>
  Either.map(parseYamlDocument(text), ({ value }) => value)

const parseYamlDocument = (
  text: string,
  lineCounter?: YAML.LineCounter
): Either.Either<{ readonly value: unknown; readonly document: YAML.Document }, Array<string>> => {
  const document = YAML.parseDocument(text, {
    prettyErrors: true,
    uniqueKeys: true,
    ...(lineCounter ? { lineCounter } : {})
  })
  if (document.errors.length > 0) {
    return Either.left(document.errors.map((error) => {
      // pretty messages read "<what> at line L, column C:" and then quote the source; the parser
      // reports a stack overflow on deep flow collections as an error of its own
      const head = /Maximum call stack/.test(error.message)
        ? "the YAML is nested too deeply"
        : error.message.split("\n")[0].replace(/:$/, "").replace(/ at line \d+, column \d+$/, "")
      const at = error.linePos?.[0]
      return at ? `line ${at.line}, column ${at.col}: ${head}` : head
    }))
  }
  try {
    return Either.right({ value: document.toJS(), document })
  } catch (error) {
    // e.g. the alias-count limit that stops "billion laughs" documents
    return Either.left([error instanceof Error ? error.message : String(error)])
  }
}

// Locations ---------------------------------------------------------------------------------------

/** A line and a column, both from 1. */
export interface Position {
  readonly line: number
  readonly column: number
}

/**
 * Where the value at `segments` is written (its key's place with `key`, for problems about the
 * key itself), or the nearest enclosing value that is written when that one is not (a missing
 * key is reported where its object starts).
 */
export type Locate = (segments: ReadonlyArray<PropertyKey>, key?: boolean) => Position | undefined

/** A parsed document with a way to find where its values are written. */
export interface Located {
  readonly value: unknown
  readonly locate: Locate
}

const positionAt = (text: string) => {
  const starts = [0]
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1)
  return (offset: number): Position => {
    let low = 0
    let high = starts.length - 1
    while (low < high) {
      const mid = (low + high + 1) >> 1
      if (starts[mid]! <= offset) low = mid
      else high = mid - 1
    }
    return { line: low + 1, column: offset - starts[low]! + 1 }
  }
}

/** `parseJson`, and where each value is written. */
export const parseJsonLocated = (text: string): Either.Either<Located, Array<string>> => {
  const offsets: Offsets = { values: new Map(), keys: new Map() }
  const at = positionAt(text)
  return Either.map(parseJson(text, offsets), (value) => ({
    value,
    locate: (segments, key = false) => {
      for (let n = segments.length; n >= 0; n--) {
        const id = JSON.stringify(segments.slice(0, n).map((s) => typeof s === "number" ? s : String(s)))
        const offset = (key && n === segments.length ? offsets.keys.get(id) : undefined) ?? offsets.values.get(id)
        if (offset !== undefined) return at(offset)
      }
      return undefined
    }
  }))
}

/** `parseYaml`, and where each value is written. */
export const parseYamlLocated = (text: string): Either.Either<Located, Array<string>> => {
  const lineCounter = new YAML.LineCounter()
  const at = (node: unknown): Position | undefined => {
    const range = (node as { range?: [number, number, number] } | null)?.range
    if (range === undefined) return undefined
    const { col, line } = lineCounter.linePos(range[0])
    return { line, column: col }
  }
  return Either.map(parseYamlDocument(text, lineCounter), ({ document, value }) => ({
    value,
    locate: (segments, key = false) => {
      let node: unknown = document.contents
      let found = at(node)
      for (let i = 0; i < segments.length; i++) {
        if (YAML.isAlias(node)) node = node.resolve(document)
        const segment = segments[i]
        let next: unknown
        let keyNode: unknown
        if (YAML.isMap(node)) {
          const pair = node.items.find((item) => YAML.isScalar(item.key) && String(item.key.value) === String(segment))
          if (pair !== undefined) [keyNode, next] = [pair.key, pair.value]
        } else if (YAML.isSeq(node) && typeof segment === "number") next = node.items[segment]
        if (next === undefined && keyNode === undefined) break
        const last = i === segments.length - 1
        found = (last && key ? at(keyNode) : undefined) ?? at(next) ?? at(keyNode) ?? found
        node = next
      }
      return found
    }
  }))
}

/** Splits a syntax message `line 3, column 7: ...` into its position and the rest. */
export const splitPosition = (message: string): { readonly position?: Position; readonly message: string } => {
  const match = /^line (\d+), column (\d+): ([\s\S]*)$/.exec(message)
  return match === null
    ? { message }
    : { position: { line: Number(match[1]), column: Number(match[2]) }, message: match[3]! }
}
