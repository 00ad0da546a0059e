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
import { ParseResult, Schema, type Types } from "effect"
import { type ApprovalRequest, RequestId, type Resolution } from "./ApprovalRequest.js"
import * as Decision from "./Decision.js"
import { BuiltEvent } from "./internal/builtEvent.js"
import { canonicalJson } from "./internal/canonical.js"
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
 * - `policy.loaded`: the gate switched to another version of its policy (a reload)
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
  "call.refused",
  "policy.loaded"
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
export const Outcome = Schema.Literal(
  "allow",
  "deny",
  "pending",
  "approved",
  "denied",
  "expired",
  "revoked",
  "cleared",
  "loaded"
)
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
// its JSON Schema in one piece: the generated `$ref` with `minLength` beside it fails strict validators
const requestId = RequestId.annotations({
  jsonSchema: { type: "string", minLength: 1, pattern: "^\\S([\\s\\S]*\\S)?$", description: "a request id" }
})
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
 * `approval.resolved`: a human approved or denied. With `decision` (and, for `approve_session`,
 * `scope` and `sessionTtlMs`) it carries the whole resolution the request's row holds, so that a
 * waiter woken by it needs no read of the row (events written before these fields have none).
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
  elapsedMs,
  /** what the human answered (`outcome` is the result: an edit the policy denies ends `denied`) */
  decision: Schema.optional(Schema.Literal("approve_once", "approve_session", "deny")),
  /** for `approve_session`: the scope the session approval was granted with */
  scope: Schema.optional(Decision.SessionScope),
  /** for `approve_session`: the lifetime the approver gave it */
  sessionTtlMs: Schema.optional(Schema.Number)
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
 * `policy.loaded`: the gate switched to policy `policyVersion` (from `previousVersion`); every
 * call judged after this event is judged by it. `source` names the file it was read from.
 *
 * @since 0.1.0
 * @category models
 */
export const PolicyLoadedEvent = Schema.Struct({
  at,
  type: Schema.Literal("policy.loaded"),
  outcome: Schema.Literal("loaded"),
  policyVersion,
  previousVersion: Schema.optional(policyVersion),
  source: Schema.optional(Schema.String)
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
  RefusedEvent,
  PolicyLoadedEvent
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
  | typeof PolicyLoadedEvent

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
  sequenced(RefusedEvent),
  sequenced(PolicyLoadedEvent)
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
  elapsedMs: resolution.resolvedAt - request.createdAt,
  ...(resolution.decision !== undefined ? { decision: resolution.decision } : {}),
  ...(resolution.scope !== undefined ? { scope: resolution.scope } : {}),
  ...(resolution.sessionTtlMs !== undefined ? { sessionTtlMs: resolution.sessionTtlMs } : {})
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

/**
 * `policy.loaded`: the gate switched from `previousVersion` to `version` at `at`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const policyLoaded = (
  version: string,
  previousVersion: string | undefined,
  at: number,
  source: string | undefined
): typeof PolicyLoadedEvent.Type => ({
  at,
  type: "policy.loaded",
  outcome: "loaded",
  policyVersion: version,
  ...(previousVersion !== undefined ? { previousVersion } : {}),
  ...(source !== undefined ? { source } : {})
})

// --- times: RFC 3339 beside the epoch milliseconds ---------------------------------------------

/**
 * An epoch-millisecond time as RFC 3339 text, in UTC with milliseconds
 * (`2026-11-24T09:13:31.000Z`): the `time` every event carries beside `at` on the wire.
 *
 * @since 0.1.0
 * @category utils
 */
export const rfc3339 = (at: number): string => new Date(at).toISOString()

const rfc3339Text = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/

const daysIn = (year: number, month: number): number =>
  month === 2
    ? (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28
    : [4, 6, 9, 11].includes(month)
    ? 30
    : 31

/**
 * Epoch milliseconds of an RFC 3339 date-time (`2026-11-24T09:13:31Z`, `...T10:13:31.5+01:00`), or
 * `undefined` when the text is not one: every field is checked (no 30 February, no hour 24, no
 * leap second), where `Date.parse` would roll such a date over. Fractions beyond milliseconds are
 * cut.
 *
 * @since 0.1.0
 * @category utils
 */
export const parseRfc3339 = (text: string): number | undefined => {
  const m = rfc3339Text.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number
  ]
  const offsetHours = m[10] === undefined ? 0 : Number(m[10])
  const offsetMinutes = m[11] === undefined ? 0 : Number(m[11])
  if (
    month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59 ||
    offsetHours > 23 || offsetMinutes > 59
  ) return undefined
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, "0"))
  const offset = (m[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000
  const utc = new Date(0)
  utc.setUTCFullYear(year, month - 1, day)
  utc.setUTCHours(hour, minute, second, millis)
  return utc.getTime() - offset
}

const epochText = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/

/**
 * A time given as text, as `since` and `until` take it: an RFC 3339 date-time
 * (`2026-11-24T09:13:31Z`) or epoch milliseconds (`1795511611000`). Decodes to epoch
 * milliseconds; encodes to RFC 3339.
 *
 * @since 0.1.0
 * @category models
 */
export const TimeFromString: Schema.Schema<number, string> = Schema.transformOrFail(
  Schema.String.annotations({
    description: "an RFC 3339 date-time (2026-11-24T09:13:31Z) or milliseconds since the epoch"
  }),
  Schema.Number.pipe(Schema.finite()),
  {
    strict: true,
    decode: (text, _, ast) => {
      const at = epochText.test(text) ? Number(text) : parseRfc3339(text)
      return at !== undefined && Number.isFinite(at) && Math.abs(at) <= 8.64e15
        ? ParseResult.succeed(at)
        : ParseResult.fail(
          new ParseResult.Type(
            ast,
            text,
            `expected an RFC 3339 date-time (2026-11-24T09:13:31Z) or milliseconds since the epoch, got ${
              JSON.stringify(text)
            }`
          )
        )
    },
    encode: (at) => ParseResult.succeed(rfc3339(at))
  }
)

// --- the JSON form: what leaves the library (HTTP, Server-Sent Events, the CLI) -----------------

/** The arguments as the JSON object they are, where the log keeps their canonical text. */
// Its JSON Schema is `type: object` alone (any JSON inside): Unknown's own writes an `$id` that
// repeats in every use, which validators refuse as ambiguous.
// A row edited by hand may hold text that is no JSON object: it is shown as that text (a string),
// so a tampered row never stops the log from being read (`toolgate audit verify` names it).
const argsObject = Schema.Union(Schema.Record({ key: Schema.String, value: Schema.Unknown }), Schema.String)
  .annotations({ jsonSchema: { anyOf: [{ type: "object" }, { type: "string" }] } })

const time = Schema.String.annotations({
  description: "`at` as an RFC 3339 date-time (UTC)",
  jsonSchema: { format: "date-time" }
})

/**
 * One event type's JSON form: its fields with `time` after `at`, `args` and `editedArgs` as
 * objects.
 */
const jsonStruct = (event: Schema.Struct<Schema.Struct.Fields>) => {
  const fields: Record<string, Schema.Struct.Field> = {}
  for (const [name, field] of Object.entries(event.fields)) {
    fields[name] = name === "args"
      ? argsObject.annotations({
        jsonSchema: {
          anyOf: [{ type: "object" }, { type: "string" }],
          description: "the arguments asked for (a string only where a stored row's text is no JSON object)"
        }
      })
      : name === "editedArgs"
      ? Schema.optional(
        argsObject.annotations({
          jsonSchema: {
            anyOf: [{ type: "object" }, { type: "string" }],
            description:
              "the arguments the approver substituted (a string only where a stored row's text is no JSON object)"
          }
        })
      )
      : field
    if (name === "at") fields["time"] = time
  }
  const type = (event.fields["type"] as Schema.Literal<[string]>).literals[0]
  return Schema.Struct(fields).annotations({ title: type })
}

// every sequenced event type, read off the union (a type added there gets its JSON form here)
const members = (AuditEvent as unknown as Schema.Union<ReadonlyArray<Schema.Struct<Schema.Struct.Fields>>>).members

// a string is the stored text itself (see `argsObject`)
const argsText = (value: unknown): string | undefined =>
  value === undefined ? undefined : typeof value === "string" ? value : canonicalJson(value)

/** Canonical argument text back to its object; text that is no JSON object (a row edited by hand) stays text. */
const argsValue = (text: string): unknown => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : text
  } catch {
    return text
  }
}

/**
 * An event in its JSON form: `args` and `editedArgs` as objects (`jq '.args.env'` works) and
 * `time`, `at` as RFC 3339, beside `at`. Fields in the order of the type's schema.
 *
 * @since 0.1.0
 * @category utils
 */
export const toJson = (event: AuditEvent): Json => {
  const json: Record<string, unknown> = { seq: event.seq, at: event.at, time: rfc3339(event.at) }
  for (const key of Object.keys(event)) {
    const value = (event as Record<string, unknown>)[key]
    if (key === "seq" || key === "at" || value === undefined) continue
    json[key] = key === "args" || key === "editedArgs" ? argsValue(value as string) : value
  }
  return json as unknown as Json
}

const fromJson = (json: Record<string, unknown>): Record<string, unknown> => {
  const event: Record<string, unknown> = {}
  for (const key of Object.keys(json)) {
    if (key === "time") continue
    event[key] = key === "args" || key === "editedArgs" ? argsText(json[key]) : json[key]
  }
  return event
}

/**
 * The JSON form of an event of the log, as the HTTP API, its Server-Sent Events and the CLI
 * write it: `args` and `editedArgs` are JSON objects, `time` is `at` as RFC 3339. Decoding gives
 * the `AuditEvent` back (the arguments as their canonical text, `time` dropped: `at` is the
 * time); encoding gives what `toJson` gives. The log keeps its own form: this one is for readers.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Json: Schema.Schema<AuditEvent, Json> = Schema.Union(
  ...members.map((member) =>
    Schema.transform(jsonStruct(member), Schema.typeSchema(member), {
      strict: false,
      decode: fromJson,
      encode: (event) => toJson(event as AuditEvent) as unknown as Record<string, unknown>
    })
  )
).annotations({
  identifier: "AuditEvent",
  title: "tool-gate audit event",
  description: "One event of the tool-gate audit log, as the HTTP API, its Server-Sent Events and the CLI write it."
}) as unknown as Schema.Schema<AuditEvent, Json>

type JsonOf<Event> = Event extends unknown ?
    & { readonly time: string }
    & {
      readonly [K in keyof Event]: K extends "args" | "editedArgs" ? { readonly [key: string]: unknown } : Event[K]
    }
  : never

/**
 * An event of the log in its JSON form (`Json`'s encoded side).
 *
 * @since 0.1.0
 * @category models
 */
export type Json = JsonOf<AuditEvent.Encoded>
