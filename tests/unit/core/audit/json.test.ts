/**
 * The JSON form of audit events (`AuditEvent.Json`, `toJson`) and the times auditors write
 * (`TimeFromString`, `parseRfc3339`): RFC 3339 read field by field, every event's JSON decoding
 * back to the event, arguments of any shape.
 */
import { AuditEvent, ToolCall } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc, Schema } from "effect"

// 0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z: what four-digit years write
const instant = fc.integer({ min: -62_167_219_200_000, max: 253_402_300_799_999 })
const decodeTime = Schema.decodeEither(AuditEvent.TimeFromString)

describe("RFC 3339 times", () => {
  test("rfc3339 then parseRfc3339 is the identity, and any offset names the same instant", () => {
    fc.assert(
      fc.property(instant, fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }), (at, offsetMinutes) => {
        expect(AuditEvent.parseRfc3339(AuditEvent.rfc3339(at))).toBe(at)
        // the same instant as local time at that offset: 2026-11-24T11:13:31.000+02:00
        const local = new Date(at + offsetMinutes * 60_000).toISOString().slice(0, -1)
        const sign = offsetMinutes < 0 ? "-" : "+"
        const abs = Math.abs(offsetMinutes)
        const offset = `${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`
        const shifted = `${local}${offset}`
        // instants near the ends of the range fall outside four-digit years once shifted
        if (!/^\d{4}-/.test(shifted)) return
        expect({ shifted, at: AuditEvent.parseRfc3339(shifted) }).toEqual({ shifted, at })
      }),
      { numRuns: 2000 }
    )
  })

  test("the forms RFC 3339 allows", () => {
    const at = Date.UTC(2026, 10, 24, 9, 13, 31)
    for (
      const text of [
        "2026-11-24T09:13:31Z",
        "2026-11-24t09:13:31z",
        "2026-11-24 09:13:31Z",
        "2026-11-24T09:13:31.000Z",
        "2026-11-24T09:13:31.0009999Z",
        "2026-11-24T10:13:31+01:00",
        "2026-11-24T09:13:31-00:00",
        "2026-11-24T04:43:31-04:30"
      ]
    ) expect({ text, at: AuditEvent.parseRfc3339(text) }).toEqual({ text, at })
    expect(AuditEvent.parseRfc3339("2026-11-24T09:13:31.5Z")).toBe(at + 500)
    expect(AuditEvent.parseRfc3339("2024-02-29T00:00:00Z")).toBe(Date.UTC(2024, 1, 29))
    expect(AuditEvent.parseRfc3339("2000-02-29T00:00:00Z")).toBe(Date.UTC(2000, 1, 29))
    expect(AuditEvent.parseRfc3339("0001-01-01T00:00:00Z")).toBe(Date.parse("0001-01-01T00:00:00Z"))
  })

  test("what is not one: no date is rolled over, no part left out", () => {
    for (
      const text of [
        "2026-02-29T00:00:00Z",
        "2100-02-29T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-11-00T00:00:00Z",
        "2026-11-24T24:00:00Z",
        "2026-11-24T23:60:00Z",
        "2026-11-24T23:59:60Z",
        "2026-11-24T10:00:00+24:00",
        "2026-11-24T10:00:00+01:60",
        "2026-11-24T10:00:00",
        "2026-11-24T10:00Z",
        "2026-11-24",
        "2026-11-24T10:00:00.Z",
        "2026-11-24T10:00:00+0100",
        "+02026-11-24T10:00:00Z",
        " 2026-11-24T10:00:00Z",
        "2026-11-24T10:00:00Z\n",
        "２０２６-11-24T10:00:00Z"
      ]
    ) expect({ text, at: AuditEvent.parseRfc3339(text) }).toEqual({ text, at: undefined })
  })

  test("TimeFromString: epoch milliseconds or RFC 3339; anything else fails with what it expects", () => {
    expect(decodeTime("1795511611000")).toEqual(Either.right(1795511611000))
    expect(decodeTime("0")).toEqual(Either.right(0))
    expect(decodeTime("-1")).toEqual(Either.right(-1))
    expect(decodeTime("2026-11-24T09:13:31Z")).toEqual(Either.right(Date.UTC(2026, 10, 24, 9, 13, 31)))
    for (const text of ["", "1e3", "0x10", " 1", "1 ", "01", "Infinity", "NaN", "9".repeat(400), "yesterday"]) {
      const decoded = decodeTime(text)
      expect({ text, failed: Either.isLeft(decoded) }).toEqual({ text, failed: true })
      if (Either.isLeft(decoded)) expect(decoded.left.message).toContain("expected an RFC 3339 date-time")
    }
    expect(Schema.encodeSync(AuditEvent.TimeFromString)(0)).toBe("1970-01-01T00:00:00.000Z")
  })
})

const call = (args: Record<string, unknown>) =>
  Schema.decodeUnknownSync(ToolCall.ToolCall)({ id: "c1", name: "bash", args, sessionKey: "s1" })

describe("AuditEvent.Json", () => {
  test("every event's JSON form decodes back to it; encoding is toJson; args of any JSON shape", () => {
    // a call's args: any JSON but a `__proto__` key at any depth, which the ToolCall schema refuses
    const argsArb = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 6 })
      .filter((args) => !JSON.stringify(args).includes(`"__proto__":`))
    fc.assert(
      fc.property(argsArb, argsArb, instant, fc.nat(), (asked, edited, at, seq) => {
        const askedCall = call(asked)
        const text = ToolCall.canonicalArgs(askedCall.args)
        const decision = {
          ...AuditEvent.decision(askedCall, { _tag: "Allow", via: "default", policyVersion: "v1" }, at, text),
          seq
        } as AuditEvent.AuditEvent
        const resolved = {
          seq,
          at,
          type: "approval.resolved",
          outcome: "approved",
          sessionKey: askedCall.sessionKey,
          toolCallId: askedCall.id,
          toolName: "bash",
          requestId: "req_1",
          rule: "requireApproval[0]",
          ruleSource: "requireApproval",
          policyVersion: "v1",
          args: text,
          editedArgs: ToolCall.canonicalArgs(call(edited).args),
          elapsedMs: 5
        } as AuditEvent.AuditEvent
        for (const event of [decision, resolved]) {
          const json = AuditEvent.toJson(event)
          expect(Schema.encodeSync(AuditEvent.Json)(event)).toEqual(json)
          expect(json.time).toBe(new Date(at).toISOString())
          expect(json.args).toEqual(JSON.parse(text))
          const wire = JSON.parse(JSON.stringify(json))
          expect(Schema.decodeUnknownSync(AuditEvent.Json)(wire)).toEqual({ ...event })
        }
      }),
      { numRuns: 300 }
    )
  })

  test("decoding refuses what is not an event's JSON form", () => {
    const good = AuditEvent.toJson({
      ...AuditEvent.callRefused(call({ a: 1 }), 1, `{"a":1}`, "names another call"),
      seq: 1
    } as AuditEvent.AuditEvent)
    const decode = Schema.decodeUnknownEither(AuditEvent.Json)
    expect(Either.isRight(decode(good))).toBe(true)
    for (
      const bad of [
        { ...good, args: 1 },
        { ...good, args: [1] },
        { ...good, time: 1 },
        { ...good, time: undefined },
        { ...good, type: "decision" },
        { ...good, seq: "1" }
      ]
    ) expect(Either.isLeft(decode(bad))).toBe(true)
  })
})
