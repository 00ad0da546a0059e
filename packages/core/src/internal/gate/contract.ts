/**
 * The types the gate's parts share with its public module (`ToolGate.ts` re-exports them): what
 * a caller gets when a call may run, the options and hooks of a gate, and the error unions. They
 * live here so that no part imports `ToolGate.ts` back.
 */
import type { Duration, Effect, Stream } from "effect"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type * as Decision from "../../Decision.js"
import type * as Limits from "../../Limits.js"
import type { Policy, Reload } from "../../Policy.js"
import type * as ToolCall from "../../ToolCall.js"
import type {
  AlreadyResolved,
  InvalidResponse,
  InvalidToolCall,
  PersistenceError,
  RequestExpired,
  RequestNotFound
} from "../../ToolGateError.js"

/**
 * The tool may run now, with `call` (whose arguments are the approver's edit when there was one).
 *
 * @since 0.1.0
 * @category models
 */
export interface Allowed {
  readonly _tag: "Allowed"
  readonly call: ToolCall.ToolCall
  /** the policy decision, when no human was involved */
  readonly decision: Decision.Allow | undefined
  /** the approved request, when a human approved this call */
  readonly request: ApprovalRequest.ApprovalRequest | undefined
}

/**
 * Hook points around every policy decision (in addition to the `audit` stream).
 *
 * @since 0.1.0
 * @category models
 */
export interface Hooks {
  readonly beforePolicyDecision?: (call: ToolCall.ToolCall) => Effect.Effect<void>
  readonly afterPolicyDecision?: (call: ToolCall.ToolCall, decision: Decision.Decision) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** the policy enforced from the start */
  readonly policy: Policy
  /**
   * New versions of the policy to enforce without a restart (`Policy.watch(path)`). Each other
   * version is switched to whole, after its `policy.loaded` audit event; a `Rejected` one is
   * logged and the gate keeps the policy it has.
   */
  readonly reload?: Stream.Stream<Reload> | undefined
  /**
   * A candidate policy judged beside the enforced one and never enforced (dry run): every call
   * for which it would decide differently gets a `policy.shadow` audit event.
   */
  readonly shadowPolicy?: Policy | undefined
  readonly hooks?: Hooks | undefined
  /** how often overdue requests are expired and warnings emitted (default 1 second) */
  readonly sweepInterval?: Duration.DurationInput | undefined
  /** how long before expiry an `approval.expiring` warning is emitted (default 1 minute, at most half the TTL) */
  readonly warnBefore?: Duration.DurationInput | undefined
  /** bounds on ids and arguments of calls and edits (default `Limits.defaultCallLimits`) */
  readonly limits?: Limits.CallLimitsInput | undefined
  /**
   * How many sessions' approvals the gate holds in memory (default 10,000). A session's approvals
   * are read from the store on its first call that needs them; beyond this many sessions the least
   * recently used is dropped, and read again when it needs them again.
   */
  readonly heldSessions?: number | undefined
  /**
   * Whether the gate's spans carry the call's arguments (`toolgate.args`, canonical JSON). Default
   * `false`: arguments may hold secrets, and spans often go where the audit log does not.
   */
  readonly traceArgs?: boolean | undefined
  /**
   * Whether every call the gate makes to its store is timed into `toolgate.store.duration`.
   * Default `false`: the timing costs about 3% of the CPU of an allowed call (W6).
   */
  readonly storeMetrics?: boolean | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export type CallError = InvalidToolCall | PersistenceError

/**
 * @since 0.1.0
 * @category models
 */
export type RespondError = RequestNotFound | AlreadyResolved | RequestExpired | InvalidResponse | PersistenceError

/**
 * Who revokes a session approval and, for a caller limited to one session (an HTTP token, a CLI
 * naming the session), the session the approval must belong to: one of another session is
 * refused exactly as a missing one.
 *
 * @since 0.1.0
 * @category models
 */
export interface RevokeOptions {
  readonly actor?: string | undefined
  readonly sessionKey?: ToolCall.SessionKey | undefined
}
