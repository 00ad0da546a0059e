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

/** Parses strict JSON (RFC 8259) with duplicate object keys refused. */
export const parseJson = (text: string): Either.Either<unknown, Array<string>> => {
  let pos = 0
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
        // defineProperty, so a `"__proto__"` key stays an ordinary key as with JSON.parse
        Object.defineProperty(out, key, { value: value(), enumerable: true, writable: true, configurable: true })
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
        out.push(value())
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
export const parseYaml = (text: string): Either.Either<unknown, Array<string>> => {
  const document = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: true })
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
    return Either.right(document.toJS())
  } catch (error) {
    // e.g. the alias-count limit that stops "billion laughs" documents
    return Either.left([error instanceof Error ? error.message : String(error)])
  }
}
