/**
 * Every store accepts or refuses the same calls (issue 10, "Low": ids and arguments): through
 * `ToolGate.layer` over the memory store, SQLite and PostgreSQL, a call the gate refuses is
 * `InvalidToolCall` and changes nothing; a call it accepts is stored and read back (by a second
 * store on the same database, as another process would) with the same canonical arguments.
 */
import { ApprovalStore, PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { expect, test } from "bun:test"
import { Effect, Either, FastCheck as fc, Layer, type Scope } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { postgresUrl } from "../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../support/sqlStores.js"

const policy = Policy.unsafeMake({ default: "requireApproval" })

type Gate = Layer.Layer<ToolGate.ToolGate | ApprovalStore.ApprovalStore, unknown>

/** A writer and a reader over one database: the reader is a second store, with nothing cached. */
interface Stores {
  readonly name: string
  readonly open: Effect.Effect<{ readonly writer: Gate; readonly reader: Gate }, never, Scope.Scope>
}

const gateOver = (store: Layer.Layer<ApprovalStore.ApprovalStore, unknown>): Gate =>
  Layer.merge(ToolGate.layer({ policy }).pipe(Layer.provide(store)), store)

let channel = 0

const stores: Array<Stores> = [
  {
    name: "memory",
    open: Effect.sync(() => {
      const gate = gateOver(ApprovalStore.layerMemory)
      return { writer: gate, reader: gate }
    })
  },
  {
    name: "sqlite",
    open: Effect.map(tempDir, (dir) => {
      const file = join(dir, "toolgate.db")
      return { writer: gateOver(storeOver(sqliteClient(file))), reader: gateOver(storeOver(sqliteClient(file))) }
    })
  }
]
const url = postgresUrl("store-parity tests")
if (url !== undefined) {
  stores.push({
    name: "postgres",
    open: Effect.map(pgSchema(url), (schemaUrl) => ({
      writer: gateOver(pgStoreOver(pgClient(schemaUrl), `toolgate_inputs_${channel++}`)),
      reader: gateOver(pgStoreOver(pgClient(schemaUrl), `toolgate_inputs_${channel++}`))
    }))
  })
}

/** Builds a layer in the current scope; its services, to provide to an effect. */
const build = (layer: Gate) => Effect.orDie(Layer.build(layer))

/** The writer's and the reader's services (one and the same for the memory store). */
const buildBoth = (open: Stores["open"]) =>
  Effect.gen(function*() {
    const { reader, writer } = yield* open
    const services = yield* build(writer)
    return { services, readerServices: reader === writer ? services : yield* build(reader) }
  })

/** Everything the store holds that a refused call must not have changed (a refusal may be audited). */
const snapshot = Effect.gen(function*() {
  const store = yield* ApprovalStore.ApprovalStore
  return {
    events: (yield* store.events()).filter((e) => e.type !== "call.refused").map((e) => e.seq),
    pending: (yield* store.listPending()).map((r) => r.requestId)
  }
})

/** `[[...[leaf]...]]`, built without recursion */
const nested = (levels: number, leaf: unknown = 1): unknown => {
  let value = leaf
  for (let i = 0; i < levels; i++) value = [value]
  return value
}

const refusedCalls: Array<[string, Record<string, unknown>]> = [
  ["a lone high surrogate in the session key", { sessionKey: "team-b\ud800" }],
  ["a lone low surrogate in the session key", { sessionKey: "team-b\udc00" }],
  ["NUL in the call id", { id: "c\u0000" }],
  ["NUL in the session key", { sessionKey: "a\u0000b" }],
  ["an escape sequence in the agent id", { agentId: "agent\u001b[2J" }],
  ["a newline in the tool name", { name: "bash\nApproved: yes" }],
  ["a C1 control in the intent id", { intentId: "i\u009b1m" }],
  ["a 257-unit call id", { id: "x".repeat(257) }],
  ["an own __proto__ argument", { args: JSON.parse(`{"__proto__": {"isAdmin": true}}`) }],
  ["a nested own __proto__ argument", { args: JSON.parse(`{"a": [{"__proto__": 1}]}`) }],
  ["U+0000 in an argument", { args: { command: "ls\u0000" } }],
  ["U+0000 in an argument key", { args: { ["k\u0000"]: 1 } }],
  ["a lone surrogate in an argument", { args: { path: "/tmp/\udfff" } }],
  ["65 levels of nesting", { args: { a: nested(64) } }],
  ["100,000 levels of nesting", { args: { a: nested(100_000) } }],
  ["10 MB of arguments", { args: { content: "x".repeat(10_000_000) } }],
  ["undefined inside an array", { args: { list: ["a", undefined] } }]
]

for (const { name, open } of stores) {
  describe(`call inputs on the ${name} store`, () => {
    for (const [what, fields] of refusedCalls) {
      it.scoped(`${what} is InvalidToolCall and changes nothing`, () =>
        Effect.gen(function*() {
          const { readerServices, services } = yield* buildBoth(open)
          yield* Effect.gen(function*() {
            const gate = yield* ToolGate.ToolGate
            const requireApproval = yield* gate.evaluate({ id: "probe", name: "bash", sessionKey: "s1" })
            const before = yield* snapshot
            const input = { id: "c1", name: "bash", sessionKey: "s1", args: {}, ...fields }
            const attempts: Array<Effect.Effect<unknown, { readonly _tag: string }>> = [
              gate.authorize(input),
              gate.evaluate(input)
            ]
            for (const attempt of attempts) {
              const result = yield* Effect.either(attempt)
              if (Either.isRight(result)) throw new Error(`expected InvalidToolCall, got ${String(result.right)}`)
              expect(result.left._tag).toBe("InvalidToolCall")
            }
            const created = yield* Effect.either(gate.createApprovalRequest(requireApproval, input))
            expect(Either.isLeft(created) && created.left._tag).toBe("InvalidToolCall")
            expect(yield* snapshot).toEqual(before)
          }).pipe(Effect.provide(services))
          const pending = yield* Effect.provide(
            ToolGate.ToolGate.pipe(Effect.flatMap((g) => g.pending())),
            readerServices
          )
          expect(pending).toHaveLength(0)
        }))
    }

    it.scoped("a request of session team-b\\ud800 is never listed for team-b\\udc00", () =>
      Effect.gen(function*() {
        const { readerServices, services } = yield* buildBoth(open)
        yield* Effect.ignore(
          Effect.provide(
            Effect.flatMap(
              ToolGate.ToolGate,
              (g) => g.authorize({ id: "c1", name: "bash", sessionKey: "team-b\ud800" })
            ),
            services
          )
        )
        const listed = yield* Effect.provide(
          Effect.flatMap(ToolGate.ToolGate, (g) => g.pending({ sessionKey: "team-b\udc00" as never })),
          readerServices
        )
        expect(listed).toHaveLength(0)
      }))

    it.scoped("edited arguments a store cannot keep alike are InvalidResponse; the request stays pending", () =>
      Effect.gen(function*() {
        const { services } = yield* buildBoth(open)
        yield* Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = yield* gate.authorize({ id: "c1", name: "bash", sessionKey: "s1", args: { command: "ls" } })
          if (!PauseSignal.isPauseSignal(pause)) throw new Error("expected a pause")
          for (
            const editedArgs of [
              { command: "ls\u0000" },
              JSON.parse(`{"__proto__": {"command": "rm -rf /"}}`),
              { command: "\ud800" },
              { list: [undefined] }
            ]
          ) {
            const result = yield* Effect.either(gate.respond(pause.requestId, { decision: "approve_once", editedArgs }))
            expect(Either.isLeft(result) && result.left._tag).toBe("InvalidResponse")
          }
          expect((yield* gate.getRequest(pause.requestId)).status).toBe("pending")
        }).pipe(Effect.provide(services))
      }))

    // `Schema.optional(ToolArgs)` added an `undefined` member whose refusal quoted the value, which
    // overflowed the stack; `editedArgs` is now exact-optional.
    test(`edited arguments nested 100,000 levels deep are InvalidResponse (${name})`, () =>
      Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const { services } = yield* buildBoth(open)
        yield* Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = yield* gate.authorize({ id: "c1", name: "bash", sessionKey: "s1", args: { command: "ls" } })
          if (!PauseSignal.isPauseSignal(pause)) throw new Error("expected a pause")
          const editedArgs = { a: nested(100_000) }
          const result = yield* Effect.either(gate.respond(pause.requestId, { decision: "approve_once", editedArgs }))
          expect(Either.isLeft(result) && result.left._tag).toBe("InvalidResponse")
          expect((yield* gate.getRequest(pause.requestId)).status).toBe("pending")
        }).pipe(Effect.provide(services))
      }))))
  })
}

// Accepted edge cases and generated calls -----------------------------------------------------------

// any code point but U+0000 (refused, above); "binary" never yields a lone surrogate
const oddText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }).map((s) => s.replaceAll("\u0000", "\u0001")),
  fc.constantFrom(
    "\u200f\u202eevil\u202c",
    "line\u2028sep\u2029",
    "\ud83d\ude00 pair",
    "tab\there\nnewline\u001b[0m\u007f\u0085",
    "\ufeffbom",
    "\u00e9\u4e2d\u0301"
  )
)
const argValue = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    oddText,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(oddText, tie("value"), { maxKeys: 3 })
  )
})).value
const argsArb = fc.dictionary(
  oddText.filter((k) => k !== "__proto__"),
  fc.oneof({ weight: 4, arbitrary: argValue }, { weight: 1, arbitrary: fc.constant(undefined) }),
  { maxKeys: 4 }
)
// Ids at the length limit, of 3-byte characters that do not compress: the widest index entries
const idText = fc.oneof(
  fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 20 }).filter((s) => s.trim() === s && s.length > 0),
  fc.array(fc.integer({ min: 0x4e00, max: 0x9fff }), { minLength: 256, maxLength: 256 }).map((cs) =>
    String.fromCharCode(...cs)
  )
)

const edgeCases: Array<Record<string, unknown>> = [
  { recursive: undefined, path: "/tmp", opts: { force: undefined } },
  { a: nested(63) },
  { content: "x".repeat(1_000_000 - 14) },
  { rtl: "\u202erm -rf /\u202c", sep: "a\u2028b", emoji: "\ud83d\ude00", controls: "\u0001\u001f\u007f\u009f" },
  { "\ud83d\ude00": { "": [] }, "a.b": null, constructor: 1, prototype: { toString: "x" } }
]

for (const { name, open } of stores) {
  describe(`stored arguments on the ${name} store`, () => {
    it.scoped(
      "edge cases that decode accepts are stored and read back with the same canonical arguments",
      () =>
        Effect.gen(function*() {
          const { readerServices, services } = yield* buildBoth(open)
          for (const [i, args] of edgeCases.entries()) {
            const input = { id: `edge-${i}`, name: "bash", sessionKey: "s1", args }
            const expected = ToolCall.canonicalArgs(Effect.runSync(ToolCall.decode(input)).args)
            const pause = yield* Effect.provide(Effect.flatMap(ToolGate.ToolGate, (g) => g.authorize(input)), services)
            if (!PauseSignal.isPauseSignal(pause)) throw new Error("expected a pause")
            const read = yield* Effect.provide(
              Effect.flatMap(ToolGate.ToolGate, (g) => g.getRequest(pause.requestId)),
              readerServices
            )
            expect(ToolCall.canonicalArgs(read.toolCall.args)).toBe(expected)
            expect(read.argsDigest).toBe(ToolCall.argsDigest(read.toolCall.args))
          }
        }),
      60_000
    )

    it.scoped(
      "generated valid calls are stored and read back with the same canonical arguments and ids",
      () =>
        Effect.gen(function*() {
          const { readerServices, services } = yield* buildBoth(open)
          let n = 0
          let checked = 0
          yield* Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(argsArb, idText, idText, async (args, sessionKey, id) => {
                const input = { id: `${n++}-${id}`.slice(0, 256), name: "bash", sessionKey, args }
                const decoded = Effect.runSync(Effect.either(ToolCall.decode(input)))
                if (Either.isLeft(decoded)) throw new Error(`generated a call decode refuses: ${decoded.left.message}`)
                const read = await Effect.runPromise(
                  Effect.gen(function*() {
                    const pause = yield* Effect.provide(
                      Effect.flatMap(ToolGate.ToolGate, (g) => g.authorize(input)),
                      services
                    )
                    if (!PauseSignal.isPauseSignal(pause)) throw new Error("expected a pause")
                    const listed = yield* Effect.provide(
                      Effect.flatMap(
                        ToolGate.ToolGate,
                        (g) => g.pending({ sessionKey: ToolCall.SessionKey.make(sessionKey) })
                      ),
                      readerServices
                    )
                    return listed.find((r) => r.requestId === pause.requestId)
                  })
                )
                expect(read).toBeDefined()
                expect(read!.toolCall.id).toBe(decoded.right.id)
                expect(read!.toolCall.sessionKey).toBe(decoded.right.sessionKey)
                expect(ToolCall.canonicalArgs(read!.toolCall.args)).toBe(ToolCall.canonicalArgs(decoded.right.args))
                checked++
              }),
              { numRuns: name === "memory" ? 300 : 60 }
            )
          )
          expect(checked).toBeGreaterThanOrEqual(60)
        }),
      120_000
    )
  })
}
