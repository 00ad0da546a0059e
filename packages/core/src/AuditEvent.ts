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
import { Schema } from "effect"
import { RuleSource } from "./Decision.js"

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
  ruleSource: Schema.optional(RuleSource),
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
