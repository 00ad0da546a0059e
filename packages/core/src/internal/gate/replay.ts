/**
 * Replay by tool-call id: the idea the gate rests on. A tool-call id names one call in its
 * session. Asking again for an id returns what is on record for it (a decision or a request),
 * never a second judgement, and only to the very same call (tool, canonical arguments, agent,
 * intent, working directory): another call under a known id is refused and audited, wherever the
 * record is found (before judging, or when the store finds it while writing, because a racing
 * caller recorded it first).
 *
 * It is what lets `gate` wait without holding anything but the call: `gate` → `authorize` (which
 * records a request and pauses) → a wait for the answer → `authorize` again, which replays the answered
 * request for the same id. A pipeline that stopped at the pause does the same from another process.
 */
import { Effect } from "effect"
import * as ApprovalRequest from "../../ApprovalRequest.js"
import type { ApprovalStore, Recorded } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import type * as Decision from "../../Decision.js"
import * as PauseSignal from "../../PauseSignal.js"
import type { Policy } from "../../Policy.js"
import * as ToolCall from "../../ToolCall.js"
import { CallAlreadyExecuted, type PersistenceError, reusedCallId, ToolDenied } from "../../ToolGateError.js"
import * as CallIdentity from "../callIdentity.js"
import type { Allowed, CallError } from "./contract.js"
import type { Requests } from "./requests.js"

/** What a call replayed from its record comes to. */
export type Replayed = Effect.Effect<Allowed | PauseSignal.PauseSignal, ToolDenied | CallAlreadyExecuted | CallError>

const deniedError = (request: ApprovalRequest.ApprovalRequest): ToolDenied =>
  new ToolDenied({
    toolCallId: request.toolCall.id,
    toolName: request.toolCall.name,
    sessionKey: request.toolCall.sessionKey,
    outcome: request.status === "expired" ? "expired" : "denied",
    reason: request.resolution?.reason ?? (request.status === "expired" ? "approval timed out" : "denied"),
    rule: request.rule.id,
    requestId: request.requestId
  })

/** Whether the record found for the call's id is the record of this very call. */
export const isSameCall = (call: ToolCall.ToolCall, record: Recorded): boolean =>
  record._tag === "Request"
    ? CallIdentity.sameCall(record.request.toolCall, call)
    : record.decision.callDigest === CallIdentity.callDigest(call, ToolCall.canonicalArgs(call.args))

/** The answer a recorded policy decision gives its call. */
export const fromDecision = (
  call: ToolCall.ToolCall,
  decision: Decision.Allow | Decision.Deny
): Effect.Effect<Allowed, ToolDenied> =>
  decision._tag === "Allow"
    ? Effect.succeed({ _tag: "Allowed", call, decision, request: undefined })
    : Effect.fail(
      new ToolDenied({
        toolCallId: call.id,
        toolName: call.name,
        sessionKey: call.sessionKey,
        outcome: "policy",
        reason: decision.reason,
        rule: decision.rule.id
      })
    )

/** The replay part of the gate. */
export const make = (
  options: {
    readonly store: ApprovalStore["Type"]
    readonly policy: Policy
  } & Pick<Requests, "current">
) => {
  const { current, policy, store } = options

  /** Refuses, and audits, a call whose id is on record for another call. */
  const refuseReused = (call: ToolCall.ToolCall, args: string, now: number) =>
    Effect.zipRight(
      store.append([
        AuditEvent.callRefused(
          call,
          now,
          args,
          `tool call id ${call.id} was already used in this session for another call`
        )
      ]),
      Effect.fail(reusedCallId(call.id))
    )

  /**
   * An approved request runs once, and only if the policy of this process does not deny what will
   * run (the approver's edit, or the call as asked): an approver elsewhere may hold another policy.
   */
  const fromApproved = (
    request: ApprovalRequest.ApprovalRequest,
    now: number
  ): Effect.Effect<Allowed, ToolDenied | CallAlreadyExecuted | PersistenceError> => {
    const runs: ToolCall.ToolCall = { ...request.toolCall, args: ApprovalRequest.effectiveArgs(request) }
    const verdict = policy.evaluate(runs)
    if (verdict._tag === "Deny") {
      const denied = new ToolDenied({
        toolCallId: runs.id,
        toolName: runs.name,
        sessionKey: runs.sessionKey,
        outcome: "policy",
        reason: verdict.reason,
        rule: verdict.rule.id,
        requestId: request.requestId
      })
      // spent, so that it can never run later, and audited in the same transaction, once
      return Effect.zipRight(
        store.consume(
          request.requestId,
          now,
          AuditEvent.decision(runs, verdict, now, ToolCall.canonicalArgs(request.toolCall.args), request)
        ),
        Effect.fail(denied)
      )
    }
    return Effect.flatMap(store.consume(request.requestId, now), (spent) =>
      spent
        ? Effect.succeed<Allowed>({ _tag: "Allowed", call: runs, decision: undefined, request })
        : Effect.fail(new CallAlreadyExecuted({ toolCallId: runs.id, requestId: request.requestId })))
  }

  /** The answer a recorded request gives its call: still paused, approved (once), or denied. */
  const fromRequest = (
    request: ApprovalRequest.ApprovalRequest,
    now: number
  ): Effect.Effect<Allowed | PauseSignal.PauseSignal, ToolDenied | CallAlreadyExecuted | PersistenceError> =>
    Effect.flatMap(current(request, now), (settled): Effect.Effect<
      Allowed | PauseSignal.PauseSignal,
      ToolDenied | CallAlreadyExecuted | PersistenceError
    > => {
      switch (settled.status) {
        case "pending":
          return Effect.succeed(PauseSignal.fromRequest(settled))
        case "approved":
          return fromApproved(settled, now)
        default:
          return Effect.fail(deniedError(settled))
      }
    })

  /** Replay by call id: the record's answer for the call, or a refusal when the record is another call's. */
  const replay = (call: ToolCall.ToolCall, args: string, record: Recorded, now: number): Replayed =>
    !isSameCall(call, record)
      ? refuseReused(call, args, now)
      : record._tag === "Request"
      ? fromRequest(record.request, now)
      : fromDecision(call, record.decision.decision)

  return { replay, refuseReused, fromRequest } as const
}
