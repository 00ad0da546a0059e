import { Buffer } from "node:buffer"
import * as Crypto from "node:crypto"
import { isPortableString, portableStringProblem } from "./callText.js"

/**
 * What a walk refuses beyond values JSON cannot carry. `portable`: what some store cannot keep
 * alike (an own `__proto__` key, U+0000 in a string or key, a lone surrogate); `maxDepth`:
 * nesting of objects and arrays, the root being level 1; `maxBytes`: UTF-8 bytes of the text.
 */
export interface Rules {
  readonly portable: boolean
  readonly maxDepth: number
  readonly maxBytes: number
}

/**
 * The canonical text (`changed`: its value is not the input's, as an `undefined` property was left
 * out or a `-0` written as `0`, which JSON cannot tell apart), or the first problem.
 */
export type Walked =
  | { readonly _tag: "Json"; readonly text: string; readonly changed: boolean }
  | { readonly _tag: "Refused"; readonly path: ReadonlyArray<string | number>; readonly message: string }

const lenient: Rules = { portable: false, maxDepth: Number.POSITIVE_INFINITY, maxBytes: Number.POSITIVE_INFINITY }

/** One open object or array: its keys (objects, sorted) and the key or index being written. */
interface Frame {
  readonly container: object
  readonly keys: ReadonlyArray<string> | undefined
  readonly length: number
  index: number
  at: string | number
  wrote: boolean
}

/**
 * `JSON.stringify` of a string, without the call for a short one that needs no escape (most
 * argument values and keys): a call costs more than the loop.
 */
const quote = (s: string): string => {
  if (s.length > 32) return JSON.stringify(s)
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s)
  }
  return `"${s}"`
}

/** Depth from which `walk` looks for cycles (below it, a set of open containers costs more than it finds). */
const CYCLE_DEPTH = 32

/** Upper bound of UTF-8 bytes per UTF-16 unit of JSON text (a lone surrogate is refused or escaped). */
const BYTES_PER_UNIT = 3

/**
 * Canonical JSON of a value, without recursion (any depth is safe): object keys sorted at every
 * depth, no whitespace, `undefined` properties left out as `JSON.stringify` does. Refuses what
 * JSON cannot carry (`undefined` in an array, functions, symbols, bigints, non-finite numbers,
 * objects that are not plain, cycles) and what `rules` refuse, with the path of the first problem.
 * The work is bounded by `maxBytes`: a shared subtree written twice counts twice.
 */
export const walk = (value: unknown, rules: Rules): Walked => {
  const stack: Array<Frame> = []
  // the open containers, tracked from CYCLE_DEPTH on: a cycle nests without end, so it gets there
  let open: Set<object> | undefined
  let out = ""
  let changed = false
  // the path of the value being written: each open frame's key or index
  const refuse = (message: string): Walked => ({ _tag: "Refused", path: stack.map((frame) => frame.at), message })
  // the path of the top frame's object, for a problem with one of its keys
  const refuseKey = (message: string, key?: string): Walked => {
    const path: Array<string | number> = stack.slice(0, -1).map((frame) => frame.at)
    if (key !== undefined) path.push(key)
    return { _tag: "Refused", path, message }
  }
  const tooLarge = (): Walked => ({
    _tag: "Refused",
    path: [],
    message: `canonical JSON must be at most ${rules.maxBytes} bytes (UTF-8)`
  })
  // the value to write next, and its position (the top frame's `at`)
  let next: unknown = value
  let hasNext = true
  for (;;) {
    if (hasNext) {
      hasNext = false
      const v = next
      switch (typeof v) {
        case "string": {
          if (rules.portable) {
            const problem = portableStringProblem(v)
            if (problem !== undefined) return refuse(problem)
          }
          out += quote(v)
          break
        }
        case "number":
          if (!Number.isFinite(v)) return refuse("must be a finite number")
          if (Object.is(v, -0)) changed = true
          out += JSON.stringify(v)
          break
        case "boolean":
          out += v ? "true" : "false"
          break
        case "object": {
          if (v === null) {
            out += "null"
            break
          }
          if (open === undefined && stack.length >= CYCLE_DEPTH) open = new Set(stack.map((frame) => frame.container))
          if (open?.has(v)) return refuse("must not contain itself (a cycle)")
          if (stack.length + 1 > rules.maxDepth) return refuse(`must be nested at most ${rules.maxDepth} levels deep`)
          if (Array.isArray(v)) {
            out += "["
            stack.push({ container: v, keys: undefined, length: v.length, index: 0, at: 0, wrote: false })
          } else {
            const proto = Object.getPrototypeOf(v)
            if (proto !== Object.prototype && proto !== null) return refuse("must be a plain JSON object")
            const keys = Object.keys(v)
            // each written key takes at least 4 bytes (`"":0`): refuse before sorting a huge object
            if (out.length + keys.length * 4 > rules.maxBytes) return tooLarge()
            out += "{"
            stack.push({ container: v, keys: sortKeys(keys), length: keys.length, index: 0, at: "", wrote: false })
          }
          open?.add(v)
          break
        }
        case "undefined":
          return refuse("must not be undefined inside an array (JSON has no undefined)")
        default:
          return refuse(`must be a JSON value, got a ${typeof v}`)
      }
      if (out.length > rules.maxBytes) return tooLarge()
    }
    const top = stack[stack.length - 1]
    if (top === undefined) break
    if (top.index >= top.length) {
      out += top.keys === undefined ? "]" : "}"
      stack.pop()
      open?.delete(top.container)
      continue
    }
    const i = top.index++
    if (top.keys === undefined) {
      if (i > 0) out += ","
      top.at = i
      next = (top.container as ReadonlyArray<unknown>)[i]
    } else {
      const key = top.keys[i]!
      const v = (top.container as Record<string, unknown>)[key]
      if (v === undefined) {
        changed = true
        continue
      }
      if (rules.portable) {
        if (key === "__proto__") {
          return refuseKey("an own __proto__ key is not allowed (stores would drop or reject it)", key)
        }
        const problem = portableStringProblem(key)
        if (problem !== undefined) return refuseKey(`a key ${problem}`)
      }
      if (top.wrote) out += ","
      top.wrote = true
      top.at = key
      out += `${quote(key)}:`
      next = v
    }
    hasNext = true
  }
  if (out.length * BYTES_PER_UNIT > rules.maxBytes && Buffer.byteLength(out, "utf8") > rules.maxBytes) {
    return tooLarge()
  }
  return { _tag: "Json", text: out, changed }
}

/**
 * An object's keys in `Array.prototype.sort` order (UTF-16 code units, as `<` compares strings):
 * an insertion sort for the few keys arguments have, which costs a fraction of `sort`'s call.
 */
const sortKeys = (keys: Array<string>): Array<string> => {
  if (keys.length > 16) return keys.sort()
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!
    let j = i - 1
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!
      j--
    }
    keys[j + 1] = key
  }
  return keys
}

/** Nesting up to which `shallow` writes a value itself (deeper: the walk). */
const SHALLOW_DEPTH = 8

/**
 * The canonical text of the common argument shape (plain objects and arrays a few levels deep,
 * no `undefined` property), written by bounded recursion: the walk's frames cost more than such a
 * value's text. `undefined` for anything else, which the walk then writes or refuses.
 */
const shallow = (v: unknown, depth: number): string | undefined => {
  switch (typeof v) {
    case "string":
      return quote(v)
    case "number":
      // a finite number's JSON is its ToString
      return Number.isFinite(v) ? String(v) : undefined
    case "boolean":
      return v ? "true" : "false"
    case "object": {
      if (v === null) return "null"
      if (depth >= SHALLOW_DEPTH) return undefined
      if (Array.isArray(v)) {
        let out = "["
        for (let i = 0; i < v.length; i++) {
          const item = shallow(v[i], depth + 1)
          if (item === undefined) return undefined
          out += i === 0 ? item : `,${item}`
        }
        return `${out}]`
      }
      const proto = Object.getPrototypeOf(v)
      if (proto !== Object.prototype && proto !== null) return undefined
      const keys = sortKeys(Object.keys(v))
      let out = "{"
      for (let i = 0; i < keys.length; i++) {
        const field = shallow((v as Record<string, unknown>)[keys[i]!], depth + 1)
        if (field === undefined) return undefined
        out += `${i === 0 ? "" : ","}${quote(keys[i]!)}:${field}`
      }
      return `${out}}`
    }
    default:
      return undefined
  }
}

/**
 * Canonical JSON: object keys sorted at every depth, no whitespace. Two argument objects that are
 * deep-equal regardless of key order produce the same text, and so the same digest.
 * `undefined` properties are absent, as in JSON. Returns `undefined` for values JSON cannot
 * carry (undefined in an array, functions, symbols, bigints, non-finite numbers, cycles) so
 * callers can reject them with their own typed error.
 */
export const canonicalJson = (value: unknown): string | undefined => {
  if (value === undefined) return undefined
  const direct = shallow(value, 0)
  if (direct !== undefined) return direct
  const walked = walk(value, lenient)
  return walked._tag === "Json" ? walked.text : undefined
}

/** SHA-256 (hex) of a text: collision-resistant, because an approval is bound to it. */
export const sha256: (text: string) => string = (() => {
  // the one-shot `hash` (Node 20.12+, Bun) costs a third of a Hash object; older Node 20 lacks it
  const hash = (Crypto as { readonly hash?: (algorithm: string, data: string, encoding: "hex") => string }).hash
  return hash !== undefined
    ? (text) => hash("sha256", text, "hex")
    : (text) => Crypto.createHash("sha256").update(text).digest("hex")
})()

/** At most this many UTF-8 bytes for a JSON number (`-1.7976931348623157e+308` is 24). */
const NUMBER_BYTES = 24

/**
 * What is left of `budget` bytes after `v`'s canonical text (an upper bound of it), or -1 when
 * `walk` might refuse or change `v` (an `undefined` property, a `-0`, a key or string `walk` would
 * refuse, the bound over budget, nesting over `maxDepth`). Recursion is bounded by `maxDepth`, the
 * work by `budget`.
 */
const remaining = (v: unknown, depth: number, maxDepth: number, budget: number): number => {
  switch (typeof v) {
    case "string": {
      if (!isPortableString(v)) return -1
      // every unit is written in at most 6 bytes (\u001f); near the limit, measure
      const bound = 2 + 6 * v.length
      const left = budget - (bound <= budget ? bound : Buffer.byteLength(JSON.stringify(v), "utf8"))
      return left >= 0 ? left : -1
    }
    case "number":
      return Number.isFinite(v) && !Object.is(v, -0) && budget >= NUMBER_BYTES ? budget - NUMBER_BYTES : -1
    case "boolean":
      return budget >= 5 ? budget - 5 : -1
    case "object": {
      let left = budget - 4
      if (left < 0) return -1
      if (v === null) return left
      if (depth > maxDepth) return -1
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          left = remaining(v[i], depth + 1, maxDepth, left - 1)
          if (left < 0) return -1
        }
        return left
      }
      const proto = Object.getPrototypeOf(v)
      if (proto !== Object.prototype && proto !== null) return -1
      // for-in visits every own enumerable key Object.keys gives (and inherited ones: stricter)
      for (const key in v) {
        const item = (v as Record<string, unknown>)[key]
        if (item === undefined || key === "__proto__" || !isPortableString(key)) return -1
        left = remaining(item, depth + 1, maxDepth, left - 4 - 6 * key.length)
        if (left < 0) return -1
      }
      return left
    }
    default:
      return -1
  }
}

/**
 * The hot path's guard for arguments: `true` only when `walk` under the same limits (and
 * `portable`) accepts `value` as it is, with nothing to drop. It adds up an upper bound of the
 * canonical size instead of writing it, and says `false` for anything unusual, to let `walk`
 * decide and name the problem.
 */
export const fitsPortable = (value: object, maxDepth: number, maxBytes: number): boolean =>
  remaining(value, 1, maxDepth, maxBytes) >= 0
