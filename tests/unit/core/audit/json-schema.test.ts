/**
 * The published JSON Schema of an audit event (`@tool-gate/core/audit-event.schema.json`): generated
 * from `AuditEvent.Json` with `JSONSchema.make`, kept equal to it here (regenerate with
 * `TOOLGATE_WRITE_SCHEMA=1` and this test), compiled by Ajv as JSON Schema 2020-12 in strict mode,
 * and every event type a gate's run emits validates against it in its JSON form.
 */
import { ApprovalStore, AuditEvent, PauseSignal, ToolCall, ToolGate } from "@tool-gate/core"
import addFormats from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { expect, test } from "bun:test"
import { Effect, JSONSchema, TestClock } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { describe, it } from "../../../support/effectTest.js"
import { makeEveryEventGate } from "../everyEventGate.js"

const file = fileURLToPath(new URL("../../../../packages/core/audit-event.schema.json", import.meta.url))
const generated = `${
  JSON.stringify(
    {
      ...JSONSchema.make(AuditEvent.Json, { target: "jsonSchema2020-12" }),
      $id: "https://github.com/tool-gate/tool-gate/blob/main/packages/core/audit-event.schema.json"
    },
    null,
    2
  )
}\n`
if (process.env["TOOLGATE_WRITE_SCHEMA"] === "1") writeFileSync(file, generated)
const published = JSON.parse(readFileSync(file, "utf8"))

const validator = () => {
  const ajv = new Ajv2020({ strict: true, allErrors: true })
  addFormats.default(ajv)
  return ajv.compile(published)
}

describe("the audit event's JSON Schema", () => {
  test("the published file is what AuditEvent.Json generates (TOOLGATE_WRITE_SCHEMA=1 rewrites it)", () => {
    expect(readFileSync(file, "utf8")).toBe(generated)
  })

  test("the package exports it", () => {
    const resolved = createRequire(import.meta.url).resolve("@tool-gate/core/audit-event.schema.json")
    expect(resolved).toBe(file)
    const manifest = JSON.parse(
      readFileSync(new URL("../../../../packages/core/package.json", import.meta.url), "utf8")
    )
    expect(manifest.files).toContain("audit-event.schema.json")
  })

  const { Gate, loadReloaded } = makeEveryEventGate()

  it.scoped("every event type of a run validates in its JSON form (Ajv, JSON Schema 2020-12, strict)", () =>
    Effect.gen(function*() {
      const validate = validator()
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      yield* gate.evaluate({ id: "e1", name: "ls", sessionKey: "s1", args: { path: "/tmp", deep: { n: [1, null] } } })
      const first = yield* gate.authorize({ id: "c1", name: "bash", args: { command: "make" }, sessionKey: "s1" })
      const second = yield* gate.authorize({ id: "c2", name: "bash", args: { command: "test" }, sessionKey: "s1" })
      const third = yield* gate.authorize({ id: "c3", name: "rm", sessionKey: "s1" })
      if (
        !PauseSignal.isPauseSignal(first) || !PauseSignal.isPauseSignal(second) || !PauseSignal.isPauseSignal(third)
      ) {
        throw new Error("expected pauses")
      }
      yield* gate.respond(first.requestId, {
        decision: "approve_once",
        respondedBy: "ana",
        editedArgs: { command: "make -j2" }
      })
      yield* Effect.flip(gate.authorize({ id: "c1", name: "bash", args: { command: "other" }, sessionKey: "s1" }))
      yield* gate.extend(second.requestId, "100 seconds", "ops", { allowShorten: true })
      yield* TestClock.adjust("60 seconds")
      yield* TestClock.adjust("50 seconds")
      yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true, { grantedBy: "ops" })
      yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), false, { grantedBy: "ops" })
      yield* gate.clearApprovals(ToolCall.SessionKey.make("s1"), "ops")
      yield* gate.clearApprovals(undefined, "ops")
      yield* loadReloaded

      const events = yield* store.events()
      expect(new Set(events.map((e) => e.type))).toEqual(new Set(AuditEvent.EventType.literals))
      for (const event of events) {
        const json = JSON.parse(JSON.stringify(AuditEvent.toJson(event)))
        expect({ type: event.type, valid: validate(json), errors: validate.errors ?? null }).toEqual({
          type: event.type,
          valid: true,
          errors: null
        })
      }
      expect(events.some((e) => e.editedArgs !== undefined)).toBe(true)
    }).pipe(Effect.provide(Gate)))

  test("what is not an event's JSON form does not validate", () => {
    const validate = validator()
    const event = AuditEvent.toJson(
      {
        seq: 1,
        at: 1,
        type: "decision",
        outcome: "allow",
        sessionKey: "s1",
        toolCallId: "c1",
        toolName: "ls",
        policyVersion: "v1",
        via: "default",
        args: "{}"
      } as AuditEvent.AuditEvent
    )
    expect(validate(JSON.parse(JSON.stringify(event)))).toBe(true)
    for (
      const bad of [
        { ...event, args: 1 },
        { ...event, args: [1] },
        { ...event, time: "yesterday" },
        { ...event, outcome: "approved" },
        { ...event, type: "approval.resolved" },
        { ...event, surprise: 1 },
        Object.fromEntries(Object.entries(event).filter(([key]) => key !== "time"))
      ]
    ) expect(validate(bad)).toBe(false)
  })
})
