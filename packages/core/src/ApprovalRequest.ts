/**
 * A durable request for a human's approval of one tool call, the answer a human gives, and the
 * resolution that answer (or the TTL) produced.
 *
 * @example
 * import { ApprovalRequest } from "@tool-gate/core"
 *
 * const answer: ApprovalRequest.ApprovalResponse = { decision: "deny", reason: "not on prod", respondedBy: "ana" }
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { RuleRef, SessionScope } from "./Decision.js"
import { canonicalJson } from "./internal/canonical.js"
import { TtlMillis } from "./Limits.js"
import { OptionalToolArgs, type ToolArgs, ToolCall } from "./ToolCall.js"

/**
 * @since 0.1.0
 * @category models
 */
export const RequestId = Schema.NonEmptyTrimmedString.pipe(Schema.brand("@tool-gate/RequestId"))
/**
 * @since 0.1.0
 * @category models
 */
export type RequestId = typeof RequestId.Type

/**
 * @since 0.1.0
 * @category models
 */
export const Status = Schema.Literal("pending", "approved", "denied", "expired")
/**
 * @since 0.1.0
 * @category models
 */
export type Status = typeof Status.Type

/**
 * A human's answer. `approve_once` covers this one call; `approve_session` also grants the
 * session (scope `exact` by default, or the rule's `sessionScope`, or `tool` when asked);
 * `deny` is not remembered as a rule. `editedArgs` approves with changed arguments, which the
 * policy evaluates again.
 *
 * @since 0.1.0
 * @category models
 */
export const ApprovalResponse = Schema.Struct({
  decision: Schema.Literal("approve_once", "approve_session", "deny"),
  reason: Schema.optional(Schema.String),
  respondedBy: Schema.optional(Schema.String),
  scope: Schema.optional(SessionScope),
  editedArgs: Schema.optionalWith(OptionalToolArgs, { exact: true }),
  /** for `approve_session`: the session approval lapses after this many milliseconds */
  sessionTtlMs: Schema.optional(TtlMillis)
})
/**
 * @since 0.1.0
 * @category models
 */
export type ApprovalResponse = typeof ApprovalResponse.Type

/**
 * How a request ended.
 *
 * @since 0.1.0
 * @category models
 */
export const Resolution = Schema.Struct({
  status: Schema.Literal("approved", "denied", "expired"),
  /** what the human answered; `status` is the outcome (an edit the policy denies ends `denied`) */
  decision: Schema.optional(Schema.Literal("approve_once", "approve_session", "deny")),
  reason: Schema.optional(Schema.String),
  respondedBy: Schema.optional(Schema.String),
  /** arguments the approver substituted; the tool runs with these */
  editedArgs: Schema.optionalWith(OptionalToolArgs, { exact: true }),
  /** `policy` when the outcome is the policy's, not the human's (an edit the policy denies) */
  deniedBy: Schema.optional(Schema.Literal("policy")),
  /** for `approve_session`: the scope and lifetime the approver asked for */
  scope: Schema.optional(SessionScope),
  sessionTtlMs: Schema.optional(Schema.Number),
  sessionApprovalId: Schema.optional(Schema.String),
  resolvedAt: Schema.Number
})
/**
 * @since 0.1.0
 * @category models
 */
export type Resolution = typeof Resolution.Type

/**
 * @since 0.1.0
 * @category models
 */
export const ApprovalRequest = Schema.Struct({
  requestId: RequestId,
  toolCall: ToolCall,
  /** SHA-256 of the canonical arguments the approval is bound to */
  argsDigest: Schema.String,
  rule: RuleRef,
  policyVersion: Schema.String,
  sessionScope: SessionScope,
  reason: Schema.String,
  prompt: Schema.String,
  createdAt: Schema.Number,
  expiresAt: Schema.Number,
  status: Status,
  resolution: Schema.optional(Resolution),
  /** when an approved call was handed to the tool: an approval is spent once */
  consumedAt: Schema.optional(Schema.Number),
  warnedAt: Schema.optional(Schema.Number)
})
/**
 * @since 0.1.0
 * @category models
 */
export interface ApprovalRequest extends Schema.Schema.Type<typeof ApprovalRequest> {}

/**
 * @since 0.1.0
 * @category guards
 */
export const isPending = (request: ApprovalRequest): boolean => request.status === "pending"

/**
 * The arguments the tool runs with once approved: the approver's edit, else the original.
 *
 * @since 0.1.0
 * @category utils
 */
export const effectiveArgs = (request: ApprovalRequest): ToolArgs =>
  request.resolution?.editedArgs ?? request.toolCall.args

/**
 * Whether a second answer is the same as the one that resolved the request (then it is
 * idempotent and returns the first resolution): same decision, same edited arguments and, for
 * `approve_session`, the same scope and lifetime. Any difference that would change the outcome
 * makes it a conflicting answer.
 *
 * @since 0.1.0
 * @category utils
 */
export const sameAnswer = (request: ApprovalRequest, response: ApprovalResponse): boolean => {
  const resolution = request.resolution
  if (resolution === undefined || resolution.decision !== response.decision) return false
  if (canonicalJson(resolution.editedArgs ?? null) !== canonicalJson(response.editedArgs ?? null)) return false
  return response.decision !== "approve_session" ||
    ((resolution.scope ?? request.sessionScope) === (response.scope ?? request.sessionScope) &&
      resolution.sessionTtlMs === response.sessionTtlMs)
}
