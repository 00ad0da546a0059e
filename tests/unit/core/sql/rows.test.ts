/**
 * The store's row codecs: the hand-picked JSON equals what the entity Schemas encode, and the
 * decode cache returns what the Schemas decode. These properties are what allow the store to skip
 * `Schema.encode` on write and, for text this process wrote, `Schema.decode` on read.
 */
import { describe, expect, test } from "bun:test"
import { ApprovalRequest, AuditEvent, SessionApproval } from "@tool-gate/core"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import * as Rows from "../../../../packages/core/src/internal/sqlRows.js"

const entities: ReadonlyArray<readonly [string, Schema.Schema<any, any>, (codecs: Rows.Codecs) => Rows.Codec<any>]> = [
  ["ApprovalRequest", ApprovalRequest.ApprovalRequest, (codecs) => codecs.request],
  ["UnsequencedEvent", AuditEvent.UnsequencedEvent, (codecs) => codecs.event],
  ["SessionApproval", SessionApproval.SessionApproval, (codecs) => codecs.approval]
]

const runs = { numRuns: 300 }

describe("SQL row codecs", () => {
  for (const [name, S, codecOf] of entities) {
    const arbitrary = Arbitrary.make(S)
    const encode = Schema.encodeSync(S)
    const decodeJson = Schema.decodeUnknownEither(Schema.parseJson(S))

    test(`${name}: JSON.parse(JSON.stringify(x)) deep-equals Schema.encode(x)`, () => {
      fc.assert(
        fc.property(arbitrary, (x) => {
          expect(JSON.parse(JSON.stringify(x))).toEqual(JSON.parse(JSON.stringify(encode(x))))
        }),
        runs
      )
    })

    test(`${name}: the written text is exactly what Schema.encode + JSON.stringify gives`, () => {
      const codec = codecOf(Rows.makeCodecs())
      fc.assert(
        fc.property(arbitrary, (x) => {
          expect(Either.getOrThrow(codec.json(x))).toBe(JSON.stringify(encode(x)))
        }),
        runs
      )
    })

    test(`${name}: reading written text (a cache hit) equals decoding it with the Schema`, () => {
      const codec = codecOf(Rows.makeCodecs())
      fc.assert(
        fc.property(arbitrary, (x) => {
          const text = Either.getOrThrow(codec.json(x))
          const decoded = decodeJson(text)
          const read = codec.read(text)
          // text JSON cannot carry (a non-finite number became null) fails both ways alike
          expect(Either.isRight(read)).toBe(Either.isRight(decoded))
          if (Either.isRight(decoded)) expect(Either.getOrThrow(read)).toStrictEqual(decoded.right)
        }),
        runs
      )
    })

    test(`${name}: text from elsewhere is decoded by the Schema, then cached`, () => {
      const codec = codecOf(Rows.makeCodecs())
      fc.assert(
        fc.property(arbitrary, (x) => {
          // another writer's text: same value, other key order
          const text = JSON.stringify(Object.fromEntries(Object.entries(encode(x)).reverse()))
          const decoded = decodeJson(text)
          const first = codec.read(text)
          expect(Either.isRight(first)).toBe(Either.isRight(decoded))
          if (Either.isRight(decoded)) {
            expect(Either.getOrThrow(first)).toStrictEqual(decoded.right)
            expect(Either.getOrThrow(codec.read(text))).toBe(Either.getOrThrow(first))
          }
        }),
        runs
      )
    })
  }

  test("cached values are frozen, so no caller can change what the next one reads", () => {
    const codec = Rows.makeCodecs().request
    const [x] = fc.sample(Arbitrary.make(ApprovalRequest.ApprovalRequest), { numRuns: 1, seed: 7 })
    const value = Either.getOrThrow(codec.read(Either.getOrThrow(codec.json(x!))))
    expect(Object.isFrozen(value)).toBe(true)
    expect(Object.isFrozen(value.toolCall.args)).toBe(true)
  })

  test("the cache is bounded, least recently used out first", () => {
    const codec = Rows.makeCodecs(3).event
    const event = (n: number): AuditEvent.UnsequencedEvent => ({ at: n, type: "decision", outcome: "allow" })
    const texts = [1, 2, 3].map((n) => Either.getOrThrow(codec.json(event(n))))
    const first = Either.getOrThrow(codec.read(texts[0]!))
    codec.json(event(4)) // evicts event 2, the least recently used
    expect(codec.size()).toBe(3)
    expect(Either.getOrThrow(codec.read(texts[0]!))).toBe(first)
    expect(Either.getOrThrow(codec.read(texts[1]!))).toEqual(event(2)) // decoded again
  })

  test("text that does not decode fails with the Schema's ParseError and is not cached", () => {
    const codec = Rows.makeCodecs().request
    const bad = JSON.stringify({ requestId: "", status: "pending" })
    expect(Either.isLeft(codec.read(bad))).toBe(true)
    expect(Either.isLeft(codec.read("{not json"))).toBe(true)
    expect(codec.size()).toBe(0)
  })
})
