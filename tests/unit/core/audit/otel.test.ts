/**
 * `AuditOtel.layer`: every audit event becomes one OpenTelemetry log record, through the
 * `LoggerProvider` of `@effect/opentelemetry`, read back from OpenTelemetry's in-memory exporter:
 * the event's JSON form as the body, its time, severity, event name and searchable attributes;
 * replay from a sequence number; nothing before the layer started unless asked; on a SQLite file.
 */
import { Logger, Resource } from "@effect/opentelemetry"
import { InMemoryLogRecordExporter, type ReadableLogRecord, SimpleLogRecordProcessor } from "@opentelemetry/sdk-logs"
import { ApprovalStore, AuditEvent, PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import * as AuditOtel from "@tool-gate/core/AuditOtel"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"

const policy = Policy.unsafeMake({ deny: ["rm"], requireApproval: ["bash"] })

/** A provider whose records land in `exporter`, and the sink on the gate. */
const sink = (exporter: InMemoryLogRecordExporter, options?: AuditOtel.Options) =>
  AuditOtel.layer(options).pipe(
    Layer.provide(Logger.layerLoggerProvider(new SimpleLogRecordProcessor({ exporter }))),
    Layer.provide(Resource.layer({ serviceName: "audit-test" }))
  )

/** The exporter's records once there are `count` (the sink emits from its own fiber). */
const records = (exporter: InMemoryLogRecordExporter, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100_000 && exporter.getFinishedLogRecords().length < count; i++) yield* Effect.yieldNow()
    return exporter.getFinishedLogRecords()
  })

const sqliteFile = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "toolgate-otel-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => join(dir, "toolgate.db")))

describe("AuditOtel", () => {
  it.live("each event after the sink starts is one log record: body, time, severity, name, attributes", () =>
    Effect.gen(function*() {
      const filename = yield* sqliteFile
      const exporter = new InMemoryLogRecordExporter()
      const gate = yield* Layer.build(ToolGateSqlite.layer({ filename, policy }))
      const g = ToolGate.ToolGate.pipe(Effect.provide(gate))
      // before the sink: not exported
      yield* Effect.flatMap(g, (gate) => gate.evaluate({ id: "before", name: "ls", sessionKey: "s1" }))
      yield* Layer.build(sink(exporter).pipe(Layer.provide(Layer.succeedContext(gate))))

      const tg = yield* g
      yield* tg.evaluate({ id: "c1", name: "ls", sessionKey: "s1", args: { path: "/tmp", env: { CI: "1" } } })
      yield* tg.evaluate({ id: "c2", name: "rm", sessionKey: "s1", args: { path: "/" } })
      const paused = yield* tg.authorize({ id: "c3", name: "bash", sessionKey: "s2", args: { command: "deploy" } })
      if (!PauseSignal.isPauseSignal(paused)) throw new Error("expected a pause")
      yield* tg.respond(paused.requestId, { decision: "deny", reason: "not now", respondedBy: "ana" })

      const stored = (yield* ApprovalStore.ApprovalStore.pipe(Effect.provide(gate), Effect.flatMap((s) => s.events())))
        .slice(1)
      const exported = yield* records(exporter, stored.length)
      expect(exported.map((r) => r.attributes["tool_gate.seq"])).toEqual(stored.map((e) => e.seq))

      const byCall = (id: string, type: string) =>
        exported.find((r) => r.attributes["tool_gate.tool_call_id"] === id && r.eventName === type)!
      const allowed = byCall("c1", "tool-gate.audit.decision")
      expect(allowed.body).toEqual(AuditEvent.toJson(stored[0]!) as unknown as ReadableLogRecord["body"])
      expect((allowed.body as any).args.env.CI).toBe("1")
      expect(allowed.severityText).toBe("INFO")
      expect(allowed.severityNumber).toBe(9)
      // the record's time is the event's
      expect(allowed.hrTime[0] * 1000 + Math.floor(allowed.hrTime[1] / 1e6)).toBe(stored[0]!.at)
      expect(allowed.attributes).toEqual({
        "tool_gate.seq": stored[0]!.seq,
        "tool_gate.event.type": "decision",
        "tool_gate.outcome": "allow",
        "tool_gate.session_key": "s1",
        "tool_gate.tool_name": "ls",
        "tool_gate.tool_call_id": "c1",
        "tool_gate.policy_version": tg.policy.version,
        "tool_gate.via": "default"
      })
      // no argument value among the attributes
      for (const record of exported) expect(JSON.stringify(record.attributes)).not.toContain("/tmp")

      const denied = byCall("c2", "tool-gate.audit.decision")
      expect([denied.severityText, denied.severityNumber, denied.attributes["tool_gate.rule"]]).toEqual([
        "WARN",
        13,
        "deny[0]"
      ])
      const answered = byCall("c3", "tool-gate.audit.approval.resolved")
      expect(answered.attributes).toMatchObject({
        "tool_gate.outcome": "denied",
        "tool_gate.actor": "ana",
        "tool_gate.request_id": paused.requestId
      })
      expect(answered.instrumentationScope.name).toBe("@tool-gate/core")
      expect(answered.resource.attributes["service.name"]).toBe("audit-test")
    }))

  it.live("afterSeq replays the log from there, then follows it; args: false keeps arguments out", () =>
    Effect.gen(function*() {
      const exporter = new InMemoryLogRecordExporter()
      const Gate = ToolGate.layer({ policy }).pipe(Layer.provideMerge(ApprovalStore.layerMemory))
      const gate = yield* Layer.build(Gate)
      const tg = yield* ToolGate.ToolGate.pipe(Effect.provide(gate))
      for (const id of ["a", "b", "c"]) yield* tg.evaluate({ id, name: "ls", sessionKey: "s1", args: { id } })
      yield* Layer.build(sink(exporter, { afterSeq: 1, args: false }).pipe(Layer.provide(Layer.succeedContext(gate))))
      yield* tg.clearApprovals(ToolCall.SessionKey.make("s1"), "ops")
      const exported = yield* records(exporter, 3)
      expect(exported.map((r) => [r.attributes["tool_gate.seq"], r.eventName])).toEqual([
        [2, "tool-gate.audit.decision"],
        [3, "tool-gate.audit.decision"],
        [4, "tool-gate.audit.approvals.cleared"]
      ])
      for (const record of exported) expect(Object.keys(record.body as object)).not.toContain("args")
      expect(record(exported, 0)).toMatchObject({ toolCallId: "b", time: expect.any(String) })
    }))
})

const record = (records: ReadonlyArray<ReadableLogRecord>, i: number) => records[i]!.body
