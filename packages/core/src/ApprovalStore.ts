/**
 * Where requests, session approvals and the audit log live. The store is the source of truth;
 * the gate's memory is a cache. Every method is one atomic step (one transaction in SQL): a
 * projection change and the audit event describing it commit together, and "only if still
 * pending" is decided by the store, so answers are exactly-once across processes.
 *
 * `layerMemory` keeps everything in this process (tests, quick starts); `SqlApprovalStore`
 * implements the same interface on `@effect/sql`.
 *
 * @example
 * import { ApprovalStore, ToolGate, Policy } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Gate = ToolGate.layer({ policy: Policy.allowAll }).pipe(Layer.provide(ApprovalStore.layerMemory))
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Queue } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalRequest, RequestId, Resolution } from "./ApprovalRequest.js"
import type { AuditEvent, AuditQuery, UnsequencedEvent } from "./AuditEvent.js"
import { matches } from "./AuditEvent.js"
import type { Recorded as RecordedDecision } from "./Decision.js"
import type { SessionApproval, SessionApprovalId } from "./SessionApproval.js"
import { covers, isActive } from "./SessionApproval.js"
import type { PersistenceError } from "./ToolGateError.js"

/**
 * The outcome of a conditional resolve: applied, or refused because the request had already left
 * `pending` (the current row is returned so the caller can tell a repeat from a conflict).
 *
 * @since 0.1.0
 * @category models
 */
export type ResolveResult =
  | { readonly _tag: "Resolved"; readonly request: ApprovalRequest; readonly event: AuditEvent }
  | { readonly _tag: "NotPending"; readonly request: ApprovalRequest }
  | { readonly _tag: "NotFound" }
  /** an answer or extension of a request whose deadline has passed on the store's clock */
  | { readonly _tag: "Overdue"; readonly request: ApprovalRequest }
  /** an expiry of a request whose deadline has not come on the store's clock */
  | { readonly _tag: "NotDue"; readonly request: ApprovalRequest }

/**
 * The outcome of inserting an approval request: written, or nothing written because the store
 * already holds a record for its `(sessionKey, toolCall.id)` (a request, or a policy decision), or
 * because an active session approval of the session covers the call.
 *
 * @since 0.1.0
 * @category models
 */
export type CreateResult =
  | {
    readonly _tag: "Created"
    readonly request: ApprovalRequest
    readonly event: AuditEvent
    /** the `policy.shadow` event committed with the request, when one was given */
    readonly shadow?: AuditEvent | undefined
  }
  | { readonly _tag: "Existing"; readonly request: ApprovalRequest }
  | { readonly _tag: "Decided"; readonly decision: RecordedDecision }
  | { readonly _tag: "Covered"; readonly grant: SessionApproval }

/**
 * The outcome of recording a policy decision: written, or nothing written because the store
 * already holds a record for its `(sessionKey, toolCallId)` (a decision, or a request), or because
 * the session approval the decision relies on is no longer active.
 *
 * @since 0.1.0
 * @category models
 */
export type RecordResult =
  | { readonly _tag: "Created"; readonly decision: RecordedDecision }
  | { readonly _tag: "Existing"; readonly decision: RecordedDecision }
  | { readonly _tag: "Requested"; readonly request: ApprovalRequest }
  | { readonly _tag: "GrantInactive"; readonly sessionApprovalId: string }

/**
 * What is on record for a tool call id: its approval request, or its policy decision.
 *
 * @since 0.1.0
 * @category models
 */
export type Recorded =
  | { readonly _tag: "Request"; readonly request: ApprovalRequest }
  | { readonly _tag: "Decision"; readonly decision: RecordedDecision }

/**
 * A session approval before the store gives it its sequence number.
 *
 * @since 0.1.0
 * @category models
 */
export type NewSessionApproval = Omit<SessionApproval, "seq">

/**
 * @since 0.1.0
 * @category models
 */
export interface SessionApprovalQuery {
  readonly id?: string | undefined
  readonly sessionKey?: string | undefined
  /** only rows changed after this sequence number (granted or revoked since) */
  readonly afterSeq?: number | undefined
  /** only rows active at this time */
  readonly activeAt?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RevokeQuery {
  readonly sessionKey?: string | undefined
  readonly toolName?: string | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Appends events that change no projection (policy decisions); returns them sequenced. */
  readonly append: (
    events: ReadonlyArray<UnsequencedEvent>
  ) => Effect.Effect<ReadonlyArray<AuditEvent>, PersistenceError>
  /**
   * Inserts the request with its `approval.requested` event, in one transaction that first finds
   * any record for the same `(sessionKey, toolCall.id)` (`Existing`, `Decided`) and any session
   * approval active at `request.createdAt` (the database's clock, for SQL stores that judge time
   * there) that covers the call (`Covered`): then nothing is written. `shadow` (a `policy.shadow`
   * event) commits after `event`, with the request, and gets the request's id.
   */
  readonly createRequest: (
    request: ApprovalRequest,
    event: UnsequencedEvent,
    shadow?: UnsequencedEvent
  ) => Effect.Effect<CreateResult, PersistenceError>
  /**
   * Moves a request out of `pending`, only if it is still pending, committing the event and, for
   * `approve_session`, the session approval with it. An answer is refused as `Overdue` once the
   * request's deadline has passed, and an expiry as `NotDue` before it, both judged at
   * `resolution.resolvedAt` (or on the database's clock, for SQL stores that judge time there).
   */
  readonly resolve: (
    requestId: RequestId,
    resolution: Resolution,
    event: UnsequencedEvent,
    grant?: NewSessionApproval
  ) => Effect.Effect<ResolveResult, PersistenceError>
  /** Moves `expiresAt` of a pending request; refused once it is not pending or `Overdue` (at `event.at`). */
  readonly extend: (
    requestId: RequestId,
    expiresAt: number,
    event: UnsequencedEvent
  ) => Effect.Effect<ResolveResult, PersistenceError>
  /** Records the pre-expiry warning once. `false` when already warned or no longer pending. */
  readonly markWarned: (requestId: RequestId, event: UnsequencedEvent) => Effect.Effect<boolean, PersistenceError>
  /**
   * Spends an approved request: `true` for the one caller that may run the tool. `event` (an
   * enforcement denial) commits with the spending, and only with it.
   */
  readonly consume: (
    requestId: RequestId,
    at: number,
    event?: UnsequencedEvent
  ) => Effect.Effect<boolean, PersistenceError>
  readonly getRequest: (requestId: RequestId) => Effect.Effect<Option.Option<ApprovalRequest>, PersistenceError>
  readonly findByToolCall: (
    sessionKey: string,
    toolCallId: string
  ) => Effect.Effect<Option.Option<ApprovalRequest>, PersistenceError>
  /** The request or the policy decision on record for a tool call id (one lookup). */
  readonly findRecorded: (
    sessionKey: string,
    toolCallId: string
  ) => Effect.Effect<Option.Option<Recorded>, PersistenceError>
  /**
   * Records a policy decision for its tool call id with its events, in one transaction that first
   * finds any record for that id (`Existing`, `Requested`) and, for an allow through a session
   * approval, checks that the approval is still active at `decision.at` (or on the database's
   * clock): otherwise nothing is written. After a revocation commits, no decision commits against it.
   */
  readonly recordDecision: (
    decision: RecordedDecision,
    events: ReadonlyArray<UnsequencedEvent>
  ) => Effect.Effect<RecordResult, PersistenceError>
  /** Pending requests, oldest first, for one session or all. */
  readonly listPending: (
    options?: { readonly sessionKey?: string | undefined; readonly limit?: number | undefined }
  ) => Effect.Effect<ReadonlyArray<ApprovalRequest>, PersistenceError>
  /** Pending requests whose `expiresAt` is at or before `at`, oldest deadline first. */
  readonly listDue: (at: number) => Effect.Effect<ReadonlyArray<ApprovalRequest>, PersistenceError>
  /**
   * Pending, not yet warned requests whose warning time has come:
   * `expiresAt - min(warnBeforeMs, (expiresAt - createdAt) / 2) <= at`.
   */
  readonly listToWarn: (
    at: number,
    warnBeforeMs: number
  ) => Effect.Effect<ReadonlyArray<ApprovalRequest>, PersistenceError>
  readonly grant: (
    approval: NewSessionApproval,
    event: UnsequencedEvent
  ) => Effect.Effect<SessionApproval, PersistenceError>
  /** Revokes one active session approval; `None` when there is no active one with that id. */
  readonly revoke: (
    id: SessionApprovalId,
    at: number,
    event: UnsequencedEvent
  ) => Effect.Effect<Option.Option<SessionApproval>, PersistenceError>
  /** Revokes every active approval matching the query with one event; returns them. */
  readonly revokeWhere: (
    query: RevokeQuery,
    at: number,
    event: UnsequencedEvent
  ) => Effect.Effect<ReadonlyArray<SessionApproval>, PersistenceError>
  readonly sessionApprovals: (
    query?: SessionApprovalQuery
  ) => Effect.Effect<ReadonlyArray<SessionApproval>, PersistenceError>
  /** Events in sequence order. */
  readonly events: (query?: AuditQuery) => Effect.Effect<ReadonlyArray<AuditEvent>, PersistenceError>
  readonly lastSeq: Effect.Effect<number, PersistenceError>
  /**
   * Hints that something may have been committed (by any process the store can observe). Readers
   * then read the log after what they have seen; a hint may be coalesced, repeated or spurious.
   * It carries the newest sequence number this process knows of, which for another process's
   * commit may be older than that commit.
   */
  readonly subscribe: Effect.Effect<Queue.Dequeue<number>, never, Scope.Scope>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class ApprovalStore extends Context.Tag("@tool-gate/core/ApprovalStore")<ApprovalStore, Service>() {}

const callKey = (sessionKey: string, toolCallId: string) => `${sessionKey}\u0000${toolCallId}`

/**
 * Why a pending request may not take this transition at `now`: an answer (or extension) after its
 * deadline is `Overdue`, an expiry before it `NotDue`.
 *
 * @since 0.1.0
 * @category utils
 */
export const deadlineRefusal = (
  request: ApprovalRequest,
  status: Resolution["status"],
  now: number
): ResolveResult | undefined =>
  status === "expired"
    ? request.expiresAt > now ? { _tag: "NotDue", request } : undefined
    : request.expiresAt <= now
    ? { _tag: "Overdue", request }
    : undefined

/**
 * The session approval a decision relies on (an allow through a session approval), if any.
 *
 * @since 0.1.0
 * @category utils
 */
export const reliedOn = (decision: RecordedDecision): string | undefined =>
  decision.decision._tag === "Allow" && decision.decision.via === "sessionApproval"
    ? decision.decision.sessionApprovalId
    : undefined

const revokeMatches = (query: RevokeQuery) => (a: SessionApproval) =>
  a.revokedAt === undefined &&
  (query.sessionKey === undefined || a.sessionKey === query.sessionKey) &&
  (query.toolName === undefined || a.toolName === query.toolName.toLowerCase())

/**
 * An in-process store. Each method runs synchronously, so each is atomic like a transaction.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service> = Effect.gen(function*() {
  const log: Array<AuditEvent> = []
  const requests = new Map<string, ApprovalRequest>()
  const byCall = new Map<string, string>()
  const decisions = new Map<string, RecordedDecision>()
  const approvals = new Map<string, SessionApproval>()
  // Each subscriber holds at most one outstanding hint: while one is unread, commits add nothing,
  // so a burst of commits costs the reader one wake-up, not one per commit.
  const subscribers = new Set<Queue.Queue<number>>()

  const sequence = (event: UnsequencedEvent): AuditEvent => {
    const sequenced: AuditEvent = { seq: log.length + 1, ...event }
    log.push(sequenced)
    return sequenced
  }
  const committed = <A>(f: () => A): Effect.Effect<A> =>
    Effect.sync(() => {
      const result = f()
      for (const queue of subscribers) {
        // size is negative while the reader waits in `take`
        if (Option.getOrElse(queue.unsafeSize(), () => 0) <= 0) queue.unsafeOffer(log.length)
      }
      return result
    })

  const transition = (
    requestId: RequestId,
    event: UnsequencedEvent,
    next: (request: ApprovalRequest) => ApprovalRequest,
    refuse: (request: ApprovalRequest) => ResolveResult | undefined = () => undefined
  ): Effect.Effect<ResolveResult> =>
    Effect.suspend(() => {
      const request = requests.get(requestId)
      if (request === undefined) return Effect.succeed<ResolveResult>({ _tag: "NotFound" })
      if (request.status !== "pending") return Effect.succeed<ResolveResult>({ _tag: "NotPending", request })
      const refused = refuse(request)
      if (refused !== undefined) return Effect.succeed(refused)
      return committed((): ResolveResult => {
        const updated = next(request)
        requests.set(requestId, updated)
        return { _tag: "Resolved", request: updated, event: sequence(event) }
      })
    })

  const store: Service = {
    append: (events) => committed(() => events.map(sequence)),
    createRequest: (request, event, shadow) =>
      Effect.suspend((): Effect.Effect<CreateResult> => {
        const call = request.toolCall
        const key = callKey(call.sessionKey, call.id)
        const existing = byCall.get(key)
        if (existing !== undefined) return Effect.succeed({ _tag: "Existing", request: requests.get(existing)! })
        const decided = decisions.get(key)
        if (decided !== undefined) return Effect.succeed({ _tag: "Decided", decision: decided })
        for (const approval of approvals.values()) {
          if (covers(approval, call, request.createdAt)) return Effect.succeed({ _tag: "Covered", grant: approval })
        }
        return committed((): CreateResult => {
          requests.set(request.requestId, request)
          byCall.set(key, request.requestId)
          const requested = sequence(event)
          return shadow === undefined
            ? { _tag: "Created", request, event: requested }
            : {
              _tag: "Created",
              request,
              event: requested,
              shadow: sequence({ ...shadow, requestId: request.requestId })
            }
        })
      }),
    resolve: (requestId, resolution, event, grant) =>
      transition(
        requestId,
        event,
        (request) => {
          if (grant !== undefined) approvals.set(grant.id, { ...grant, seq: log.length + 1 })
          return { ...request, status: resolution.status, resolution }
        },
        (request) => deadlineRefusal(request, resolution.status, resolution.resolvedAt)
      ),
    extend: (requestId, expiresAt, event) =>
      transition(
        requestId,
        event,
        (request) => {
          const { warnedAt: _, ...rest } = request
          return { ...rest, expiresAt }
        },
        (request) => deadlineRefusal(request, "approved", event.at)
      ),
    markWarned: (requestId, event) =>
      Effect.suspend(() =>
        requests.get(requestId)?.warnedAt !== undefined
          ? Effect.succeed(false)
          : transition(requestId, event, (request) => ({ ...request, warnedAt: event.at })).pipe(
            Effect.map((result) => result._tag === "Resolved")
          )
      ),
    consume: (requestId, at, event) =>
      Effect.suspend(() => {
        const request = requests.get(requestId)
        if (request === undefined || request.status !== "approved" || request.consumedAt !== undefined) {
          return Effect.succeed(false)
        }
        return committed(() => {
          requests.set(requestId, { ...request, consumedAt: at })
          if (event !== undefined) sequence(event)
          return true
        })
      }),
    getRequest: (requestId) => Effect.sync(() => Option.fromNullable(requests.get(requestId))),
    findByToolCall: (sessionKey, toolCallId) =>
      Effect.sync(() => {
        const id = byCall.get(callKey(sessionKey, toolCallId))
        return Option.fromNullable(id === undefined ? undefined : requests.get(id))
      }),
    findRecorded: (sessionKey, toolCallId) =>
      Effect.sync((): Option.Option<Recorded> => {
        const key = callKey(sessionKey, toolCallId)
        const id = byCall.get(key)
        if (id !== undefined) return Option.some({ _tag: "Request", request: requests.get(id)! })
        const decision = decisions.get(key)
        return decision === undefined ? Option.none() : Option.some({ _tag: "Decision", decision })
      }),
    recordDecision: (decision, events) =>
      Effect.suspend((): Effect.Effect<RecordResult> => {
        const key = callKey(decision.sessionKey, decision.toolCallId)
        const existing = decisions.get(key)
        if (existing !== undefined) return Effect.succeed({ _tag: "Existing", decision: existing })
        const requested = byCall.get(key)
        if (requested !== undefined) return Effect.succeed({ _tag: "Requested", request: requests.get(requested)! })
        const grantId = reliedOn(decision)
        if (grantId !== undefined) {
          const grant = approvals.get(grantId)
          if (grant === undefined || !isActive(grant, decision.at)) {
            return Effect.succeed({ _tag: "GrantInactive", sessionApprovalId: grantId })
          }
        }
        return committed((): RecordResult => {
          decisions.set(key, decision)
          events.forEach(sequence)
          return { _tag: "Created", decision }
        })
      }),
    listPending: (options) =>
      Effect.sync(() => {
        const out: Array<ApprovalRequest> = []
        const limit = options?.limit ?? Number.POSITIVE_INFINITY
        for (const request of requests.values()) {
          if (out.length >= limit) break
          if (request.status !== "pending") continue
          if (options?.sessionKey !== undefined && request.toolCall.sessionKey !== options.sessionKey) continue
          out.push(request)
        }
        return out.sort((a, b) => a.createdAt - b.createdAt)
      }),
    listDue: (at) =>
      Effect.sync(() =>
        [...requests.values()]
          .filter((r) => r.status === "pending" && r.expiresAt <= at)
          .sort((a, b) => a.expiresAt - b.expiresAt)
      ),
    listToWarn: (at, warnBeforeMs) =>
      Effect.sync(() =>
        [...requests.values()].filter((r) =>
          r.status === "pending" && r.warnedAt === undefined &&
          r.expiresAt - Math.min(warnBeforeMs, (r.expiresAt - r.createdAt) / 2) <= at
        )
      ),
    grant: (approval, event) =>
      committed(() => {
        const seq = sequence(event).seq
        const granted: SessionApproval = { ...approval, seq }
        approvals.set(granted.id, granted)
        return granted
      }),
    revoke: (id, at, event) =>
      Effect.suspend(() => {
        const current = approvals.get(id)
        if (current === undefined || !isActive(current, at)) return Effect.succeed(Option.none())
        return committed(() => {
          const revoked: SessionApproval = { ...current, revokedAt: at, seq: sequence(event).seq }
          approvals.set(id, revoked)
          return Option.some(revoked)
        })
      }),
    revokeWhere: (query, at, event) =>
      committed(() => {
        const seq = sequence(event).seq
        const revoked: Array<SessionApproval> = []
        for (const approval of approvals.values()) {
          if (!revokeMatches(query)(approval)) continue
          const next: SessionApproval = { ...approval, revokedAt: at, seq }
          approvals.set(approval.id, next)
          revoked.push(next)
        }
        return revoked
      }),
    sessionApprovals: (query) =>
      Effect.sync(() =>
        [...approvals.values()]
          .filter((a) =>
            (query?.id === undefined || a.id === query.id) &&
            (query?.sessionKey === undefined || a.sessionKey === query.sessionKey) &&
            (query?.afterSeq === undefined || a.seq > query.afterSeq) &&
            (query?.activeAt === undefined || isActive(a, query.activeAt))
          )
          .sort((a, b) => a.seq - b.seq)
      ),
    events: (query = {}) =>
      Effect.sync(() => {
        const start = Math.max(0, query.afterSeq ?? 0)
        const limit = query.limit ?? Number.POSITIVE_INFINITY
        const keep = matches(query)
        const out: Array<AuditEvent> = []
        for (let i = start; i < log.length && out.length < limit; i++) {
          if (keep(log[i]!)) out.push(log[i]!)
        }
        return out
      }),
    lastSeq: Effect.sync(() => log.length),
    subscribe: Effect.acquireRelease(
      Effect.tap(Queue.sliding<number>(1), (queue) => Effect.sync(() => subscribers.add(queue))),
      (queue) => Effect.zipRight(Effect.sync(() => subscribers.delete(queue)), Queue.shutdown(queue))
    )
  }
  return store
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<ApprovalStore> = Layer.effect(ApprovalStore, makeMemory)
