/**
 * Fuzz of the call and argument decoders (issue 10, "Proof that stays"): random JSON, arbitrary
 * JavaScript values, nesting built iteratively to 100,000 levels, shared subtrees whose text
 * would be exponential, cycles, and odd Unicode (lone surrogates, controls, RTL marks, U+2028).
 * Every input ends in a typed error or a call, never a defect (a thrown exception), never a hang
 * (the test's timeout).
 */
import { ApprovalRequest, Limits, ToolCall } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Cause, Effect, Either, Exit, FastCheck as fc, Schema } from "effect"

/** decode's outcome: a call or `InvalidToolCall`; anything else (a defect) fails the test */
const outcome = (input: unknown, limits?: Limits.CallLimits): "call" | "refused" => {
  const exit = Effect.runSyncExit(ToolCall.decode(input, limits))
  if (Exit.isSuccess(exit)) return "call"
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "None") throw new Error(`a defect: ${Cause.pretty(exit.cause).slice(0, 300)}`)
  expect(failure.value._tag).toBe("InvalidToolCall")
  expect(failure.value.problems.length).toBeGreaterThan(0)
  // the message is built (it is what a caller prints), and never holds the raw control characters
  expect(failure.value.message).not.toMatch(/[\u0000\u001b]/)
  return "refused"
}

/** An approver's answer decoded as the gate decodes it: a value or a parse error, never a throw */
const response = (editedArgs: unknown) =>
  Schema.decodeUnknownEither(ApprovalRequest.ApprovalResponse)({ decision: "approve_once", editedArgs })

const oddChar = fc.constantFrom(
  "\u0000",
  "\u0001",
  "\t",
  "\n",
  "\r",
  "\u001b",
  "\u007f",
  "\u0085",
  "\u009b",
  "\u200e",
  "\u200f",
  "\u202a",
  "\u202e",
  "\u2066",
  "\u2028",
  "\u2029",
  "\ufeff",
  "\ufffd",
  "\ud800",
  "\udbff",
  "\udc00",
  "\udfff",
  "\ud83d\ude00",
  "__proto__",
  "constructor"
)
const oddString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 10 }),
  fc.array(fc.oneof(fc.string({ maxLength: 4 }), oddChar), { maxLength: 6 }).map((parts) => parts.join(""))
)

/** JSON values with odd strings as values and keys (built with JSON.parse: `__proto__` is an own key) */
const oddJson = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    oddString,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.array(fc.tuple(oddString, tie("value")), { maxLength: 4 }).map((entries) => {
      const text = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? "null"}`).join(",")}}`
      return JSON.parse(text) as unknown
    })
  )
})).value

/** Nesting built without recursion, to `levels` levels, of arrays, objects or both */
const deep = (levels: number, shape: Shape, leaf: unknown = 0): unknown => {
  let value = leaf
  for (let i = 0; i < levels; i++) {
    value = shape === "array" || (shape === "mixed" && i % 2 === 0) ? [value] : { k: value }
  }
  return value
}
type Shape = "array" | "object" | "mixed"

/**
 * A value to put somewhere: any JS value, or how to build a deep one. Deep values are built
 * inside the property, so that fast-check never prints one (its printer recurses).
 */
type Planned = { readonly value: unknown } | { readonly levels: number; readonly shape: Shape; readonly leaf: unknown }
const build = (planned: Planned): unknown =>
  "levels" in planned ? deep(planned.levels, planned.shape, planned.leaf) : planned.value

const anyValue: fc.Arbitrary<Planned> = fc
  .oneof(fc.anything({ withBigInt: true, withMap: true, withSet: true, withDate: true }), oddJson)
  .map((value) => ({ value }))
const deepValue: fc.Arbitrary<Planned> = fc.record({
  levels: fc.oneof(fc.integer({ min: 60, max: 70 }), fc.constantFrom(1_000, 100_000)),
  shape: fc.constantFrom<Shape>("array", "object", "mixed"),
  leaf: fc.oneof(fc.constant(0), oddString, fc.constant(undefined))
})

const fields = ["id", "name", "sessionKey", "args", "agentId", "intentId", "userId", "workingDirectory"] as const

describe("fuzz: ToolCall.decode and the argument decoders", () => {
  test("random JSON arguments with odd Unicode: a call or InvalidToolCall, and the same from decodeArgs and ApprovalResponse", () => {
    const seen = { call: 0, refused: 0 }
    fc.assert(
      fc.property(oddJson, (args) => {
        const result = outcome({ id: "c1", name: "bash", sessionKey: "s1", args })
        seen[result]++
        const alone = ToolCall.decodeArgs(args)
        expect(Either.isRight(alone)).toBe(result === "call")
        // the approver's edit obeys the structural rules (the gate adds its limits)
        if (result === "call") expect(Either.isRight(response(args))).toBe(true)
      }),
      { numRuns: 3000 }
    )
    expect(seen.call).toBeGreaterThan(150)
    expect(seen.refused).toBeGreaterThan(300)
  })

  test("anything in any field of the call: a call or InvalidToolCall", () => {
    fc.assert(
      fc.property(
        fc.record({
          field: fc.constantFrom(...fields),
          value: fc.oneof(anyValue, deepValue, oddString.map((value) => ({ value }))),
          limits: fc.option(
            fc.record({
              maxIdLength: fc.integer({ min: 1, max: 400 }),
              maxPathLength: fc.integer({ min: 1, max: 5000 }),
              maxArgsBytes: fc.integer({ min: 2, max: 100_000 }),
              maxDepth: fc.integer({ min: 1, max: 1000 })
            }),
            { nil: undefined }
          )
        }),
        ({ field, limits, value }) => {
          outcome({ id: "c1", name: "bash", sessionKey: "s1", args: { a: 1 }, [field]: build(value) }, limits)
        }
      ),
      { numRuns: 1500 }
    )
  }, 120_000)

  test("anything as the whole input, and as the arguments", () => {
    fc.assert(
      fc.property(fc.oneof(anyValue, deepValue), (planned) => {
        const value = build(planned)
        expect(outcome(value)).toBe("refused")
        outcome({ id: "c1", name: "bash", sessionKey: "s1", args: value })
        Either.isLeft(ToolCall.decodeArgs(value))
        response(value)
      }),
      { numRuns: 1500 }
    )
  }, 120_000)

  test("100,000 levels of arrays, objects or both, in every field and in an edit: refused, no stack overflow", () => {
    for (const shape of ["array", "object", "mixed"] as const) {
      const value = deep(100_000, shape)
      for (const field of fields) {
        const input = { id: "c1", name: "bash", sessionKey: "s1", args: { a: 1 }, [field]: value }
        expect(outcome(input)).toBe("refused")
      }
      expect(outcome({ id: "c1", name: "bash", sessionKey: "s1", args: { a: value } })).toBe("refused")
      expect(outcome(value)).toBe("refused")
      expect(Either.isLeft(ToolCall.decodeArgs({ a: value }))).toBe(true)
      expect(Either.isLeft(response({ a: value }))).toBe(true)
      // the widest limits a gate may set still refuse it
      const widest = Either.getOrThrow(Limits.callLimits(Limits.maxCallLimits))
      expect(outcome({ id: "c1", name: "bash", sessionKey: "s1", args: { a: value } }, widest)).toBe("refused")
    }
  }, 60_000)

  test("shared subtrees whose canonical text would double with each level: refused at the size limit, promptly", () => {
    let shared: Record<string, unknown> = { leaf: "x".repeat(10) }
    for (let i = 0; i < 60; i++) shared = { a: shared, b: shared }
    expect(outcome({ id: "c1", name: "bash", sessionKey: "s1", args: shared })).toBe("refused")
    const wide = Either.getOrThrow(Limits.callLimits({ maxDepth: 1000 }))
    expect(outcome({ id: "c1", name: "bash", sessionKey: "s1", args: shared }, wide)).toBe("refused")
  })

  test("cycles are refused, through objects and arrays", () => {
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic.self = cyclic
    const list: Array<unknown> = [1]
    list.push({ list })
    for (const args of [cyclic, { list }]) {
      expect(outcome({ id: "c1", name: "bash", sessionKey: "s1", args })).toBe("refused")
      expect(Either.isLeft(ToolCall.decodeArgs(args))).toBe(true)
      expect(Either.isLeft(response(args))).toBe(true)
    }
  })
})
