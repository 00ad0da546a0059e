import { Limits, ToolCall } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Effect, Either, FastCheck as fc, Schema } from "effect"

const bySchema = Schema.decodeUnknownEither(ToolCall.schema(Limits.defaultCallLimits))

class NotPlain {
  readonly x = 1
}

/** Strings with what the rules are about: controls, lone surrogates, pairs, RTL marks, U+2028, NUL */
const oddChar = fc.constantFrom(
  "\u0000",
  "\u0009",
  "\n",
  "\u001b",
  "\u007f",
  "\u0085",
  "\u009f",
  "\u00a0",
  "\u200f",
  "\u202e",
  "\u2028",
  "\ud800",
  "\udfff",
  "\ud83d\ude00",
  "\ufeff",
  " "
)
const oddString = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.array(fc.oneof(fc.string({ maxLength: 3 }), oddChar), { maxLength: 5 }).map((parts) => parts.join(""))
)
// mostly valid, so that whole calls are accepted often enough to compare values
const idish = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom("c1", "s-1", "ok id", "y".repeat(9), "\u05e9\u200f\ud83d\ude00") },
  fc.constantFrom("", " padded", "tab\t", "x".repeat(256), "x".repeat(257)),
  oddString,
  fc.integer()
)
const optionalText = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(undefined, "", "a b", "/tmp/\u2028") },
  oddString,
  fc.integer(),
  fc.constant("d".repeat(4097))
)

/** `[[...[leaf]...]]` or `{ a: { a: ... } }`, built without recursion */
const nestedArb = fc.tuple(fc.integer({ min: 1, max: 80 }), fc.boolean()).map(([levels, asArray]) => {
  let value: unknown = "leaf"
  for (let i = 0; i < levels; i++) value = asArray ? [value] : { a: value }
  return value
})
const argValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  oddString,
  nestedArb,
  fc.constantFrom(
    Number.NaN,
    Number.POSITIVE_INFINITY,
    undefined,
    [1, undefined],
    () => 1,
    10n,
    new Date(0),
    new Map(),
    new NotPlain(),
    JSON.parse(`{"__proto__": {"x": 1}}`),
    "x".repeat(300)
  )
)
const argKey = fc.oneof(fc.string({ maxLength: 6 }), oddString, fc.constant("__proto__"))
/** objects built with JSON.parse, so that a `__proto__` key is an own key as it would be from the wire */
const args = fc.oneof(
  { weight: 4, arbitrary: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) },
  fc.constant(undefined),
  fc.dictionary(argKey, argValue, { maxKeys: 4 }),
  fc.dictionary(fc.string(), fc.dictionary(argKey, argValue, { maxKeys: 3 }), { maxKeys: 3 }),
  fc.dictionary(argKey, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map((o) => JSON.parse(JSON.stringify(o))),
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
/** small limits, so that every one of them is hit */
const limitsArb = fc.record({
  maxIdLength: fc.integer({ min: 1, max: 12 }),
  maxPathLength: fc.integer({ min: 1, max: 12 }),
  maxArgsBytes: fc.integer({ min: 2, max: 400 }),
  maxDepth: fc.integer({ min: 1, max: 6 })
})

describe("ToolCall.decode", () => {
  test("accepts exactly what the ToolCall schema accepts, with the same value (fast path included)", () => {
    let accepted = 0
    fc.assert(
      fc.property(candidate, (input) => {
        const ours = Effect.runSync(Effect.either(ToolCall.decode(input)))
        const schema = bySchema(input)
        expect(Either.isRight(ours)).toBe(Either.isRight(schema))
        if (Either.isRight(ours) && Either.isRight(schema)) {
          accepted++
          expect(ours.right).toEqual(schema.right)
        }
      }),
      { numRuns: 3000 }
    )
    expect(accepted).toBeGreaterThan(200)
  })

  test("under any limits, accepts exactly what the schema under those limits accepts", () => {
    let accepted = 0
    fc.assert(
      fc.property(candidate, limitsArb, (input, limits) => {
        const ours = Effect.runSync(Effect.either(ToolCall.decode(input, limits)))
        const schema = Schema.decodeUnknownEither(ToolCall.schema(limits))(input)
        expect(Either.isRight(ours)).toBe(Either.isRight(schema))
        if (Either.isRight(ours) && Either.isRight(schema)) {
          accepted++
          expect(ours.right).toEqual(schema.right)
        }
      }),
      { numRuns: 3000 }
    )
    expect(accepted).toBeGreaterThan(50)
  })

  test("what decode accepts is plain JSON any store keeps: decoding it again gives it back", () => {
    fc.assert(
      fc.property(candidate, (input) => {
        const ours = Effect.runSync(Effect.either(ToolCall.decode(input)))
        if (Either.isLeft(ours)) return
        const canonical = ToolCall.canonicalArgs(ours.right.args)
        expect(canonical).not.toContain("\\u0000")
        expect(JSON.parse(canonical)).toEqual(ours.right.args)
        expect(Effect.runSync(ToolCall.decode(ours.right))).toEqual(ours.right)
      }),
      { numRuns: 1000 }
    )
  })

  test("a -0 in the arguments is decoded as 0, what JSON and so every store keep", () => {
    const call = Effect.runSync(
      ToolCall.decode({ id: "c1", name: "t", sessionKey: "s", args: { n: -0, list: [1, -0], deep: { m: -0 } } })
    )
    expect(Object.is(call.args.n, 0)).toBe(true)
    expect(Object.is((call.args.list as Array<number>)[1], 0)).toBe(true)
    expect(Object.is((call.args.deep as { m: number }).m, 0)).toBe(true)
    expect(ToolCall.canonicalArgs(call.args)).toBe(`{"deep":{"m":0},"list":[1,0],"n":0}`)
    const edited = Either.getOrThrow(ToolCall.decodeArgs({ x: -0 }))
    expect(Object.is(edited.x, 0)).toBe(true)
  })

  test("names every problem with its path", () => {
    const result = Effect.runSync(Effect.either(ToolCall.decode({ id: "", name: 3, args: { n: Number.NaN } })))
    expect(Either.isLeft(result)).toBe(true)
    const paths = Either.getLeft(result).pipe((e) => (e._tag === "Some" ? e.value.problems.map((p) => p.path) : []))
    expect(paths).toEqual(expect.arrayContaining(["id", "name", "sessionKey", "args.n"]))
  })

  test("canonical args are the JSON of the value with keys sorted at every depth (any Unicode)", () => {
    // an oracle written apart from the implementation (recursive: the values are shallow), keys in
    // code-unit order (an object would put integer-like keys first)
    const sorted = (v: unknown): string =>
      Array.isArray(v)
        ? `[${v.map(sorted).join(",")}]`
        : typeof v === "object" && v !== null
        ? `{${
          Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${sorted((v as Record<string, unknown>)[k])}`).join(
            ","
          )
        }}`
        : JSON.stringify(v)
    const text = fc.oneof(fc.string({ unit: "binary", maxLength: 40 }), oddString)
    fc.assert(
      fc.property(fc.dictionary(text, fc.jsonValue({ maxDepth: 3, stringUnit: "binary" }), { maxKeys: 5 }), (raw) => {
        const args = JSON.parse(JSON.stringify(raw)) as Record<string, unknown>
        expect(ToolCall.canonicalArgs(args)).toBe(sorted(args))
      }),
      { numRuns: 2000 }
    )
  })

  test("canonical args ignore key order at every depth; the digest follows", () => {
    const a = { b: [1, { y: 2, x: 1 }], a: "t" }
    const b = { a: "t", b: [1, { x: 1, y: 2 }] }
    expect(ToolCall.canonicalArgs(a)).toBe("{\"a\":\"t\",\"b\":[1,{\"x\":1,\"y\":2}]}")
    expect(ToolCall.argsDigest(a)).toBe(ToolCall.argsDigest(b))
    expect(ToolCall.argsDigest({ ...a, a: "u" })).not.toBe(ToolCall.argsDigest(a))
  })
})

describe("per-gate limits", () => {
  const paths = (result: Either.Either<unknown, { readonly problems: ReadonlyArray<{ readonly path: string }> }>) =>
    Either.isLeft(result) ? result.left.problems.map((p) => p.path) : []
  const decode = (input: unknown, limits?: Limits.CallLimits) =>
    Effect.runSync(Effect.either(ToolCall.decode(input, limits)))

  test("Limits.callLimits fills in the defaults and refuses values out of range", () => {
    expect(Either.getOrThrow(Limits.callLimits())).toEqual(Limits.defaultCallLimits)
    expect(Limits.defaultCallLimits).toEqual({
      maxIdLength: 256,
      maxPathLength: 4096,
      maxArgsBytes: 1_000_000,
      maxDepth: 64
    })
    expect(Either.getOrThrow(Limits.callLimits({ maxDepth: 8 }))).toEqual({ ...Limits.defaultCallLimits, maxDepth: 8 })
    for (
      const bad of [
        { maxIdLength: 401 },
        { maxIdLength: 0 },
        { maxDepth: 1001 },
        { maxArgsBytes: 64 * 1024 * 1024 + 1 },
        { maxPathLength: 1.5 },
        { maxDepth: Number.POSITIVE_INFINITY }
      ]
    ) {
      expect(Either.isLeft(Limits.callLimits(bad))).toBe(true)
    }
  })

  test("a gate's limits are applied, lower or higher than the defaults", () => {
    const strict = Either.getOrThrow(
      Limits.callLimits({ maxIdLength: 4, maxPathLength: 3, maxArgsBytes: 20, maxDepth: 2 })
    )
    const call = { id: "c1", name: "bash", sessionKey: "s1" }
    expect(Either.isRight(decode({ ...call, args: { a: [1] } }, strict))).toBe(true)
    expect(paths(decode({ ...call, args: { a: [[1]] } }, strict))).toEqual(["args.a.0"])
    expect(paths(decode({ ...call, args: { a: "x".repeat(13) } }, strict))).toEqual(["args"])
    expect(paths(decode({ ...call, id: "c1234" }, strict))).toEqual(["id"])
    expect(paths(decode({ ...call, agentId: "abcde" }, strict))).toEqual(["agentId"])
    expect(paths(decode({ ...call, workingDirectory: "/tmp" }, strict))).toEqual(["workingDirectory"])

    const loose = Either.getOrThrow(Limits.callLimits({ maxArgsBytes: 3_000_000, maxDepth: 200, maxIdLength: 400 }))
    const big = { ...call, id: "i".repeat(400), args: { a: "x".repeat(2_000_000) } }
    expect(Either.isLeft(decode(big))).toBe(true)
    expect(Either.isRight(decode(big, loose))).toBe(true)
  })

  test("decodeArgs checks an approver's edit under the gate's limits, naming the path under editedArgs", () => {
    const strict = Either.getOrThrow(Limits.callLimits({ maxDepth: 2 }))
    expect(Either.getOrThrow(ToolCall.decodeArgs({ a: 1, b: undefined }))).toStrictEqual({ a: 1 })
    expect(Either.getLeft(ToolCall.decodeArgs({ a: [[1]] }, { limits: strict, path: "editedArgs" }))).toEqual(
      expect.objectContaining({ value: [{ path: "editedArgs.a.0", message: "must be nested at most 2 levels deep" }] })
    )
    expect(Either.isLeft(ToolCall.decodeArgs(JSON.parse(`{"__proto__": 1}`)))).toBe(true)
    expect(Either.isLeft(ToolCall.decodeArgs("ls"))).toBe(true)
  })

  test("decodeSessionKey applies a call's session-key rules to a key given on its own", () => {
    expect<string>(Either.getOrThrow(ToolCall.decodeSessionKey("team-b"))).toBe("team-b")
    for (const bad of ["team-b\ud800", "a\u0000b", "", " s", "x".repeat(257), 7]) {
      const result = ToolCall.decodeSessionKey(bad)
      expect(Either.isLeft(result) && result.left._tag).toBe("InvalidToolCall")
    }
  })
})
