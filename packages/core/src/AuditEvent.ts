/**
 * The audit trail: one append-only event for every decision, with a gap-free, increasing `seq`
 * so an auditor can replay from any point and tail live without missing or repeating anything.
 *
 * @example
 * import { AuditEvent } from "@tool-gate/core"
 *
 * const line = (e: AuditEvent.AuditEvent) => `${e.seq} ${e.type} ${e.outcome} ${e.toolName ?? ""}`
 *
 * @since 0.1.0
 */
import { Schema, type Types } from "effect"
import type { ApprovalRequest, Resolution } from "./ApprovalRequest.js"
import * as Decision from "./Decision.js"
import { canonicalArgs, type ToolCall } from "./ToolCall.js"

/**
 * - `decision`: a policy decision (allow / deny / pending) from `evaluate` or `authorize`
 * - `approval.requested`: a request was created (the pending decision of `authorize`)
 * - `approval.resolved`: a human approved or denied
 * - `approval.expired`: the TTL ran out (timeout means deny)
 * - `approval.expiring`: warning before expiry
 * - `approval.extended`: an operator extended the TTL
 * - `session.granted` / `session.revoked`: a session approval was recorded or revoked
 * - `approvals.cleared`: session approvals were cleared
 * - `policy.shadow`: a candidate policy (dry run, `ToolGate.Options.shadowPolicy`) would have
 *   decided this call differently; nothing was enforced by it
 * - `call.refused`: a call refused before any judgement (its tool-call id names another call)
 *
 * @since 0.1.0
 * @category models
 */
export const EventType = Schema.Literal(
  "decision",
  "approval.requested",
  "approval.resolved",
  "approval.expired",
  "approval.expiring",
  "approval.extended",
  "session.granted",
  "session.revoked",
  "approvals.cleared",
  "policy.shadow",
  "call.refused"
)
/**
 * @since 0.1.0
 * @category models
 */
export type EventType = typeof EventType.Type

/**
 * @since 0.1.0
 * @category models
 */
export const Outcome = Schema.Literal("allow", "deny", "pending", "approved", "denied", "expired", "revoked", "cleared")
/**
 * @since 0.1.0
 * @category models
 */
export type Outcome = typeof Outcome.Type

const fields = {
  at: Schema.Number,
  type: EventType,
  outcome: Outcome,
  /** absent only when approvals of every session were cleared */
  sessionKey: Schema.optional(Schema.String),
  toolCallId: Schema.optional(Schema.String),
  toolName: Schema.optional(Schema.String),
  requestId: Schema.optional(Schema.String),
  rule: Schema.optional(Schema.String),
  ruleSource: Schema.optional(Decision.RuleSource),
  policyVersion: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String),
  /** who answered (a human's identity) or `system` for expiry */
  actor: Schema.optional(Schema.String),
  via: Schema.optional(Schema.Literal("policy", "sessionApproval", "default")),
  sessionApprovalId: Schema.optional(Schema.String),
  /** canonical JSON of the arguments asked for */
  args: Schema.optional(Schema.String),
  /** canonical JSON of the arguments the approver substituted */
  editedArgs: Schema.optional(Schema.String),
  /** milliseconds from the request to this event (answers, expiry) */
  elapsedMs: Schema.optional(Schema.Number),
  expiresAt: Schema.optional(Schema.Number),
  /** `policy.shadow`: what the enforced policy decided (`outcome`, `rule`, `policyVersion` are the candidate's) */
  enforced: Schema.optional(Outcome)
}

/**
 * An event before the store gives it its sequence number.
 *
 * @since 0.1.0
 * @category models
 */
export const UnsequencedEvent = Schema.Struct(fields)
/**
 * @since 0.1.0
 * @category models
 */
export interface UnsequencedEvent extends Schema.Schema.Type<typeof UnsequencedEvent> {}

/**
 * @since 0.1.0
 * @category models
 */
export const AuditEvent = Schema.Struct({ seq: Schema.Number, ...fields })
/**
 * @since 0.1.0
 * @category models
 */
export interface AuditEvent extends Schema.Schema.Type<typeof AuditEvent> {}

/**
 * Filter for replay and live tails.
 *
 * @since 0.1.0
 * @category models
 */
export interface AuditQuery {
  readonly afterSeq?: number | undefined
  readonly sessionKey?: string | undefined
  readonly toolName?: string | undefined
  readonly outcome?: Outcome | undefined
  readonly since?: number | undefined
  readonly until?: number | undefined
  readonly limit?: number | undefined
}

/**
 * @since 0.1.0
 * @category guards
 */
export const matches = (query: AuditQuery) => (event: AuditEvent): boolean =>
  (query.afterSeq === undefined || event.seq > query.afterSeq) &&
  (query.sessionKey === undefined || event.sessionKey === query.sessionKey || event.sessionKey === undefined) &&
  (query.toolName === undefined || event.toolName?.toLowerCase() === query.toolName.toLowerCase()) &&
  (query.outcome === undefined || event.outcome === query.outcome) &&
  (query.since === undefined || event.at >= query.since) &&
  (query.until === undefined || event.at <= query.until)

// --- constructors, one per event type ----------------------------------------------------------
// The schema above is flat (every field optional but `at`, `type` and `outcome`); these say which
// fields each type carries. Key order is part of the JSON on the wire, so each builds its object
// in the order the gate always wrote it.

const requestFields = (request: ApprovalRequest) => ({
  sessionKey: request.toolCall.sessionKey,
  toolCallId: request.toolCall.id,
  toolName: request.toolCall.name,
  requestId: request.requestId,
  rule: request.rule.id,
  ruleSource: request.rule.source,
  policyVersion: request.policyVersion
})

/**
 * `decision`: a policy decision for a call, with its canonical arguments `args`. Given the
 * approved `request` the call came from (an approval this process's policy denies at run time),
 * the event names it and the approver's edit.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decision = (
  call: ToolCall,
  decision: Decision.Decision,
  at: number,
  args: string,
  request?: ApprovalRequest
): UnsequencedEvent => {
  // built field by field rather than by spreading: this runs once per decision on the hot path
  const event: Types.Mutable<UnsequencedEvent> = {
    at,
    type: "decision",
    outcome: Decision.outcome(decision),
    sessionKey: call.sessionKey,
    toolCallId: call.id,
    toolName: call.name,
    policyVersion: decision.policyVersion,
    args
  }
  if (decision.rule !== undefined) {
    event.rule = decision.rule.id
    event.ruleSource = decision.rule.source
  }
  if (decision._tag === "Allow") {
    event.via = decision.via
    if (decision.sessionApprovalId !== undefined) event.sessionApprovalId = decision.sessionApprovalId
  } else if (decision._tag === "Deny") {
    event.reason = decision.reason
  }
  if (request !== undefined) {
    event.requestId = request.requestId
    if (request.resolution?.editedArgs !== undefined) event.editedArgs = canonicalArgs(request.resolution.editedArgs)
  }
  return event
}

const asked = (outcome: Outcome): string => outcome === "pending" ? "ask for approval" : outcome

/**
 * `policy.shadow`: the candidate policy decided the call otherwise than the enforced one; `outcome`,
 * `rule` and `policyVersion` are the candidate's, `enforced` the enforced outcome. Given a
 * `requestId`, the request the enforced decision created.
 *
 * @since 0.1.0
 * @category constructors
 */
export const policyShadow = (
  call: ToolCall,
  enforced: Decision.Decision,
  candidate: Decision.Decision,
  at: number,
  args: string,
  requestId?: string
): UnsequencedEvent => {
  const was = Decision.outcome(enforced)
  const event: Types.Mutable<UnsequencedEvent> = decision(call, candidate, at, args)
  event.type = "policy.shadow"
  event.enforced = was
  event.reason = `the candidate policy would ${asked(event.outcome)}` +
    (candidate.rule !== undefined ? ` (rule ${candidate.rule.id})` : "") +
    `; the enforced policy decided ${was === "pending" ? "to ask for approval" : was}`
  if (requestId !== undefined) event.requestId = requestId
  return event
}

/**
 * `call.refused`: a call was refused before any judgement (its tool-call id names another call).
 *
 * @since 0.1.0
 * @category constructors
 */
export const callRefused = (call: ToolCall, at: number, args: string, reason: string): UnsequencedEvent => ({
  at,
  type: "call.refused",
  outcome: "deny",
  sessionKey: call.sessionKey,
  toolCallId: call.id,
  toolName: call.name,
  args,
  reason
})

/**
 * `approval.requested`: the request a `requireApproval` decision created.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalRequested = (request: ApprovalRequest, args: string): UnsequencedEvent => ({
  at: request.createdAt,
  type: "approval.requested",
  outcome: "pending",
  ...requestFields(request),
  reason: request.reason,
  args,
  expiresAt: request.expiresAt
})

/**
 * `approval.resolved`: a human's answer (`resolution`, approved or denied) to `request`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalResolved = (request: ApprovalRequest, resolution: Resolution): UnsequencedEvent => ({
  at: resolution.resolvedAt,
  type: "approval.resolved",
  outcome: resolution.status === "approved" ? "approved" : "denied",
  ...requestFields(request),
  ...(resolution.reason !== undefined ? { reason: resolution.reason } : {}),
  ...(resolution.respondedBy !== undefined ? { actor: resolution.respondedBy } : {}),
  ...(resolution.sessionApprovalId !== undefined ? { sessionApprovalId: resolution.sessionApprovalId } : {}),
  args: canonicalArgs(request.toolCall.args),
  ...(resolution.editedArgs !== undefined ? { editedArgs: canonicalArgs(resolution.editedArgs) } : {}),
  elapsedMs: resolution.resolvedAt - request.createdAt
})

/**
 * `approval.expired`: the request's TTL ran out at `at` (timeout means deny).
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalExpired = (request: ApprovalRequest, at: number): UnsequencedEvent => ({
  at,
  type: "approval.expired",
  outcome: "expired",
  ...requestFields(request),
  reason: "approval timed out (timeout means deny)",
  actor: "system",
  elapsedMs: at - request.createdAt
})

/**
 * `approval.expiring`: the warning before the request expires.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalExpiring = (request: ApprovalRequest, at: number): UnsequencedEvent => ({
  at,
  type: "approval.expiring",
  outcome: "pending",
  ...requestFields(request),
  expiresAt: request.expiresAt
})

/**
 * `approval.extended`: an operator moved the request's deadline to `expiresAt`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalExtended = (
  request: ApprovalRequest,
  at: number,
  expiresAt: number,
  actor: string | undefined
): UnsequencedEvent => ({
  at,
  type: "approval.extended",
  outcome: "pending",
  ...requestFields(request),
  ...(actor !== undefined ? { actor } : {}),
  expiresAt
})

const sessionToolEvent = (type: "session.granted" | "session.revoked", outcome: "approved" | "revoked") =>
(
  sessionKey: string,
  toolName: string,
  at: number,
  actor: string | undefined
): UnsequencedEvent => ({
  at,
  type,
  outcome,
  sessionKey,
  toolName,
  ...(actor !== undefined ? { actor } : {})
})

/**
 * `session.granted`: a tool-wide session approval recorded directly (not by answering a request).
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionGranted = sessionToolEvent("session.granted", "approved")

/**
 * `session.revoked`, for every approval of one tool in one session.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionToolRevoked = sessionToolEvent("session.revoked", "revoked")

/**
 * `session.revoked`, for one session approval by id (`held`: its session and tool, when known).
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionApprovalRevoked = (
  sessionApprovalId: string,
  held: { readonly sessionKey: string; readonly toolName: string } | undefined,
  at: number,
  actor: string | undefined
): UnsequencedEvent => ({
  at,
  type: "session.revoked",
  outcome: "revoked",
  sessionApprovalId,
  ...(held !== undefined ? { sessionKey: held.sessionKey, toolName: held.toolName } : {}),
  ...(actor !== undefined ? { actor } : {})
})

/**
 * `approvals.cleared`: the session approvals of one session, or of every session, were revoked.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalsCleared = (
  sessionKey: string | undefined,
  at: number,
  actor: string | undefined
): UnsequencedEvent => ({
  at,
  type: "approvals.cleared",
  outcome: "cleared",
  ...(sessionKey !== undefined ? { sessionKey } : {}),
  ...(actor !== undefined ? { actor } : {})
})
