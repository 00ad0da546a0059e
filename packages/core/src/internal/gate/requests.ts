/**
 * Approval requests and their lifecycle: creation (the request a `requireApproval` decision
 * needs), reading, expiry (on read, on wait, on answer and by the background sweeper), the
 * pre-expiry warning and extension by an operator.
 */
import { Clock, type Duration, Effect, Either, Option, Schedule } from "effect"
import type * as Scope from "effect/Scope"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import type * as Decision from "../../Decision.js"
import * as Limits from "../../Limits.js"
import type * as ToolCall from "../../ToolCall.js"
import {
  AlreadyResolved,
  type InvalidToolCall,
  type PersistenceError,
  RequestExpired,
  RequestNotFound,
  RequestPending
} from "../../ToolGateError.js"
import { sha256 } from "../canonical.js"
import * as Ids from "./ids.js"
import * as Observe from "./observe.js"

// A prompt is read by people: it quotes this much of the arguments (the request keeps them whole).
const promptArgsLength = 500

const quoted = (args: string): string =>
  args.length <= promptArgsLength
    ? args
    : `${args.slice(0, promptArgsLength)}… (${args.length - promptArgsLength} more characters)`

/** The request a `requireApproval` decision asks for (`args`: the call's canonical arguments). */
export const newRequest = (
  call: ToolCall.ToolCall,
  decision: Decision.RequireApproval,
  now: number,
  args: string
): ApprovalRequest.ApprovalRequest => {
  const reason = decision.reason ?? `${call.name} requires approval (rule ${decision.rule.id})`
  return {
    requestId: Ids.requestId(),
    toolCall: call,
    argsDigest: sha256(args),
    rule: decision.rule,
    policyVersion: decision.policyVersion,
    sessionScope: decision.sessionScope,
    reason,
    // the request keeps the arguments whole; the prompt quotes a bounded part of them
    prompt: `Allow ${call.name} ${quoted(args)} in session ${call.sessionKey}? ${reason}`,
    createdAt: now,
    expiresAt: now + decision.ttlMs,
    status: "pending"
  }
}

/**
 * Expiries and warnings a sweep has in flight at once: enough to fill the store's batches, few
 * enough that live calls still find room in each.
 */
const SWEEP_IN_FLIGHT = 64

/** The request-lifecycle part of the gate. */
export const make = (options: {
  readonly store: ApprovalStore["Type"]
  readonly warnBeforeMs: number
  readonly sessionKeyOf: (sessionKey: string) => Either.Either<ToolCall.SessionKey, InvalidToolCall>
}) => {
  const { sessionKeyOf, store, warnBeforeMs } = options

  const getRequest = (requestId: ApprovalRequest.RequestId) =>
    Effect.flatMap(
      store.getRequest(requestId),
      Option.match({
        onNone: () => Effect.fail(new RequestNotFound({ requestId })),
        onSome: Effect.succeed
      })
    )

  /**
   * Expires an overdue request. The store judges the deadline (on the database's clock, for SQL
   * stores that keep time there): a request not yet due there comes back still pending.
   */
  const expire = (request: ApprovalRequest.ApprovalRequest, now: number) =>
    Effect.map(
      Effect.tap(
        store.resolve(
          request.requestId,
          {
            status: "expired",
            reason: `approval timed out after ${request.expiresAt - request.createdAt} ms`,
            resolvedAt: now
          },
          AuditEvent.approvalExpired(request, now)
        ),
        (result) => result._tag === "Resolved" ? Observe.expired : Effect.void
      ),
      (result) => result._tag === "NotFound" ? request : result.request
    )

  /** Settles a request that may be overdue: expired requests are resolved as such first. */
  const current = (request: ApprovalRequest.ApprovalRequest, now: number) =>
    request.status === "pending" && request.expiresAt <= now ? expire(request, now) : Effect.succeed(request)

  /** A request the store found overdue on its clock is expired there, then refused as such. */
  const refuseOverdue = (request: ApprovalRequest.ApprovalRequest, now: number) =>
    Effect.flatMap(
      expire(request, now),
      (settled) => Effect.fail(new RequestExpired({ requestId: settled.requestId, expiresAt: settled.expiresAt }))
    )

  const resume = (requestId: ApprovalRequest.RequestId) =>
    Effect.gen(function*() {
      const request = yield* getRequest(requestId)
      const settled = yield* current(request, yield* Clock.currentTimeMillis)
      if (settled.status === "pending") {
        return yield* new RequestPending({ requestId, expiresAt: settled.expiresAt })
      }
      return settled
    })

  const pending = (pendingOptions?: { readonly sessionKey?: ToolCall.SessionKey | undefined }) =>
    pendingOptions?.sessionKey !== undefined && Either.isLeft(sessionKeyOf(pendingOptions.sessionKey))
      ? Effect.succeed([])
      : store.listPending(pendingOptions)

  const extend = (
    requestId: ApprovalRequest.RequestId,
    ttl: Duration.DurationInput,
    actor?: string,
    extendOptions?: { readonly allowShorten?: boolean | undefined }
  ) =>
    Effect.gen(function*() {
      const ttlMs = yield* Limits.ttlMillis("ttl", ttl)
      const request = yield* getRequest(requestId)
      const now = yield* Clock.currentTimeMillis
      const settled = yield* current(request, now)
      const expiresAt = now + ttlMs
      const refused = (r: ApprovalRequest.ApprovalRequest) =>
        r.status === "expired"
          ? new RequestExpired({ requestId, expiresAt: r.expiresAt })
          : new AlreadyResolved({
            requestId,
            status: r.status as "approved" | "denied",
            // who answered, as a refused answer says
            ...(r.resolution?.respondedBy !== undefined ? { respondedBy: r.resolution.respondedBy } : {})
          })
      if (settled.status !== "pending") return yield* refused(settled)
      // An operator who asks for a TTL shorter than the time left wants at least that long, not
      // less: only an explicit `allowShorten` brings the deadline forward.
      if (expiresAt <= settled.expiresAt && extendOptions?.allowShorten !== true) return settled
      const result = yield* store.extend(
        settled.requestId,
        expiresAt,
        AuditEvent.approvalExtended(settled, now, expiresAt, actor)
      )
      switch (result._tag) {
        case "NotFound":
          return yield* new RequestNotFound({ requestId })
        case "NotPending":
          return yield* refused(result.request)
        case "Overdue":
        case "NotDue":
          return yield* refuseOverdue(result.request, now)
        case "Resolved":
          return result.request
      }
    })

  /**
   * One sweep: expires overdue requests and emits due warnings. A backlog (a gate that was down past
   * its requests' deadlines) goes `SWEEP_IN_FLIGHT` at a time, so the store commits it in batches.
   */
  const sweep = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const due = yield* store.listDue(now)
    const expired = yield* Effect.forEach(due, (request) => expire(request, now), { concurrency: SWEEP_IN_FLIGHT })
    const toWarn = yield* store.listToWarn(now, warnBeforeMs)
    yield* Effect.forEach(
      toWarn,
      (request) => store.markWarned(request.requestId, AuditEvent.approvalExpiring(request, now)),
      { concurrency: SWEEP_IN_FLIGHT, discard: true }
    )
    return expired.filter((request) => request.status === "expired")
  })

  return { getRequest, expire, current, refuseOverdue, resume, pending, extend, sweep } as const
}

/** The request-lifecycle part, as the other parts receive it. */
export type Requests = ReturnType<typeof make>

/** The sweeper: requests that expired while no process ran are settled now, then every `interval`. */
export const startSweeper = (
  sweep: Effect.Effect<unknown, PersistenceError>,
  interval: Duration.Duration
): Effect.Effect<void, PersistenceError, Scope.Scope> =>
  Effect.zipRight(
    sweep,
    Effect.asVoid(sweep.pipe(
      Effect.catchAll((error) => Effect.logWarning("tool-gate: expiry sweep failed; retrying", error)),
      Effect.repeat(Schedule.spaced(interval)),
      Effect.delay(interval),
      Effect.forkScoped,
      Effect.interruptible
    ))
  )
