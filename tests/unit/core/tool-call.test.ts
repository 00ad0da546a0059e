import { describe, expect, test } from "bun:test"
import { Effect, Either, FastCheck as fc, Schema } from "effect"
import { ToolCall } from "@tool-gate/core"

const bySchema = Schema.decodeUnknownEither(ToolCall.ToolCall)

class NotPlain {
  readonly x = 1
}

const idish = fc.oneof(fc.constantFrom("c1", "s-1", "", " padded", "tab\t", "ok id"), fc.string(), fc.integer())
const optionalText = fc.oneof(fc.constant(undefined), fc.string(), fc.integer())
const argValue = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, undefined, () => 1, 10n, new Date(0), new Map(), new NotPlain())
)
const args = fc.oneof(
  fc.constant(undefined),
  fc.dictionary(fc.string(), argValue, { maxKeys: 4 }),
  fc.dictionary(fc.string(), fc.dictionary(fc.string(), argValue, { maxKeys: 3 }), { maxKeys: 3 }),
  fc.constantFrom("ls", [1, 2], null, new NotPlain())
)
const candidate = fc.record(
  {
    id: idish,
    name: idish,
    sessionKey: idish,
    args,
    agentId: optionalText,
    intentId: optionalText,
    userId: optionalText,
    workingDirectory: optionalText
  },
  { requiredKeys: [] }
)

describe("ToolCall.decode", () => {
  test("accepts exactly what the ToolCall schema accepts, with the same value (fast path included)", () => {
    fc.assert(
      fc.property(candidate, (input) => {
        const ours = Effect.runSync(Effect.either(ToolCall.decode(input)))
        const schema = bySchema(input)
        expect(Either.isRight(ours)).toBe(Either.isRight(schema))
        if (Either.isRight(ours) && Either.isRight(schema)) expect(ours.right).toEqual(schema.right)
      }),
      { numRuns: 3000 }
    )
  })

  test("names every problem with its path", () => {
    const result = Effect.runSync(Effect.either(ToolCall.decode({ id: "", name: 3, args: { n: Number.NaN } })))
    expect(Either.isLeft(result)).toBe(true)
    const paths = Either.getLeft(result).pipe((e) => (e._tag === "Some" ? e.value.problems.map((p) => p.path) : []))
    expect(paths).toEqual(expect.arrayContaining(["id", "name", "sessionKey", "args.n"]))
  })

  test("canonical args ignore key order at every depth; the digest follows", () => {
    const a = { b: [1, { y: 2, x: 1 }], a: "t" }
    const b = { a: "t", b: [1, { x: 1, y: 2 }] }
    expect(ToolCall.canonicalArgs(a)).toBe('{"a":"t","b":[1,{"x":1,"y":2}]}')
    expect(ToolCall.argsDigest(a)).toBe(ToolCall.argsDigest(b))
    expect(ToolCall.argsDigest({ ...a, a: "u" })).not.toBe(ToolCall.argsDigest(a))
  })
})
