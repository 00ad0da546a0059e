/**
 * The MCP gateway's check of a call's arguments against its tool's input schema: the dialect each
 * `$schema` names, schemas that cannot be used (their tool refuses every call), values never
 * changed by the check, and patterns that run in linear time whatever text the model sends.
 */
import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import * as InputSchemas from "../../../packages/mcp/src/internal/inputSchemas.js"

const compiled = (schema: unknown) => {
  const validator = InputSchemas.compile(schema)
  if (validator._tag !== "Compiled") throw new Error(`expected a compiled schema, got: ${validator.reason}`)
  return validator.check
}

const object = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  type: "object",
  properties,
  ...extra
})

describe("input schemas", () => {
  test("valid and invalid arguments, with the failing path and the unexpected key named", () => {
    const check = compiled(object({ path: { type: "string" } }, { required: ["path"], additionalProperties: false }))
    expect(check({ path: "a.txt" })).toEqual({ _tag: "Valid" })
    const wrong = check({ path: 3 })
    expect(wrong._tag).toBe("Invalid")
    expect(wrong._tag === "Invalid" && wrong.problems[0]).toBe("arguments.path must be string")
    const extra = check({ path: "a", mode: "append" })
    expect(extra._tag === "Invalid" && extra.problems[0]).toContain("(mode)")
    expect(check({})._tag).toBe("Invalid")
  })

  test("no $schema is JSON Schema 2020-12; draft-07 and 2019-09 get their own dialect", () => {
    // prefixItems exists in 2020-12 only; `items` as an array is draft-07's tuple
    const tuple2020 = compiled(
      object({ pair: { type: "array", prefixItems: [{ type: "string" }, { type: "number" }] } })
    )
    expect(tuple2020({ pair: ["a", 1] })._tag).toBe("Valid")
    expect(tuple2020({ pair: [1, "a"] })._tag).toBe("Invalid")
    const tuple07 = compiled({
      $schema: "http://json-schema.org/draft-07/schema#",
      ...object({ pair: { type: "array", items: [{ type: "string" }, { type: "number" }] } })
    })
    expect(tuple07({ pair: ["a", 1] })._tag).toBe("Valid")
    expect(tuple07({ pair: [1, "a"] })._tag).toBe("Invalid")
    const in2019 = compiled({
      $schema: "https://json-schema.org/draft/2019-09/schema",
      ...object({ n: { type: "integer" } })
    })
    expect(in2019({ n: 1.5 })._tag).toBe("Invalid")
  })

  test("a schema that cannot check anything makes its tool refuse every call, with why", () => {
    const reasons = [
      InputSchemas.compile(undefined),
      InputSchemas.compile([]),
      InputSchemas.compile({ $schema: "http://json-schema.org/draft-04/schema#", type: "object" }),
      InputSchemas.compile({ $schema: 7, type: "object" }),
      InputSchemas.compile({ type: "object", properties: { a: { type: "nonsense" } } }),
      InputSchemas.compile(object({ a: { type: "string", pattern: "(?=x)y" } }))
    ].map((validator) => (validator._tag === "Unusable" ? validator.reason : "compiled"))
    expect(reasons[0]).toContain("not a JSON object")
    expect(reasons[1]).toContain("not a JSON object")
    expect(reasons[2]).toContain("unsupported dialect")
    expect(reasons[3]).toContain("unsupported dialect")
    expect(reasons[4]).toContain("does not compile")
    expect(reasons[5]).toContain("does not compile")
  })

  test("formats are checked", () => {
    const check = compiled(object({ when: { type: "string", format: "date-time" } }))
    expect(check({ when: "2026-11-28T01:00:00Z" })._tag).toBe("Valid")
    expect(check({ when: "yesterday" })._tag).toBe("Invalid")
  })

  test("checking never changes the value: no defaults filled in, no coercion, nothing removed", () => {
    const check = compiled(object({
      a: { type: "integer", default: 7 },
      b: { type: "string", default: "x" },
      nested: object({ c: { type: "boolean", default: true } }, { additionalProperties: false })
    }, { additionalProperties: false }))
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, rest) => {
        const args = { a, nested: { c: rest } }
        const before = JSON.stringify(args)
        check(args)
        return JSON.stringify(args) === before
      }),
      { numRuns: 300 }
    )
    const sparse = { nested: {} }
    expect(check(sparse)._tag).toBe("Valid")
    expect(sparse).toEqual({ nested: {} })
  })

  test("a backtracking pattern of a server's schema runs in linear time on the model's text", () => {
    const check = compiled(object({ name: { type: "string", pattern: "^(a+)+$" } }))
    expect(check({ name: "aaaa" })._tag).toBe("Valid")
    // catastrophic for a backtracking engine (2^n steps); RE2 answers at once
    expect(check({ name: `${"a".repeat(50_000)}b` })._tag).toBe("Invalid")
    const keys = compiled({ type: "object", patternProperties: { "^(x+)+$": { type: "number" } } })
    expect(keys({ [`${"x".repeat(50_000)}y`]: "not checked: no pattern matches" })._tag).toBe("Valid")
    expect(keys({ xx: "a string" })._tag).toBe("Invalid")
  })
})
