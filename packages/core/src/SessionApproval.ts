/**
 * An "approve for this session" grant: scoped to one session key and one tool (case-insensitive),
 * and, unless tool-wide, to the canonical-args digest and working directory of the approved call.
 *
 * @example
 * import { SessionApproval } from "@tool-gate/core"
 *
 * const isToolWide = (a: SessionApproval.SessionApproval) => a.scope === "tool"
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { SessionScope } from "./Decision.js"
import { argsDigest, normalizeName, SessionKey, type ToolArgs } from "./ToolCall.js"

/**
 * @since 0.1.0
 * @category models
 */
export const SessionApprovalId = Schema.NonEmptyTrimmedString.pipe(Schema.brand("@tool-gate/SessionApprovalId"))
/**
 * @since 0.1.0
 * @category models
 */
export type SessionApprovalId = typeof SessionApprovalId.Type

/**
 * @since 0.1.0
 * @category models
 */
export const SessionApproval = Schema.Struct({
  id: SessionApprovalId,
  sessionKey: SessionKey,
  /** lower-cased tool name */
  toolName: Schema.String,
  scope: SessionScope,
  /** SHA-256 of the canonical arguments; present when `scope` is `exact` */
  argsDigest: Schema.optional(Schema.String),
  /** canonical JSON of the approved arguments, for people reading the list */
  args: Schema.optional(Schema.String),
  workingDirectory: Schema.optional(Schema.String),
  grantedBy: Schema.optional(Schema.String),
  requestId: Schema.optional(Schema.String),
  createdAt: Schema.Number,
  expiresAt: Schema.optional(Schema.Number),
  revokedAt: Schema.optional(Schema.Number),
  /** sequence number of the last change, for incremental catch-up */
  seq: Schema.Number
})
/**
 * @since 0.1.0
 * @category models
 */
export interface SessionApproval extends Schema.Schema.Type<typeof SessionApproval> {}

/**
 * Active at `now`: not revoked and not past its optional expiry.
 *
 * @since 0.1.0
 * @category guards
 */
export const isActive = (approval: SessionApproval, now: number): boolean =>
  approval.revokedAt === undefined && (approval.expiresAt === undefined || approval.expiresAt > now)

/**
 * Whether this approval, active at `now`, covers the call (`digest`: the call's `argsDigest`, when
 * already known): a tool-wide grant covers every call of
 * its tool in its session; an exact grant only the same canonical arguments in the same working
 * directory (a grant made for a call without one covers only calls without one). Only the call's
 * own session is ever covered.
 *
 * @since 0.1.0
 * @category guards
 */
export const covers = (
  approval: SessionApproval,
  call: {
    readonly sessionKey: string
    readonly name: string
    readonly args: ToolArgs
    readonly workingDirectory?: string | undefined
  },
  now: number,
  digest?: string
): boolean =>
  approval.sessionKey === call.sessionKey &&
  approval.toolName === normalizeName(call.name) &&
  isActive(approval, now) &&
  (approval.scope === "tool" ||
    (approval.argsDigest === (digest ?? argsDigest(call.args)) && approval.workingDirectory === call.workingDirectory))
