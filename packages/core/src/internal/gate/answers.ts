/**
 * Answers: a human's response to a request, validated, turned into its resolution (and, for
 * `approve_session`, the session approval it grants) and committed exactly once; the same answer
 * again returns the first resolution, a conflicting one is refused.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Either, Option, Schema } from "effect"
import * as ApprovalRequest from "../../ApprovalRequest.js"
import type { ApprovalStore, NewSessionApproval } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import type * as Limits from "../../Limits.js"
import type { Policy } from "../../Policy.js"
import * as ToolCall from "../../ToolCall.js"
import { AlreadyResolved, InvalidResponse, problemsOf, RequestExpired, RequestNotFound } from "../../ToolGateError.js"
import type { RespondError } from "./contract.js"
import type { Projection } from "./grants.js"
import * as Ids from "./ids.js"
import * as Observe from "./observe.js"
import type { Requests } from "./requests.js"

const decodeResponse = Schema.decodeUnknownEither(ApprovalRequest.ApprovalResponse, { errors: "all" })

const invalidResponse = (path: string, message: string) => new InvalidResponse({ problems: [{ path, message }] })

/**
 * An answer as given to `respond`, decoded: the response schema, then the edited arguments under
 * the gate's limits, then the fields that apply only to some decisions.
 */
export const decodeAnswer = (
  input: unknown,
  limits: Limits.CallLimits
): Either.Either<ApprovalRequest.ApprovalResponse, InvalidResponse> => {
  const decoded = decodeResponse(input)
  if (Either.isLeft(decoded)) return Either.left(new InvalidResponse({ problems: problemsOf(decoded.left) }))
  const response = decoded.right
  if (response.editedArgs !== undefined) {
    const edited = ToolCall.decodeArgs(response.editedArgs, { limits, path: "editedArgs" })
    if (Either.isLeft(edited)) return Either.left(new InvalidResponse({ problems: edited.left }))
  }
  if (response.scope !== undefined && response.decision !== "approve_session") {
    return Either.left(invalidResponse("scope", "scope applies only to approve_session"))
  }
  if (response.sessionTtlMs !== undefined && response.decision !== "approve_session") {
    return Either.left(invalidResponse("sessionTtlMs", "sessionTtlMs applies only to approve_session"))
  }
  if (response.editedArgs !== undefined && response.decision === "deny") {
    return Either.left(invalidResponse("editedArgs", "edited arguments apply only to an approval"))
  }
  return Either.right(response)
}

/** A second answer to a resolved request: the first resolution when it is the same answer. */
const settleRepeat = (
  request: ApprovalRequest.ApprovalRequest,
  response: ApprovalRequest.ApprovalResponse
): Effect.Effect<ApprovalRequest.ApprovalRequest, AlreadyResolved | RequestExpired> => {
  if (request.status === "expired") {
    return Effect.fail(new RequestExpired({ requestId: request.requestId, expiresAt: request.expiresAt }))
  }
  if (ApprovalRequest.sameAnswer(request, response)) return Effect.succeed(request)
  return Effect.fail(
    new AlreadyResolved({
      requestId: request.requestId,
      status: request.status as "approved" | "denied",
      ...(request.resolution?.respondedBy !== undefined ? { respondedBy: request.resolution.respondedBy } : {})
    })
  )
}

/** The resolution an answer gives a pending request, and the session approval it grants, if any. */
const resolutionFor = (
  policy: Policy,
  request: ApprovalRequest.ApprovalRequest,
  response: ApprovalRequest.ApprovalResponse,
  now: number
): { resolution: ApprovalRequest.Resolution; grant: NewSessionApproval | undefined } => {
  const base = {
    decision: response.decision,
    resolvedAt: now,
    ...(response.respondedBy !== undefined ? { respondedBy: response.respondedBy } : {}),
    ...(response.editedArgs !== undefined ? { editedArgs: response.editedArgs } : {})
  }
  if (response.decision === "deny") {
    return {
      resolution: { ...base, status: "denied", reason: response.reason ?? "denied by a human" },
      grant: undefined
    }
  }
  const call = { ...request.toolCall, args: response.editedArgs ?? request.toolCall.args }
  if (response.editedArgs !== undefined) {
    // An edit never inherits the approval blindly: the policy judges the edited call again.
    const verdict = policy.evaluate(call)
    if (verdict._tag === "Deny") {
      return {
        resolution: {
          ...base,
          status: "denied",
          deniedBy: "policy",
          reason: `edited arguments are denied by policy rule ${verdict.rule.id}: ${verdict.reason}`
        },
        grant: undefined
      }
    }
  }
  const reason = response.reason !== undefined ? { reason: response.reason } : {}
  if (response.decision === "approve_once") {
    return { resolution: { ...base, ...reason, status: "approved" }, grant: undefined }
  }
  const scope = response.scope ?? request.sessionScope
  const lifetime = response.sessionTtlMs !== undefined ? { sessionTtlMs: response.sessionTtlMs } : {}
  const grant: NewSessionApproval = {
    id: Ids.sessionApprovalId(),
    sessionKey: call.sessionKey,
    toolName: ToolCall.normalizeName(call.name),
    scope,
    ...(scope === "exact"
      ? {
        argsDigest: ToolCall.argsDigest(call.args),
        args: ToolCall.canonicalArgs(call.args),
        ...(call.workingDirectory !== undefined ? { workingDirectory: call.workingDirectory } : {})
      }
      : {}),
    ...(response.respondedBy !== undefined ? { grantedBy: response.respondedBy } : {}),
    requestId: request.requestId,
    createdAt: now,
    ...(response.sessionTtlMs !== undefined ? { expiresAt: now + response.sessionTtlMs } : {})
  }
  return {
    resolution: { ...base, ...reason, status: "approved", scope, ...lifetime, sessionApprovalId: grant.id },
    grant
  }
}

/** The answer part of the gate: `respond`. */
export const make = (
  options: {
    readonly store: ApprovalStore["Type"]
    readonly policy: Policy
    readonly limits: Limits.CallLimits
    readonly projection: Projection
    /** an answer committed on its own (not inside a caller's transaction), as committed */
    readonly answered: (request: ApprovalRequest.ApprovalRequest) => void
  } & Pick<Requests, "refuseOverdue">
) => {
  const { limits, policy, projection, refuseOverdue, store } = options

  /**
   * Answers a pending request with a decoded response; the same answer again returns the first
   * resolution. One store step claims the request and commits what the answer makes of it, so
   * answers arriving together merge into one write.
   */
  const answer = (
    requestId: ApprovalRequest.RequestId,
    response: ApprovalRequest.ApprovalResponse
  ): Effect.Effect<ApprovalRequest.ApprovalRequest, RespondError> =>
    Effect.clockWith((clock) => {
      const now = clock.unsafeCurrentTimeMillis()
      const stored = store.answer(requestId, now, (request) => {
        const { grant, resolution } = resolutionFor(policy, request, response, now)
        return { resolution, event: AuditEvent.approvalResolved(request, resolution), grant }
      })
      return Effect.flatMap(stored, (result): Effect.Effect<ApprovalRequest.ApprovalRequest, RespondError> => {
        switch (result._tag) {
          case "NotFound":
            return Effect.fail(new RequestNotFound({ requestId }))
          case "NotPending":
            return settleRepeat(result.request, response)
          case "Overdue":
          case "NotDue":
            return refuseOverdue(result.request, now)
          case "Resolved": {
            const observed = Effect.zipRight(
              Observe.answered(result.request),
              Effect.contextWith((context: Context.Context<never>) => {
                if (Option.isNone(Context.getOption(context, SqlClient.TransactionConnection))) {
                  options.answered(result.request)
                }
                return result.request
              })
            )
            return result.grant === undefined ? observed : Effect.zipRight(projection.project([result.grant]), observed)
          }
        }
      })
    })

  /** `respond`: the input is decoded once, here at the edge; everything after works on the typed answer. */
  const respond = (
    requestId: ApprovalRequest.RequestId,
    input: unknown
  ): Effect.Effect<ApprovalRequest.ApprovalRequest, RespondError> =>
    Effect.flatMap(Effect.suspend(() => decodeAnswer(input, limits)), (response) => answer(requestId, response))

  return { respond } as const
}
