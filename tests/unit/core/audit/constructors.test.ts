/**
 * Each audit event constructor builds its event in the encoded form the store keeps: the fields
 * of its type in the schema's order. The store then keeps it as it is, without a copy; the JSON
 * is what the Schema encodes; and an event missing what its type carries is not one.
 */
import type { Decision } from "@tool-gate/core"
import { AuditEvent, SessionApproval, ToolCall } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Either, Schema } from "effect"
import { checks, makeCodecs } from "../../../../packages/core/src/internal/store/codecs.js"
import { request } from "../sql/fixtures.js"

const call = Schema.decodeUnknownSync(ToolCall.ToolCall)({
  id: "c1",
  name: "Bash",
  args: { command: "make", env: { CI: true } },
  sessionKey: "s1"
})
const args = ToolCall.canonicalArgs(call.args)
const rule = { id: "requireApproval[0]", source: "requireApproval" } as const
const allow: Decision.Decision = {
  _tag: "Allow",
  via: "sessionApproval",
  sessionApprovalId: "sa1",
  policyVersion: "v1"
}
const deny: Decision.Decision = {
  _tag: "Deny",
  rule: { id: "deny[0]", source: "deny" },
  reason: "no",
  policyVersion: "v1"
}
const ask: Decision.Decision = {
  _tag: "RequireApproval",
  rule,
  ttlMs: 1000,
  sessionScope: "exact",
  policyVersion: "v1"
}
const asked = request(1)
const approved = {
  ...asked,
  status: "approved" as const,
  resolution: {
    status: "approved" as const,
    decision: "approve_session" as const,
    reason: "fine",
    respondedBy: "ana",
    editedArgs: { command: "make test" },
    sessionApprovalId: "sa2",
    resolvedAt: asked.createdAt + 5
  }
}
const held = { sessionKey: call.sessionKey, toolName: "deploy" }

const built: ReadonlyArray<readonly [string, AuditEvent.UnsequencedEvent]> = [
  ["decision (allow by a session approval)", AuditEvent.decision(call, allow, 1, args)],
  ["decision (deny)", AuditEvent.decision(call, deny, 1, args)],
  ["decision (pending)", AuditEvent.decision(call, ask, 1, args)],
  ["decision (an approved request the policy denies)", AuditEvent.decision(call, deny, 1, args, approved)],
  ["call.refused", AuditEvent.callRefused(call, 1, args, "another call")],
  ["approval.requested", AuditEvent.approvalRequested(asked, args)],
  ["approval.resolved", AuditEvent.approvalResolved(approved, approved.resolution)],
  ["approval.expired", AuditEvent.approvalExpired(asked, 2)],
  ["approval.expiring", AuditEvent.approvalExpiring(asked, 2)],
  ["approval.extended", AuditEvent.approvalExtended(asked, 2, 3, "ops")],
  ["session.granted", AuditEvent.sessionGranted(call.sessionKey, "deploy", 1, "ops")],
  ["session.revoked (a tool)", AuditEvent.sessionToolRevoked(call.sessionKey, "deploy", 1, undefined)],
  [
    "session.revoked (by id)",
    AuditEvent.sessionApprovalRevoked(SessionApproval.SessionApprovalId.make("sa1"), held, 1, "ops")
  ],
  ["approvals.cleared (one session)", AuditEvent.approvalsCleared(call.sessionKey, 1, "ops")],
  ["approvals.cleared (every session)", AuditEvent.approvalsCleared(undefined, 1, undefined)],
  ["policy.loaded (a reload)", AuditEvent.policyLoaded("b".repeat(64), "a".repeat(64), 1, "policy.yaml")],
  ["policy.loaded (no previous version, no file)", AuditEvent.policyLoaded("b".repeat(64), undefined, 1, undefined)]
]

describe("audit event constructors", () => {
  test.each(built)("%s: the store keeps the event as built, and its JSON is the Schema's", (_, event) => {
    const encoded = makeCodecs().event.encode(event)
    expect(Either.isRight(encoded) && encoded.right).toBe(event)
    expect(JSON.stringify(event)).toBe(JSON.stringify(Schema.encodeSync(AuditEvent.UnsequencedEvent)(event)))
  })

  test("an event lacking a field its type carries, or carrying one its type does not, is refused", () => {
    const codec = makeCodecs().event
    const [, decided] = built[0]!
    const { toolName: _, ...nameless } = decided
    expect(Either.isLeft(codec.encode(nameless as unknown as AuditEvent.UnsequencedEvent))).toBe(true)
    expect(Either.isLeft(codec.decode(JSON.parse(JSON.stringify(nameless))))).toBe(true)
    const retyped = { ...decided, type: "session.granted" }
    expect(Either.isLeft(codec.encode(retyped as unknown as AuditEvent.UnsequencedEvent))).toBe(true)
    expect(Either.isLeft(codec.decode(JSON.parse(JSON.stringify(retyped))))).toBe(true)
  })
})

describe("the event check of the store's fast path", () => {
  test("accepts an id only when the Schema does: every BMP character at either end of a request id", () => {
    const event = (requestId: string) => JSON.parse(JSON.stringify({ ...built[5]![1], requestId }))
    const is = Schema.is(AuditEvent.UnsequencedEvent)
    for (let code = 0; code <= 0xffff; code++) {
      const c = String.fromCharCode(code)
      for (const id of [`${c}x`, `x${c}`]) {
        if (checks.event(event(id))) expect(is(event(id))).toBe(true)
      }
    }
    expect(checks.event(event("req_1"))).toBe(true)
    expect(checks.event(event("\u3000req_1"))).toBe(false)
  })
})
