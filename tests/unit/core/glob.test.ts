import { describe, expect, it } from "bun:test"
import { FastCheck as fc } from "effect"
import * as Glob from "../../../packages/core/src/internal/glob.js"

/** The former matcher, a backtracking RegExp with the `u` flag: the reference on small inputs. */
const reference = (pattern: string, lowerCase = false): RegExp => {
  let source = ""
  let escaped = false
  let lastWasStar = false
  for (const raw of pattern) {
    const char = lowerCase ? raw.toLowerCase() : raw
    if (!escaped && raw === "\\") {
      escaped = true
      continue
    }
    const wildcard = !escaped && (raw === "*" || raw === "?")
    if (wildcard && raw === "*") {
      if (!lastWasStar) source += "[^]*"
      lastWasStar = true
    } else {
      source += wildcard ? "[^]" : char.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&")
      lastWasStar = false
    }
    escaped = false
  }
  return new RegExp(`^${source}$`, "u")
}

// Small alphabets with the characters that matter: wildcards, escapes, a surrogate pair and its
// lone halves (a `?` must take a pair whole, a lone half must not match half of a pair).
const pieces = ["a", "b", "ab", "😀", "\ud83d", "\ude00", "\\", "*", "?", " "]
const text = fc.array(fc.constantFrom(...pieces.filter((p) => p !== "*" && p !== "?"), "*", "?"), { maxLength: 12 })
  .map((parts) => parts.join(""))
const pattern = fc.array(fc.constantFrom(...pieces, "*", "*", "?"), { minLength: 1, maxLength: 8 })
  .map((parts) => parts.join(""))
  .filter((p) => Glob.problem(p) === undefined)

describe("Glob.compile", () => {
  it("agrees with the former RegExp matcher on every small pattern and text", () => {
    let matched = 0
    fc.assert(
      fc.property(pattern, fc.array(text, { minLength: 1, maxLength: 6 }), (p, texts) => {
        const glob = Glob.compile(p)
        const regExp = reference(p)
        for (const t of texts) {
          expect([p, t, glob.test(t)]).toEqual([p, t, regExp.test(t)])
          if (regExp.test(t)) matched++
        }
      }),
      { numRuns: 3000 }
    )
    // the generators produce matches too, not only misses
    expect(matched).toBeGreaterThan(500)
  })

  it("agrees on texts built to match: a pattern's wildcards filled in", () => {
    const filled = pattern.chain((p) =>
      fc.tuple(fc.constant(p), fc.array(text, { minLength: 20, maxLength: 20 })).map(([p, fills]) => {
        let out = ""
        let escaped = false
        let k = 0
        for (const char of p) {
          if (!escaped && char === "\\") escaped = true
          else {
            out += !escaped && char === "*" ? fills[k++ % 20] : !escaped && char === "?" ? "😀" : char
            escaped = false
          }
        }
        return [p, out] as const
      })
    )
    let matched = 0
    fc.assert(
      fc.property(filled, ([p, t]) => {
        const expected = reference(p).test(t)
        expect([p, t, Glob.compile(p).test(t)]).toEqual([p, t, expected])
        if (expected) matched++
      }),
      { numRuns: 2000 }
    )
    // a filled-in text matches unless lone surrogate halves joined into a pair
    expect(matched).toBeGreaterThan(1500)
  })

  it("lower-cased patterns agree with the reference on lower-cased text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 6 }).map((s) => `*${s}?*A`), fc.string({ maxLength: 12 }), (p, t) => {
        expect(Glob.compile(p, true).test(t.toLowerCase())).toBe(reference(p, true).test(t.toLowerCase()))
      })
    )
  })

  it("keeps the documented meaning", () => {
    const test = (p: string, t: string) => Glob.compile(p).test(t)
    expect(test("*", "")).toBe(true)
    expect(test("a*b*c", "abc")).toBe(true)
    expect(test("a*b*c", "a-b-b-c")).toBe(true)
    expect(test("a*b*c", "a-c-b")).toBe(false)
    expect(test("?", "😀")).toBe(true)
    expect(test("??", "😀")).toBe(false)
    expect(test("\\*", "*")).toBe(true)
    expect(test("\\*", "x")).toBe(false)
    expect(test("*\\?", "why?")).toBe(true)
    expect(test("*\\?", "why")).toBe(false)
    expect(test("rm -rf*", " rm -rf /")).toBe(false)
    expect(test("*a*a*a*a*a*b", `${"a".repeat(200)}b`)).toBe(true)
    expect(test("*a*a*a*a*a*b", "a".repeat(200))).toBe(false)
    // a lone surrogate in the pattern never matches half of a pair
    expect(test("*\ud83d*", "x😀x")).toBe(false)
    expect(test("*\ud83d*", "x\ud83dx")).toBe(true)
  })
})
