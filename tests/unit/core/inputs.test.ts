/**
 * What a tool call may carry (issue 10, "Low" and "Also found"): ids and strings without control
 * characters or lone surrogates and of bounded length; arguments that are plain JSON every store
 * keeps alike (no own `__proto__`, no U+0000, no lone surrogates), of bounded depth and size;
 * `undefined` properties treated as absent. Bad input is `InvalidToolCall` naming the path.
 */
import { ApprovalRequest, ToolCall } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Effect, Either, Schema } from "effect"

const decode = (input: unknown) => Effect.runSync(Effect.either(ToolCall.decode(input)))

const call = (extra: Record<string, unknown>) => ({ id: "c1", name: "bash", sessionKey: "s1", ...extra })

/** The problems' paths of a refused call (fails the test when the call was accepted). */
const refusedAt = (input: unknown): Array<string> => {
  const result = decode(input)
  if (Either.isRight(result)) {
    throw new Error(`expected InvalidToolCall, got ${JSON.stringify(result.right).slice(0, 200)}`)
  }
  expect(result.left._tag).toBe("InvalidToolCall")
  return result.left.problems.map((p) => p.path)
}

const accepted = (input: unknown): ToolCall.ToolCall => {
  const result = decode(input)
  if (Either.isLeft(result)) throw new Error(`expected a call, got ${result.left.message.slice(0, 200)}`)
  return result.right
}

/** `[[...[leaf]...]]`, built without recursion */
const nested = (levels: number, leaf: unknown = 1): unknown => {
  let value = leaf
  for (let i = 0; i < levels; i++) value = [value]
  return value
}

const stringFields = ["id", "name", "sessionKey", "agentId", "intentId", "userId", "workingDirectory"] as const

describe("ids and strings of a call", () => {
  for (const field of stringFields) {
    test(`${field}: a lone surrogate is refused, naming the field`, () => {
      expect(refusedAt(call({ [field]: "team-b\ud800" }))).toContain(field)
      expect(refusedAt(call({ [field]: "team-b\udc00" }))).toContain(field)
      expect(refusedAt(call({ [field]: "\udc00\ud800x" }))).toContain(field)
    })

    test(`${field}: C0, DEL and C1 control characters are refused, naming the field`, () => {
      for (const control of ["\u0000", "\u0001", "\n", "\u001b", "\u001f", "\u007f", "\u0080", "\u009b", "\u009f"]) {
        expect(refusedAt(call({ [field]: `a${control}b` }))).toContain(field)
      }
    })

    test(`${field}: well-formed Unicode is kept as it is (pairs, RTL marks, U+2028 inside)`, () => {
      for (const text of ["team-\ud83d\ude00", "\u05e9\u05dc\u05d5\u05dd", "a\u200fb", "a\u2028b", "x\u00a0y"]) {
        expect(accepted(call({ [field]: text }))[field]).toBe(text)
      }
    })
  }

  test("ids, names, session keys, agent, intent and user ids are at most 256 UTF-16 units", () => {
    for (const field of ["id", "name", "sessionKey", "agentId", "intentId", "userId"] as const) {
      expect(accepted(call({ [field]: "x".repeat(256) }))[field]).toHaveLength(256)
      expect(refusedAt(call({ [field]: "x".repeat(257) }))).toContain(field)
    }
  })

  test("a working directory is at most 4096 UTF-16 units", () => {
    expect(accepted(call({ workingDirectory: `/${"d".repeat(4095)}` })).workingDirectory).toHaveLength(4096)
    expect(refusedAt(call({ workingDirectory: `/${"d".repeat(4096)}` }))).toContain("workingDirectory")
  })
})

describe("arguments", () => {
  test("an own __proto__ key is refused at any depth, naming its path", () => {
    expect(refusedAt(call({ args: JSON.parse(`{"__proto__": {"a": 1}}`) }))).toContain("args.__proto__")
    expect(refusedAt(call({ args: JSON.parse(`{"a": [1, {"__proto__": 1}]}`) }))).toContain("args.a.1.__proto__")
    // an inherited __proto__ (every object has one) is no key
    expect(accepted(call({ args: { a: { b: 1 } } })).args).toEqual({ a: { b: 1 } })
  })

  test("U+0000 in a string or a key is refused (PostgreSQL's jsonb cannot hold it)", () => {
    expect(refusedAt(call({ args: { command: "ls\u0000" } }))).toContain("args.command")
    expect(refusedAt(call({ args: { list: ["a", "b\u0000"] } }))).toContain("args.list.1")
    expect(refusedAt(call({ args: { ["k\u0000"]: 1 } }))).toContain("args")
  })

  test("other control characters in argument strings are kept (newlines are ordinary in commands)", () => {
    const args = { script: "echo a\necho b\t\u001b[0m\u007f\u0085" }
    expect(accepted(call({ args })).args).toEqual(args)
  })

  test("lone surrogates in strings and keys are refused; pairs are kept", () => {
    expect(refusedAt(call({ args: { a: "x\ud800" } }))).toContain("args.a")
    expect(refusedAt(call({ args: { a: { b: ["\udfff"] } } }))).toContain("args.a.b.0")
    expect(refusedAt(call({ args: { ["\ud800"]: 1 } }))).toContain("args")
    expect(accepted(call({ args: { "\ud83d\ude00": "\ud83d\ude00" } })).args).toEqual({
      "\ud83d\ude00": "\ud83d\ude00"
    })
  })

  test("nesting up to 64 levels is accepted, deeper is refused", () => {
    // the arguments object is level 1
    expect(accepted(call({ args: { a: nested(63) } })).args).toEqual({ a: nested(63) })
    expect(refusedAt(call({ args: { a: nested(64) } })).some((p) => p.startsWith("args.a"))).toBe(true)
  })

  test("100,000 levels of nesting are a typed refusal, not a stack overflow", () => {
    expect(refusedAt(call({ args: { a: nested(100_000) } })).some((p) => p.startsWith("args"))).toBe(true)
    let object: Record<string, unknown> = {}
    for (let i = 0; i < 100_000; i++) object = { o: object }
    expect(refusedAt(call({ args: object })).some((p) => p.startsWith("args"))).toBe(true)
  })

  test("canonical JSON over 1 MB is refused; up to 1 MB is accepted", () => {
    // {"a":"…"} is 8 bytes around the string
    expect(accepted(call({ args: { a: "x".repeat(1_000_000 - 8) } })).args.a).toHaveLength(1_000_000 - 8)
    expect(refusedAt(call({ args: { a: "x".repeat(1_000_000 - 7) } }))).toContain("args")
    expect(refusedAt(call({ args: { a: "x".repeat(10_000_000) } }))).toContain("args")
    // the size is in UTF-8 bytes of the canonical text: "é" is 2 bytes, a newline is written as \n
    expect(refusedAt(call({ args: { a: "\u00e9".repeat(500_000) } }))).toContain("args")
    expect(refusedAt(call({ args: { a: "\n".repeat(500_000) } }))).toContain("args")
  })

  test("an undefined property is absent, as in JSON: dropped from the call and its canonical form", () => {
    const decoded = accepted(call({ args: { path: "/tmp", recursive: undefined, opts: { force: undefined, n: 1 } } }))
    expect(decoded.args).toStrictEqual({ path: "/tmp", opts: { n: 1 } })
    expect(Object.hasOwn(decoded.args, "recursive")).toBe(false)
    expect(ToolCall.canonicalArgs(decoded.args)).toBe(`{"opts":{"n":1},"path":"/tmp"}`)
  })

  test("undefined inside an array is refused (JSON would write null: what runs must be what was judged)", () => {
    expect(refusedAt(call({ args: { list: [1, undefined] } }))).toContain("args.list.1")
    // eslint-disable-next-line no-sparse-arrays
    expect(refusedAt(call({ args: { list: [1, , 3] } }))).toContain("args.list.1")
  })

  test("an approver's edited arguments obey the same rules", () => {
    const response = Schema.decodeUnknownEither(ApprovalRequest.ApprovalResponse)
    const edited = (editedArgs: unknown) => response({ decision: "approve_once", editedArgs })
    expect(Either.isLeft(edited(JSON.parse(`{"__proto__": 1}`)))).toBe(true)
    expect(Either.isLeft(edited({ a: "\u0000" }))).toBe(true)
    expect(Either.isLeft(edited({ a: "\ud800" }))).toBe(true)
    expect(Either.isLeft(edited({ a: nested(100_000) }))).toBe(true)
    expect(Either.isLeft(edited({ a: [undefined] }))).toBe(true)
    const ok = edited({ command: "ls", recursive: undefined })
    expect(Either.getOrThrow(ok).editedArgs).toStrictEqual({ command: "ls" })
  })
})
