/**
 * The CLI's one-line form of an audit event: a policy switch names the version it enforces, which
 * is the line's point; other events leave the version out (every decision carries one).
 */
import { AuditEvent } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { auditLine } from "../../packages/cli/src/internal/format.js"

describe("auditLine", () => {
  test("policy.loaded names the version switched to", () => {
    const loaded = { seq: 7, ...AuditEvent.policyLoaded("v2abc", "v1def", 1_795_511_611_000, "policy.yaml") }
    const line = auditLine(loaded as AuditEvent.AuditEvent)
    expect(line).toContain("policy.loaded  loaded")
    expect(line).toContain("version=v2abc")
  })

  test("other events leave the version out", () => {
    const decision = {
      seq: 8,
      at: 1_795_511_611_000,
      type: "decision",
      outcome: "allow",
      sessionKey: "s1",
      toolCallId: "c1",
      toolName: "ls",
      policyVersion: "v2abc"
    }
    const line = auditLine(decision as unknown as AuditEvent.AuditEvent)
    expect(line).toContain("decision  allow")
    expect(line).not.toContain("version=")
  })
})
