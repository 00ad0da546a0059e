import { ApprovalStore, AuditEvent, PauseSignal, ToolCall, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Schema, TestClock } from "effect"
import { describe, it } from "../../../support/effectTest.js"
import { makeEveryEventGate, policy, reloaded } from "../everyEventGate.js"

// One gate session that emits every event type; each event the gate built with its constructor
// must be one the audit schema accepts and carry what its type promises, through JSON and back.
const { Gate, loadReloaded } = makeEveryEventGate()

const viaJson = (event: AuditEvent.AuditEvent) =>
  Schema.decodeUnknownSync(AuditEvent.AuditEvent)(
    JSON.parse(JSON.stringify(Schema.encodeSync(AuditEvent.AuditEvent)(event)))
  )

describe("audit events built by their constructors", () => {
  it.scoped("every event type is emitted, valid under the schema, with the fields of its type", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      yield* gate.evaluate({ id: "e1", name: "ls", sessionKey: "s1" })
      const first = yield* gate.authorize({ id: "c1", name: "bash", args: { command: "make" }, sessionKey: "s1" })
      const second = yield* gate.authorize({ id: "c2", name: "bash", args: { command: "test" }, sessionKey: "s1" })
      const third = yield* gate.authorize({ id: "c3", name: "rm", sessionKey: "s1" })
      if (
        !PauseSignal.isPauseSignal(first) || !PauseSignal.isPauseSignal(second) || !PauseSignal.isPauseSignal(third)
      ) {
        throw new Error("expected pauses")
      }
      yield* gate.respond(first.requestId, { decision: "approve_once", respondedBy: "ana" })
      yield* Effect.flip(gate.authorize({ id: "c1", name: "bash", args: { command: "other" }, sessionKey: "s1" }))
      yield* gate.extend(second.requestId, "100 seconds", "ops", { allowShorten: true })
      yield* TestClock.adjust("60 seconds")
      yield* TestClock.adjust("50 seconds")
      yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true, { grantedBy: "ops" })
      yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), false, { grantedBy: "ops" })
      yield* gate.clearApprovals(ToolCall.SessionKey.make("s1"), "ops")
      yield* loadReloaded

      const events = yield* store.events()
      expect(new Set(events.map((e) => e.type))).toEqual(new Set(AuditEvent.EventType.literals))
      for (const event of events) expect(viaJson(event)).toEqual(event)
      const byType = (type: AuditEvent.EventType) => events.filter((e) => e.type === type)
      expect(byType("policy.shadow").map((e) => [e.outcome, e.enforced, e.requestId])).toEqual([
        ["deny", "allow", undefined],
        ["deny", "pending", third.requestId]
      ])
      expect(byType("approval.resolved").map((e) => [e.outcome, e.actor, e.requestId])).toEqual([
        ["approved", "ana", first.requestId]
      ])
      expect(byType("approval.expired").map((e) => [e.actor, e.requestId])).toEqual([["system", second.requestId]])
      expect(byType("approval.extended").map((e) => [e.actor, e.requestId])).toEqual([["ops", second.requestId]])
      expect(byType("call.refused").map((e) => [e.outcome, e.toolCallId])).toEqual<unknown>([["deny", "c1"]])
      expect(byType("session.revoked").map((e) => [e.sessionKey, e.toolName, e.actor])).toEqual([[
        "s1",
        "deploy",
        "ops"
      ]])
      expect(byType("approvals.cleared").map((e) => [e.sessionKey, e.actor])).toEqual([["s1", "ops"]])
      expect(byType("policy.loaded").map((e) => [e.outcome, e.policyVersion, e.previousVersion, e.source])).toEqual<
        unknown
      >([["loaded", reloaded.version, policy.version, "policy.yaml"]])
    }).pipe(Effect.provide(Gate)))
})
