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
import { type ApprovalRequest, RequestId, type Resolution } from "./ApprovalRequest.js"
import * as Decision from "./Decision.js"
import { BuiltEvent } from "./internal/builtEvent.js"
import type { Exclusive } from "./internal/exclusive.js"
import type { SessionApprovalId } from "./SessionApproval.js"
import { canonicalArgs, SessionKey, type ToolCall, ToolCallId } from "./ToolCall.js"

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

// Fields in the order every event writes them on the wire (each type carries a subsequence).
const at = Schema.Number
const sessionKey = SessionKey
const toolCallId = ToolCallId
const toolName = Schema.String
const requestId = RequestId
const rule = Schema.String
const ruleSource = Decision.RuleSource
const policyVersion = Schema.String
const reason = Schema.String
/** who answered (a human's identity) or `system` for expiry */
const actor = Schema.String
const via = Schema.Literal("policy", "sessionApproval", "default")
// plain, as decisions and resolutions carry it
const sessionApprovalId = Schema.String
/** canonical JSON of the arguments asked for */
const args = Schema.String
/** canonical JSON of the arguments the approver substituted */
const editedArgs = Schema.String
/** milliseconds from the request to this event (answers, expiry) */
const elapsedMs = Schema.Number
const expiresAt = Schema.Number
const judged = Schema.Literal("allow", "deny", "pending")

/** what a decision about a call says (`decision` and `policy.shadow`) */
const decisionFields = {
  sessionKey,
  toolCallId,
  toolName,
  requestId: Schema.optional(requestId),
  rule: Schema.optional(rule),
  ruleSource: Schema.optional(ruleSource),
  policyVersion,
  reason: Schema.optional(reason),
  via: Schema.optional(via),
  sessionApprovalId: Schema.optional(sessionApprovalId),
  args,
  editedArgs: Schema.optional(editedArgs)
}

/** what names the request an event is about */
const requestFields = { sessionKey, toolCallId, toolName, requestId, rule, ruleSource, policyVersion }

/**
 * `decision`: a policy decision (allow / deny / pending) from `evaluate` or `authorize`.
 *
 * @since 0.1.0
 * @category models
 */
export const DecisionEvent = Schema.Struct({
  at,
  type: Schema.Literal("decision"),
  outcome: judged,
  ...decisionFields
})

/**
 * `approval.requested`: a request was created (the pending decision of `authorize`).
 *
 * @since 0.1.0
 * @category models
 */
export const RequestedEvent = Schema.Struct({
  at,
  type: Schema.Literal("approval.requested"),
  outcome: Schema.Literal("pending"),
  ...requestFields,
  reason,
  args,
  expiresAt
})

/**
 * `approval.resolved`: a human approved or denied.
 *
 * @since 0.1.0
 * @category models
 */
export const ResolvedEvent = Schema.Struct({
  at,
  type: Schema.Literal("approval.resolved"),
  outcome: Schema.Literal("approved", "denied"),
  ...requestFields,
  reason: Schema.optional(reason),
  actor: Schema.optional(actor),
  sessionApprovalId: Schema.optional(sessionApprovalId),
  args,
  editedArgs: Schema.optional(editedArgs),
  elapsedMs
})

/**
 * `approval.expired`: the TTL ran out (timeout means deny); `actor` is `system`.
 *
 * @since 0.1.0
 * @category models
 */
export const ExpiredEvent = Schema.Struct({
  at,
  type: Schema.Literal("approval.expired"),
  outcome: Schema.Literal("expired"),
  ...requestFields,
  reason,
  actor,
  elapsedMs
})

/**
 * `approval.expiring`: the warning before expiry.
 *
 * @since 0.1.0
 * @category models
 */
export const ExpiringEvent = Schema.Struct({
  at,
  type: Schema.Literal("approval.expiring"),
  outcome: Schema.Literal("pending"),
  ...requestFields,
  expiresAt
})

/**
 * `approval.extended`: an operator moved the deadline to `expiresAt`.
 *
 * @since 0.1.0
 * @category models
 */
export const ExtendedEvent = Schema.Struct({
  at,
  type: Schema.Literal("approval.extended"),
  outcome: Schema.Literal("pending"),
  ...requestFields,
  actor: Schema.optional(actor),
  expiresAt
})

/**
 * `session.granted`: a tool-wide session approval recorded directly (not by answering a request).
 *
 * @since 0.1.0
 * @category models
 */
export const GrantedEvent = Schema.Struct({
  at,
  type: Schema.Literal("session.granted"),
  outcome: Schema.Literal("approved"),
  sessionKey,
  toolName,
  actor: Schema.optional(actor)
})

/**
 * `session.revoked`: the approvals of one tool in one session (`sessionKey` and `toolName`), or
 * one session approval by id (`sessionApprovalId`, with its session and tool when known).
 *
 * @since 0.1.0
 * @category models
 */
export const RevokedEvent = Schema.Struct({
  at,
  type: Schema.Literal("session.revoked"),
  outcome: Schema.Literal("revoked"),
  sessionKey: Schema.optional(sessionKey),
  toolName: Schema.optional(toolName),
  actor: Schema.optional(actor),
  sessionApprovalId: Schema.optional(sessionApprovalId)
})

/**
 * `approvals.cleared`: the session approvals of one session (`sessionKey`), or of every session
 * (no `sessionKey`), were revoked.
 *
 * @since 0.1.0
 * @category models
 */
export const ClearedEvent = Schema.Struct({
  at,
  type: Schema.Literal("approvals.cleared"),
  outcome: Schema.Literal("cleared"),
  sessionKey: Schema.optional(sessionKey),
  actor: Schema.optional(actor)
})

/**
 * `policy.shadow`: a candidate policy (dry run, `ToolGate.Options.shadowPolicy`) would have
 * decided this call differently; nothing was enforced by it. `outcome`, `rule` and
 * `policyVersion` are the candidate's, `enforced` what the enforced policy decided.
 *
 * @since 0.1.0
 * @category models
 */
export const ShadowEvent = Schema.Struct({
  at,
  type: Schema.Literal("policy.shadow"),
  outcome: judged,
  ...decisionFields,
  reason,
  enforced: judged
})

/**
 * `call.refused`: a call refused before any judgement (its tool-call id names another call).
 *
 * @since 0.1.0
 * @category models
 */
export const RefusedEvent = Schema.Struct({
  at,
  type: Schema.Literal("call.refused"),
  outcome: Schema.Literal("deny"),
  sessionKey,
  toolCallId,
  toolName,
  reason,
  args
})

/**
 * An event before the store gives it its sequence number: one of the event types, told apart by
 * `type`.
 *
 * @since 0.1.0
 * @category models
 */
export const UnsequencedEvent: Schema.Schema<UnsequencedEvent, UnsequencedEvent.Encoded> = Schema.Union(
  DecisionEvent,
  RequestedEvent,
  ResolvedEvent,
  ExpiredEvent,
  ExpiringEvent,
  ExtendedEvent,
  GrantedEvent,
  RevokedEvent,
  ClearedEvent,
  ShadowEvent,
  RefusedEvent
)
export type UnsequencedEvent = Exclusive<Members["Type"]>
/**
 * @since 0.1.0
 * @category models
 */
export declare namespace UnsequencedEvent {
  /**
   * The JSON form of an event.
   *
   * @since 0.1.0
   * @category models
   */
  export type Encoded = Exclusive<Members["Encoded"]>
}

type Members =
  | typeof DecisionEvent
  | typeof RequestedEvent
  | typeof ResolvedEvent
  | typeof ExpiredEvent
  | typeof ExpiringEvent
  | typeof ExtendedEvent
  | typeof GrantedEvent
  | typeof RevokedEvent
  | typeof ClearedEvent
  | typeof ShadowEvent
  | typeof RefusedEvent

// `prevHash` and `hash`: the event's links in the log's hash chain (module `AuditChain`)
const sequenced = <Fields extends Schema.Struct.Fields>(event: Schema.Struct<Fields>) =>
  Schema.Struct({
    seq: Schema.Number,
    ...event.fields,
    prevHash: Schema.optional(Schema.String),
    hash: Schema.optional(Schema.String)
  })

/**
 * An event of the log, numbered by `seq`; as read back from the log, with its links in the log's
 * hash chain (`prevHash`, absent at the chain's start, and `hash`: module `AuditChain`).
 *
 * @since 0.1.0
 * @category models
 */
export const AuditEvent: Schema.Schema<AuditEvent, AuditEvent.Encoded> = Schema.Union(
  sequenced(DecisionEvent),
  sequenced(RequestedEvent),
  sequenced(ResolvedEvent),
  sequenced(ExpiredEvent),
  sequenced(ExpiringEvent),
  sequenced(ExtendedEvent),
  sequenced(GrantedEvent),
  sequenced(RevokedEvent),
  sequenced(ClearedEvent),
  sequenced(ShadowEvent),
  sequenced(RefusedEvent)
)
/**
 * An event of the log. Narrow by `type` for what a type carries; any field can be read on any
 * event (a field its type never carries reads `undefined`).
 *
 * @since 0.1.0
 * @category models
 */
export type AuditEvent = Exclusive<Sequenced<Members["Type"]>>
/**
 * @since 0.1.0
 * @category models
 */
export declare namespace AuditEvent {
  /**
   * The JSON form of an event of the log.
   *
   * @since 0.1.0
   * @category models
   */
  export type Encoded = Exclusive<Sequenced<Members["Encoded"]>>
}

type Sequenced<Event> = Event extends unknown ? Chained & Event : never
type Chained = {
  readonly seq: number
  readonly prevHash?: string | undefined
  readonly hash?: string | undefined
}

/**
 * The events of one type.
 *
 * @since 0.1.0
 * @category models
 */
export type Of<Type extends EventType> = Extract<AuditEvent, { readonly type: Type }>

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

const aboutRequest = (request: ApprovalRequest) => ({
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
): typeof DecisionEvent.Type => {
  // Built field by field, in the schema's order, rather than by spreading: this runs once per
  // decision on the hot path, and the store keeps an event in that order as it is (no copy).
  // Partial until the required fields below are set.
  const event = new BuiltEvent() as Types.Mutable<typeof DecisionEvent.Type>
  event.at = at
  event.type = "decision"
  event.outcome = Decision.outcome(decision)
  event.sessionKey = call.sessionKey
  event.toolCallId = call.id
  event.toolName = call.name
  if (request !== undefined) event.requestId = request.requestId
  if (decision.rule !== undefined) {
    event.rule = decision.rule.id
    event.ruleSource = decision.rule.source
  }
  event.policyVersion = decision.policyVersion
  if (decision._tag === "Deny") event.reason = decision.reason
  if (decision._tag === "Allow") {
    event.via = decision.via
    if (decision.sessionApprovalId !== undefined) event.sessionApprovalId = decision.sessionApprovalId
  }
  event.args = args
  if (request?.resolution?.editedArgs !== undefined) event.editedArgs = canonicalArgs(request.resolution.editedArgs)
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
  requestId?: RequestId
): typeof ShadowEvent.Type => {
  const was = Decision.outcome(enforced)
  const judged = decision(call, candidate, at, args)
  // in the schema's order, as `decision` builds its fields
  const event = {
    at,
    type: "policy.shadow",
    outcome: judged.outcome,
    sessionKey: call.sessionKey,
    toolCallId: call.id,
    toolName: call.name
  } as Types.Mutable<typeof ShadowEvent.Type>
  if (requestId !== undefined) event.requestId = requestId
  if (judged.rule !== undefined) event.rule = judged.rule
  if (judged.ruleSource !== undefined) event.ruleSource = judged.ruleSource
  event.policyVersion = judged.policyVersion
  event.reason = `the candidate policy would ${asked(judged.outcome)}` +
    (candidate.rule !== undefined ? ` (rule ${candidate.rule.id})` : "") +
    `; the enforced policy decided ${was === "pending" ? "to ask for approval" : was}`
  if (judged.via !== undefined) event.via = judged.via
  if (judged.sessionApprovalId !== undefined) event.sessionApprovalId = judged.sessionApprovalId
  event.args = args
  event.enforced = was
  return event
}

/**
 * `call.refused`: a call was refused before any judgement (its tool-call id names another call).
 *
 * @since 0.1.0
 * @category constructors
 */
export const callRefused = (call: ToolCall, at: number, args: string, reason: string): typeof RefusedEvent.Type => ({
  at,
  type: "call.refused",
  outcome: "deny",
  sessionKey: call.sessionKey,
  toolCallId: call.id,
  toolName: call.name,
  reason,
  args
})

/**
 * `approval.requested`: the request a `requireApproval` decision created.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalRequested = (request: ApprovalRequest, args: string): typeof RequestedEvent.Type => ({
  at: request.createdAt,
  type: "approval.requested",
  outcome: "pending",
  ...aboutRequest(request),
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
export const approvalResolved = (request: ApprovalRequest, resolution: Resolution): typeof ResolvedEvent.Type => ({
  at: resolution.resolvedAt,
  type: "approval.resolved",
  outcome: resolution.status === "approved" ? "approved" : "denied",
  ...aboutRequest(request),
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
export const approvalExpired = (request: ApprovalRequest, at: number): typeof ExpiredEvent.Type => ({
  at,
  type: "approval.expired",
  outcome: "expired",
  ...aboutRequest(request),
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
export const approvalExpiring = (request: ApprovalRequest, at: number): typeof ExpiringEvent.Type => ({
  at,
  type: "approval.expiring",
  outcome: "pending",
  ...aboutRequest(request),
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
): typeof ExtendedEvent.Type => ({
  at,
  type: "approval.extended",
  outcome: "pending",
  ...aboutRequest(request),
  ...(actor !== undefined ? { actor } : {}),
  expiresAt
})

/**
 * `session.granted`: a tool-wide session approval recorded directly (not by answering a request).
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionGranted = (
  sessionKey: SessionKey,
  toolName: string,
  at: number,
  actor: string | undefined
): typeof GrantedEvent.Type => ({
  at,
  type: "session.granted",
  outcome: "approved",
  sessionKey,
  toolName,
  ...(actor !== undefined ? { actor } : {})
})

/**
 * `session.revoked`, for every approval of one tool in one session.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionToolRevoked = (
  sessionKey: SessionKey,
  toolName: string,
  at: number,
  actor: string | undefined
): typeof RevokedEvent.Type => ({
  at,
  type: "session.revoked",
  outcome: "revoked",
  sessionKey,
  toolName,
  ...(actor !== undefined ? { actor } : {})
})

/**
 * `session.revoked`, for one session approval by id (`held`: its session and tool, when known).
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionApprovalRevoked = (
  sessionApprovalId: SessionApprovalId,
  held: { readonly sessionKey: SessionKey; readonly toolName: string } | undefined,
  at: number,
  actor: string | undefined
): typeof RevokedEvent.Type => ({
  at,
  type: "session.revoked",
  outcome: "revoked",
  ...(held !== undefined ? { sessionKey: held.sessionKey, toolName: held.toolName } : {}),
  ...(actor !== undefined ? { actor } : {}),
  sessionApprovalId
})

/**
 * `approvals.cleared`: the session approvals of one session, or of every session, were revoked.
 *
 * @since 0.1.0
 * @category constructors
 */
export const approvalsCleared = (
  sessionKey: SessionKey | undefined,
  at: number,
  actor: string | undefined
): typeof ClearedEvent.Type => ({
  at,
  type: "approvals.cleared",
  outcome: "cleared",
  ...(sessionKey !== undefined ? { sessionKey } : {}),
  ...(actor !== undefined ? { actor } : {})
})
