/**
 * Decisions: the enforced policy, then the session approvals that turn a `requireApproval` into an
 * allow, the candidate (shadow) policy judged beside them, the hooks around every decision, and the
 * audit events a decision commits with.
 */
import { Clock, Effect, Function, Ref } from "effect"
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

  const decideWith = (
    held: SessionIndex.SessionIndex,
    call: ToolCall.ToolCall,
    now: number,
    judge: Policy
  ): Decision.Decision => {
    const decision = judge.evaluate(call)
    if (decision._tag !== "RequireApproval") return decision
    const grant = SessionIndex.lookup(held, call, now)
    return grant === undefined ? decision : allowedBy(decision, grant)
  }

  /** The candidate policy's decision for the call, when it has another outcome than `decision`. */
  const shadowOf = (
    held: SessionIndex.SessionIndex,
    call: ToolCall.ToolCall,
    decision: Decision.Decision,
    now: number
  ): Decision.Decision | undefined => {
    if (shadowPolicy === undefined) return undefined
    const candidate = decideWith(held, call, now, shadowPolicy)
    return Decision.outcome(candidate) === Decision.outcome(decision) ? undefined : candidate
  }

  const decide = (held: SessionIndex.SessionIndex, call: ToolCall.ToolCall, now: number): Judgement => {
    const decision = decideWith(held, call, now, policy)
    return { decision, shadow: shadowOf(held, call, decision, now) }
  }

  /** `decision` judged beside the candidate policy, against the projection as it is now. */
  const judgeAgain = (call: ToolCall.ToolCall, decision: Decision.Decision, now: number) =>
    Effect.map(
      Ref.get(projection.index),
      (held): Judgement => ({ decision, shadow: shadowOf(held, call, decision, now) })
    )

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
  const judge = (call: ToolCall.ToolCall, now: number) =>
    withHooks(call, Effect.map(Ref.get(projection.index), (held) => decide(held, call, now)), judgementDecision)

  /** `evaluate`: the decision, committed to the log as events only (no record for the call id). */
  const evaluate = (call: ToolCall.ToolCall) =>
    withHooks(
      call,
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.flatMap(Ref.get(projection.index), (held) => {
          const args = ToolCall.canonicalArgs(call.args)
          const judgement = decide(held, call, now)
          return Effect.as(store.append(events(call, judgement, now, args)), judgement.decision)
        })),
      Function.identity
    )

  return {
    judge,
    judgeAgain,
    evaluate,
    hooked: hooks.beforePolicyDecision !== undefined || hooks.afterPolicyDecision !== undefined
  } as const
}

const judgementDecision = (judgement: Judgement) => judgement.decision
