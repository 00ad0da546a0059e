/**
 * What the server says about requests its router does not take (internal/routing.ts): the depth
 * scan agrees with the nesting of any JSON value, strings full of brackets and escapes included;
 * repeated query parameters are found by name; an unrouted request is told apart as a wrong
 * method, an unreadable parameter or no route. The end-to-end rows are in bad-inputs.test.ts.
 */
import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import * as Routing from "../../packages/server/src/internal/routing.js"

const depthOf = (value: unknown): number =>
  Array.isArray(value)
    ? 1 + Math.max(0, ...value.map(depthOf))
    : value !== null && typeof value === "object"
    ? 1 + Math.max(0, ...Object.values(value).map(depthOf))
    : 0

// strings made of the characters the scan must not count: brackets, quotes and backslashes
const tricky = fc.string({ unit: fc.constantFrom("[", "]", "{", "}", "\"", "\\", "a", ":", ",") })
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    tricky,
    fc.integer(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(tricky, tie("value"), { maxKeys: 3 })
  )
})).value

describe("routing", () => {
  test("nestsDeeperThan agrees with the value's nesting, whatever its strings hold", () => {
    let nested = 0
    fc.assert(
      fc.property(json, fc.nat({ max: 6 }), (value, max) => {
        const depth = depthOf(value)
        if (depth > 1) nested++
        expect(Routing.nestsDeeperThan(JSON.stringify(value), max)).toBe(depth > max)
      }),
      { numRuns: 2_000 }
    )
    // the generator makes nested values, not only flat ones
    expect(nested).toBeGreaterThan(200)
  })

  test("repeatedParameter names the first parameter given twice, and how often", () => {
    expect(Routing.repeatedParameter("/audit")).toBeUndefined()
    expect(Routing.repeatedParameter("/audit?limit=1&afterSeq=2")).toBeUndefined()
    expect(Routing.repeatedParameter("/audit?limit=1&outcome=deny&limit=1&limit=3")).toEqual({
      name: "limit",
      times: 3
    })
    expect(Routing.repeatedParameter("/audit?since=1&%73ince=2")).toEqual({ name: "since", times: 2 })
  })

  test("an unrouted request: another method, an unreadable parameter, or no route", () => {
    const diagnose = Routing.make([
      { method: "GET", path: "/approvals/pending" },
      { method: "GET", path: "/approvals/:requestId" },
      { method: "POST", path: "/approvals/:requestId/respond" },
      { method: "DELETE", path: "/sessions/:sessionKey/approvals" },
      { method: "GET", path: "/sessions/:sessionKey/approvals" }
    ])
    expect(diagnose("PUT", "/approvals/pending?x=1")).toEqual({ _tag: "MethodNotAllowed", allow: ["GET", "HEAD"] })
    expect(diagnose("DELETE", "/approvals/x/respond")).toEqual({ _tag: "MethodNotAllowed", allow: ["POST"] })
    expect(diagnose("POST", "/sessions/s1/approvals")).toEqual({
      _tag: "MethodNotAllowed",
      allow: ["DELETE", "GET", "HEAD"]
    })
    expect(diagnose("GET", "/approvals/a%ZZ")).toEqual({
      _tag: "BadPathParameter",
      name: "requestId",
      problem: "is not valid percent-encoding"
    })
    expect(diagnose("POST", `/approvals/${"x".repeat(101)}/respond`)).toEqual({
      _tag: "BadPathParameter",
      name: "requestId",
      problem: "is longer than 100 characters"
    })
    expect(diagnose("GET", "/approvals/")).toEqual({ _tag: "NotFound" })
    expect(diagnose("GET", "/Approvals/pending")).toEqual({ _tag: "NotFound" })
  })
})
