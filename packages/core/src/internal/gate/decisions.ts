/**
 * Decisions: the enforced policy, then the session approvals that turn a `requireApproval` into an
 * allow, the candidate (shadow) policy judged beside them, the hooks around every decision, and the
 * audit events a decision commits with.
 */
import { Clock, Effect, Function } from "effect"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import * as Decision from "../../Decision.js"
import type { Policy } from "../../Policy.js"
import type * as SessionApproval from "../../SessionApproval.js"
import * as ToolCall from "../../ToolCall.js"
import type { PersistenceError } from "../../ToolGateError.js"
import * as SessionIndex from "../sessionIndex.js"
import type { Hooks } from "./contract.js"
import type { Projection } from "./grants.js"

/** A requireApproval decision turned into an allow by a session approval that covers the call. */
export const allowedBy = (
  decision: Decision.RequireApproval,
  grant: SessionApproval.SessionApproval
): Decision.Allow => ({
  _tag: "Allow",
  via: "sessionApproval",
  rule: decision.rule,
  sessionApprovalId: grant.id,
  policyVersion: decision.policyVersion
})

/**
 * The enforced decision, and the candidate policy's decision when it disagrees (a different
 * outcome): that one is only audited, as `policy.shadow`.
 */
export interface Judgement {
  readonly decision: Decision.Decision
  readonly shadow: Decision.Decision | undefined
}

/** The events a judgement commits with: the decision, then the disagreement when there is one. */
export const events = (
  call: ToolCall.ToolCall,
  judgement: Judgement,
  now: number,
  args: string
): Array<AuditEvent.UnsequencedEvent> =>
  judgement.shadow === undefined
    ? [AuditEvent.decision(call, judgement.decision, now, args)]
    : [
      AuditEvent.decision(call, judgement.decision, now, args),
      AuditEvent.policyShadow(call, judgement.decision, judgement.shadow, now, args)
    ]

/** The decision part of the gate. */
export const make = (options: {
  readonly store: ApprovalStore["Type"]
  readonly policy: Policy
  readonly shadowPolicy: Policy | undefined
  readonly hooks: Hooks
  readonly projection: Projection
}) => {
  const { hooks, policy, projection, shadowPolicy, store } = options

  /** `decision`, turned into an allow by an approval of the session that covers the call. */
  const withGrant = (
    decision: Decision.Decision,
    grants: SessionIndex.SessionGrants | undefined,
    call: ToolCall.ToolCall,
    now: number
  ): Decision.Decision => {
    if (decision._tag !== "RequireApproval" || grants === undefined) return decision
    const grant = SessionIndex.lookup(grants, call, now)
    return grant === undefined ? decision : allowedBy(decision, grant)
  }

  /** The candidate policy's decision for the call, when it has another outcome than `decision`. */
  const shadowOf = (
    candidate: Decision.Decision | undefined,
    decision: Decision.Decision,
    grants: SessionIndex.SessionGrants | undefined,
    call: ToolCall.ToolCall,
    now: number
  ): Decision.Decision | undefined => {
    if (candidate === undefined) return undefined
    const judged = withGrant(candidate, grants, call, now)
    return Decision.outcome(judged) === Decision.outcome(decision) ? undefined : judged
  }

  /** Whether the session's approvals can change the judgement: one of the policies asks for approval. */
  const needsGrants = (enforced: Decision.Decision, candidate: Decision.Decision | undefined) =>
    enforced._tag === "RequireApproval" || candidate?._tag === "RequireApproval"

  const judgementOf = (
    call: ToolCall.ToolCall,
    now: number,
    enforced: Decision.Decision,
    candidate: Decision.Decision | undefined,
    grants: SessionIndex.SessionGrants | undefined
  ): Judgement => {
    const decision = withGrant(enforced, grants, call, now)
    return { decision, shadow: shadowOf(candidate, decision, grants, call, now) }
  }

  /**
   * The judgement of the policies' decisions; the session's approvals are read (held, or from the
   * store on the session's first need) only when one of them asks for approval.
   */
  const judged = (
    call: ToolCall.ToolCall,
    now: number,
    enforced: Decision.Decision,
    candidate: Decision.Decision | undefined
  ): Effect.Effect<Judgement, PersistenceError> => {
    if (!needsGrants(enforced, candidate)) return Effect.succeed(judgementOf(call, now, enforced, candidate, undefined))
    const held = projection.held(call.sessionKey)
    return held !== undefined
      ? Effect.succeed(judgementOf(call, now, enforced, candidate, held))
      : Effect.map(
        projection.grantsOf(call.sessionKey),
        (grants) => judgementOf(call, now, enforced, candidate, grants)
      )
  }

  const decide = (call: ToolCall.ToolCall, now: number) =>
    Effect.suspend(() => judged(call, now, policy.evaluate(call), shadowPolicy?.evaluate(call)))

  const hooked = hooks.beforePolicyDecision !== undefined || hooks.afterPolicyDecision !== undefined

  /**
   * The judgement `judge` comes to, given at once when it needs no effect: no hooks, and the
   * session's approvals not needed or held (the allow hot path runs no effect to judge a call).
   * `undefined`: run `judge`.
   */
  const judgeNow = (call: ToolCall.ToolCall, now: number): Judgement | undefined => {
    if (hooked) return undefined
    const enforced = policy.evaluate(call)
    const candidate = shadowPolicy?.evaluate(call)
    if (!needsGrants(enforced, candidate)) return judgementOf(call, now, enforced, candidate, undefined)
    const held = projection.held(call.sessionKey)
    return held === undefined ? undefined : judgementOf(call, now, enforced, candidate, held)
  }

  /** `decision` judged beside the candidate policy, against the session's approvals as they are now. */
  const judgeAgain = (call: ToolCall.ToolCall, decision: Decision.Decision, now: number) =>
    shadowPolicy === undefined
      ? Effect.succeed<Judgement>({ decision, shadow: undefined })
      : Effect.suspend(() => {
        const candidate = shadowPolicy.evaluate(call)
        return candidate._tag === "RequireApproval"
          ? Effect.map(projection.grantsOf(call.sessionKey), (grants): Judgement => ({
            decision,
            shadow: shadowOf(candidate, decision, grants, call, now)
          }))
          : Effect.succeed<Judgement>({ decision, shadow: shadowOf(candidate, decision, undefined, call, now) })
      })

  const withHooks = <A>(
    call: ToolCall.ToolCall,
    body: Effect.Effect<A, PersistenceError>,
    decisionOf: (a: A) => Decision.Decision
  ): Effect.Effect<A, PersistenceError> => {
    const before = hooks.beforePolicyDecision
    const after = hooks.afterPolicyDecision
    const withBefore = before ? Effect.zipRight(before(call), body) : body
    return after ? Effect.tap(withBefore, (a) => after(call, decisionOf(a))) : withBefore
  }

  /** The judgement for a call at `now`, between the hooks; nothing is recorded. */
  const judge = (call: ToolCall.ToolCall, now: number) => withHooks(call, decide(call, now), judgementDecision)

  /** `evaluate`: the decision, committed to the log as events only (no record for the call id). */
  const evaluate = (call: ToolCall.ToolCall) =>
    withHooks(
      call,
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.flatMap(decide(call, now), (judgement) => {
          const args = ToolCall.canonicalArgs(call.args)
          return Effect.as(store.append(events(call, judgement, now, args)), judgement.decision)
        })),
      Function.identity
    )

  return { judge, judgeNow, judgeAgain, evaluate, hooked } as const
}

const judgementDecision = (judgement: Judgement) => judgement.decision
