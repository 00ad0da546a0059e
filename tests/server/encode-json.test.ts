/**
 * The handlers' JSON for requests, compiled from the schema instead of a `Schema.encode` per
 * answer: the same text as `Schema.encode` then `JSON.stringify`, on arbitrary requests and lists
 * of them (keys in the schema's order, no key the schema does not name, optional fields left out
 * when absent).
 */
import { ApprovalRequest } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Arbitrary, FastCheck as fc, Schema } from "effect"
import * as EncodeJson from "../../packages/server/src/internal/encodeJson.js"

const viaSchema = <A, I>(schema: Schema.Schema<A, I>) => (value: A) => JSON.stringify(Schema.encodeSync(schema)(value))

/**
 * Valid requests: the args' arbitrary sometimes makes a `__proto__` key, which the args' own check
 * refuses (so `Schema.encode` throws); the compiled JSON is for what the gate wrote, all valid.
 */
const requests = Arbitrary.make(ApprovalRequest.ApprovalRequest).filter(Schema.is(ApprovalRequest.ApprovalRequest))

describe("compiled JSON of requests", () => {
  test("a request and a list of requests: the same text as Schema.encode", () => {
    const one = EncodeJson.compile(ApprovalRequest.ApprovalRequest)
    const many = EncodeJson.compile(Schema.Array(ApprovalRequest.ApprovalRequest))
    fc.assert(
      fc.property(requests, (request) => {
        expect(one(request)).toBe(viaSchema(ApprovalRequest.ApprovalRequest)(request))
      }),
      { numRuns: 500 }
    )
    fc.assert(
      fc.property(fc.array(requests, { maxLength: 5 }), (list) => {
        expect(many(list)).toBe(viaSchema(Schema.Array(ApprovalRequest.ApprovalRequest))(list))
      }),
      { numRuns: 100 }
    )
  })

  test("keys the schema does not name are left out, in the schema's order whatever the object's", () => {
    const [request] = fc.sample(Arbitrary.make(ApprovalRequest.ApprovalRequest), { numRuns: 1, seed: 7 })
    const shuffled = Object.fromEntries([...Object.entries(request!).reverse(), ["internal", "secret"]])
    const text = EncodeJson.compile(ApprovalRequest.ApprovalRequest)(
      shuffled as unknown as ApprovalRequest.ApprovalRequest
    )
    expect(text).toBe(viaSchema(ApprovalRequest.ApprovalRequest)(request!))
    expect(text).not.toContain("secret")
  })

  test("requests compile to a projection: no check runs on the gate's own data", () => {
    const [request] = fc.sample(Arbitrary.make(ApprovalRequest.ApprovalRequest), { numRuns: 1, seed: 7 })
    // an id the brand refuses: Schema.encode would throw; the compiled encoder writes what it has
    const odd = { ...request!, requestId: "" as ApprovalRequest.RequestId }
    expect(() => viaSchema(ApprovalRequest.ApprovalRequest)(odd)).toThrow()
    expect(JSON.parse(EncodeJson.compile(ApprovalRequest.ApprovalRequest)(odd)).requestId).toBe("")
  })

  test("a schema whose encoding changes values falls back to Schema.encode", () => {
    const Timed = Schema.Struct({
      at: Schema.NumberFromString,
      tags: Schema.Record({ key: Schema.String, value: Schema.Number })
    })
    const encode = EncodeJson.compile(Timed)
    expect(encode({ at: 5, tags: { a: 1 } })).toBe("{\"at\":\"5\",\"tags\":{\"a\":1}}")
    expect(() => encode({ at: 5, tags: { a: "x" as unknown as number } })).toThrow()
  })
})
