/**
 * Where requests, session approvals and the audit log live. The store is the source of truth;
 * the gate's memory is a cache. Every method is one atomic step (one transaction in SQL): a
 * projection change and the audit event describing it commit together, and "only if still
 * pending" is decided by the store, so answers are exactly-once across processes.
 *
 * The typed logic is written once, in `makeEncoded`, over a driver (`Encoded`) that keeps rows
 * as the SQL stores keep them: encoded entities, written by conditional claim-and-rewrite,
 * insert-or-return-existing and appends, each one atomic step. `layerMemory` runs it over an
 * in-process driver (tests, quick starts); `SqlApprovalStore` over the `@effect/sql` driver.
 *
 * @example
 * import { ApprovalStore, ToolGate, Policy } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Gate = ToolGate.layer({ policy: Policy.allowAll }).pipe(Layer.provide(ApprovalStore.layerMemory))
 *
 * @since 0.1.0
 */
import { Context, Effect, Either, Layer, Option, type ParseResult, Queue, RcRef, Stream } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalRequest, RequestId, Resolution } from "./ApprovalRequest.js"
import type { AuditEvent, AuditQuery, UnsequencedEvent } from "./AuditEvent.js"
import type { Recorded as RecordedDecision } from "./Decision.js"
import * as Codecs from "./internal/store/codecs.js"
import { makeMemoryDriver } from "./internal/store/memoryDriver.js"
import type { SessionApproval, SessionApprovalId } from "./SessionApproval.js"
import { covers } from "./SessionApproval.js"
import { PersistenceError } from "./ToolGateError.js"

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

/**
 * Encoded forms, as drivers keep them (`Schema.encode` of each entity).
 *
 * @since 0.1.0
 * @category driver
 */
export type RequestEncoded = Codecs.RequestEncoded
/** @since 0.1.0 @category driver */
export type EventEncoded = Codecs.EventEncoded
/** @since 0.1.0 @category driver */
export type ApprovalEncoded = Codecs.ApprovalEncoded
/** @since 0.1.0 @category driver */
export type DecisionEncoded = Codecs.DecisionEncoded

/**
 * The condition of a request claim: `pending` and not warned yet, or `pending` and within
 * (`Before`) or past (`Past`) its deadline at `at` on the store's clock (a SQL driver may judge
 * it on the database's clock instead).
 *
 * @since 0.1.0
 * @category driver
 */
export type Claim =
  | { readonly _tag: "Unwarned" }
  | { readonly _tag: "BeforeDeadline"; readonly at: number }
  | { readonly _tag: "PastDeadline"; readonly at: number }

/**
 * A call's encoded, pure continuation inside a driver's transaction: it decodes and encodes, and
 * its failure rolls the step back.
 *
 * @since 0.1.0
 * @category driver
 */
export type Continue<A, B> = (a: A, seqs: ReadonlyArray<number>) => Either.Either<B, ParseResult.ParseError>

/**
 * The storage under the store: rows as the SQL stores keep them, each method one atomic step (one
 * transaction). Writes take the events to append with them and return their sequence numbers
 * (consecutive, ascending). Designed so that a driver answers each call in few statements: a read
 * folded into its write (`RETURNING`), no read before an insert that the database can refuse.
 *
 * @since 0.1.0
 * @category driver
 */
export interface Encoded {
  readonly append: (events: ReadonlyArray<EventEncoded>) => Effect.Effect<ReadonlyArray<number>, PersistenceError>
  /**
   * Insert-or-return-existing: the request and its events, unless a record of its
   * `(sessionKey, toolCall.id)` exists (`Existing`, `Decided`) or `covering` picks one of the
   * session's approvals for the tool active at `request.createdAt` on the store's clock (`Covered`).
   */
  readonly insertRequest: (
    request: RequestEncoded,
    events: ReadonlyArray<EventEncoded>,
    covering: (active: ReadonlyArray<ApprovalEncoded>) => Either.Either<number, ParseResult.ParseError>
  ) => Effect.Effect<
    | { readonly _tag: "Inserted"; readonly seqs: ReadonlyArray<number> }
    | { readonly _tag: "Existing"; readonly request: RequestEncoded }
    | { readonly _tag: "Decided"; readonly decision: DecisionEncoded }
    | { readonly _tag: "Covered"; readonly grant: ApprovalEncoded },
    PersistenceError
  >
  /**
   * Conditional claim-and-rewrite: when the request meets `claim`, appends `events`, rewrites the
   * row with what `rewrite` makes of it (and inserts the session approval it may return);
   * otherwise writes nothing and returns the row as it is.
   */
  readonly claimRequest: (
    /** the store call, for errors */
    operation: string,
    requestId: string,
    claim: Claim,
    events: ReadonlyArray<EventEncoded>,
    rewrite: Continue<RequestEncoded, { readonly request: RequestEncoded; readonly grant?: ApprovalEncoded }>
  ) => Effect.Effect<
    | { readonly _tag: "Claimed"; readonly request: RequestEncoded; readonly seqs: ReadonlyArray<number> }
    | { readonly _tag: "Refused"; readonly current: Option.Option<RequestEncoded> },
    PersistenceError
  >
  /** Sets `consumedAt` of an approved, unspent request, with `events`; `undefined` when not spent. */
  readonly consume: (
    requestId: string,
    at: number,
    events: ReadonlyArray<EventEncoded>
  ) => Effect.Effect<ReadonlyArray<number> | undefined, PersistenceError>
  /**
   * Insert-or-return-existing for a policy decision, unless a request holds its call id
   * (`Requested`) or the session approval it relies on is not active at `at` on the store's clock.
   */
  readonly insertDecision: (
    decision: DecisionEncoded,
    events: ReadonlyArray<EventEncoded>,
    reliedOn: string | undefined
  ) => Effect.Effect<
    | { readonly _tag: "Inserted"; readonly seqs: ReadonlyArray<number> }
    | { readonly _tag: "Existing"; readonly decision: DecisionEncoded }
    | { readonly _tag: "Requested"; readonly request: RequestEncoded }
    | { readonly _tag: "GrantInactive" },
    PersistenceError
  >
  /** Appends `events`, then inserts the session approval `approval` makes with their numbers. */
  readonly insertApproval: (
    events: ReadonlyArray<EventEncoded>,
    approval: (seqs: ReadonlyArray<number>) => Either.Either<ApprovalEncoded, ParseError>
  ) => Effect.Effect<{ readonly approval: ApprovalEncoded; readonly seqs: ReadonlyArray<number> }, PersistenceError>
  /**
   * Revokes approvals, rewriting each with what `rewrite` makes of it (grant order): the one with
   * `id` active at `at` (its events only when there is one), or every unrevoked one matching
   * the session and lower-cased tool name (its events always).
   */
  readonly revoke: (
    which: { readonly id: string } | {
      readonly sessionKey?: string | undefined
      readonly toolName?: string | undefined
    },
    at: number,
    events: ReadonlyArray<EventEncoded>,
    rewrite: Continue<ReadonlyArray<ApprovalEncoded>, ReadonlyArray<ApprovalEncoded>>
  ) => Effect.Effect<
    { readonly revoked: ReadonlyArray<ApprovalEncoded>; readonly seqs: ReadonlyArray<number> },
    PersistenceError
  >
  readonly getRequest: (requestId: string) => Effect.Effect<Option.Option<RequestEncoded>, PersistenceError>
  readonly findByToolCall: (
    sessionKey: string,
    toolCallId: string
  ) => Effect.Effect<Option.Option<RequestEncoded>, PersistenceError>
  /** The request (it wins) or the decision of a call id. */
  readonly findRecorded: (
    sessionKey: string,
    toolCallId: string
  ) => Effect.Effect<
    Option.Option<
      | { readonly _tag: "Request"; readonly request: RequestEncoded }
      | { readonly _tag: "Decision"; readonly decision: DecisionEncoded }
    >,
    PersistenceError
  >
  readonly listPending: Service["listPending"] extends (...args: infer P) => any
    ? (...args: P) => Effect.Effect<ReadonlyArray<RequestEncoded>, PersistenceError>
    : never
  readonly listDue: (at: number) => Effect.Effect<ReadonlyArray<RequestEncoded>, PersistenceError>
  readonly listToWarn: (
    at: number,
    warnBeforeMs: number
  ) => Effect.Effect<ReadonlyArray<RequestEncoded>, PersistenceError>
  readonly sessionApprovals: (
    query?: SessionApprovalQuery
  ) => Effect.Effect<ReadonlyArray<ApprovalEncoded>, PersistenceError>
  /** Events in sequence order; `query.toolName` lower-cased. */
  readonly events: (
    query: AuditQuery
  ) => Effect.Effect<ReadonlyArray<{ readonly seq: number; readonly event: EventEncoded }>, PersistenceError>
  readonly lastSeq: Effect.Effect<number, PersistenceError>
  /** Signals that another process may have grown the log (the store then hints its readers). */
  readonly changes: Stream.Stream<void>
}

type ParseError = ParseResult.ParseError

/**
 * The store over a driver: the request transitions, the result shaping, the codecs and the
 * subscriber hints, once for every driver. Needs a scope for the driver's change signal, which
 * runs only while someone is subscribed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEncoded = (driver: Encoded): Effect.Effect<Service, PersistenceError, Scope.Scope> =>
  Effect.gen(function*() {
    const codecs = Codecs.makeCodecs()
    const decode =
      <A>(operation: string, codec: Codecs.Codec<A, any>) => (encoded: unknown): Effect.Effect<A, PersistenceError> => {
        const decoded = codec.decode(encoded)
        return Either.isRight(decoded)
          ? Effect.succeed(decoded.right)
          : Effect.fail(new PersistenceError({ operation, cause: decoded.left }))
      }
    const decodeAll = <A>(operation: string, codec: Codecs.Codec<A, any>) => (rows: ReadonlyArray<unknown>) =>
      Effect.forEach(rows, decode(operation, codec))
    const encode = <A, I>(
      operation: string,
      codec: Codecs.Codec<A, I>,
      value: A
    ): Effect.Effect<I, PersistenceError> => {
      const encoded = codec.encode(value)
      return Either.isRight(encoded)
        ? Effect.succeed(encoded.right)
        : Effect.fail(new PersistenceError({ operation, cause: encoded.left }))
    }
    const encodeEvents = (operation: string, events: ReadonlyArray<UnsequencedEvent>) =>
      Effect.forEach(events, (event) => encode(operation, codecs.event, event))
    const sequenced = (events: ReadonlyArray<UnsequencedEvent>, seqs: ReadonlyArray<number>) =>
      events.map((event, i): AuditEvent => ({ seq: seqs[i]!, ...event }))

    // --- hints -----------------------------------------------------------------------------------

    // Highest sequence number hinted so far, from this process's commits or the driver's signal.
    let known = yield* driver.lastSeq
    // Each subscriber holds at most one outstanding hint: while one is unread, commits add nothing,
    // so a burst of commits costs the reader one wake-up, not one per commit.
    const subscribers = new Set<Queue.Queue<number>>()
    const offer = (seq: number) => {
      for (const queue of subscribers) {
        // size is negative while the reader waits in `take`
        if (Option.getOrElse(queue.unsafeSize(), () => 0) <= 0) queue.unsafeOffer(seq)
      }
    }
    /** After a commit: the last seq it wrote, if any. */
    const hint = (seqs: ReadonlyArray<number> | undefined) =>
      Effect.sync(() => {
        const seq = seqs?.[seqs.length - 1]
        if (seq === undefined || seq <= known) return
        known = seq
        offer(seq)
      })
    // Another process may have committed: readers read the log after what they have seen.
    const watcher = yield* RcRef.make({
      acquire: driver.changes.pipe(Stream.runForEach(() => Effect.sync(() => offer(known))), Effect.forkScoped)
    })

    // --- transitions -----------------------------------------------------------------------------

    /**
     * A transition of a pending request: claimed under `claim`, rewritten by `next`, committed
     * with `event` (and the session approval `grant` makes); or why it was refused.
     */
    const transition = (
      operation: string,
      requestId: RequestId,
      claim: Claim,
      refusal: "Overdue" | "NotDue" | "NotPending",
      event: UnsequencedEvent,
      next: (request: ApprovalRequest) => ApprovalRequest,
      grant?: NewSessionApproval
    ): Effect.Effect<ResolveResult, PersistenceError> =>
      Effect.gen(function*() {
        const encoded = yield* encode(operation, codecs.event, event)
        const result = yield* driver.claimRequest(operation, requestId, claim, [encoded], (before, seqs) =>
          Either.flatMap(codecs.request.decode(before), (request) =>
            Either.flatMap(codecs.request.encode(next(request)), (rewritten) =>
              grant === undefined
                ? Either.right({ request: rewritten })
                : Either.map(codecs.approval.encode({ ...grant, seq: seqs[0]! }), (approval) => ({
                  request: rewritten,
                  grant: approval
                })))))
        if (result._tag === "Claimed") {
          yield* hint(result.seqs)
          return {
            _tag: "Resolved",
            request: yield* decode(operation, codecs.request)(result.request),
            event: { seq: result.seqs[0]!, ...event }
          } as const
        }
        if (Option.isNone(result.current)) {
          return { _tag: "NotFound" } as const
        }
        const current = yield* decode(operation, codecs.request)(result.current.value)
        return current.status === "pending" && refusal !== "NotPending"
          ? { _tag: refusal, request: current }
          : { _tag: "NotPending", request: current }
      })

    const store: Service = {
      append: (events) =>
        events.length === 0 ? Effect.succeed([]) : Effect.gen(function*() {
          const seqs = yield* driver.append(yield* encodeEvents("append", events))
          yield* hint(seqs)
          return sequenced(events, seqs)
        }),

      createRequest: (request, event, shadow) =>
        Effect.gen(function*() {
          const events = shadow === undefined ? [event] : [event, { ...shadow, requestId: request.requestId }]
          const call = request.toolCall
          const result = yield* driver.insertRequest(
            yield* encode("createRequest", codecs.request, request),
            yield* encodeEvents("createRequest", events),
            // the driver judged activity on the store's clock; `covers` judges scope and arguments
            (active) => {
              for (let i = 0; i < active.length; i++) {
                const grant = codecs.approval.decode(active[i])
                if (Either.isLeft(grant)) return Either.left(grant.left)
                if (covers(grant.right, call, Number.NEGATIVE_INFINITY)) return Either.right(i)
              }
              return Either.right(-1)
            }
          )
          switch (result._tag) {
            case "Inserted": {
              yield* hint(result.seqs)
              const [requested, shadowed] = sequenced(events, result.seqs)
              return shadowed === undefined
                ? { _tag: "Created", request, event: requested! }
                : { _tag: "Created", request, event: requested!, shadow: shadowed }
            }
            case "Existing":
              return { _tag: "Existing", request: yield* decode("createRequest", codecs.request)(result.request) }
            case "Decided":
              return { _tag: "Decided", decision: yield* decode("createRequest", codecs.decision)(result.decision) }
            case "Covered":
              return { _tag: "Covered", grant: yield* decode("createRequest", codecs.approval)(result.grant) }
          }
        }),

      resolve: (requestId, resolution, event, grant) =>
        resolution.status === "expired"
          ? transition(
            "resolve",
            requestId,
            { _tag: "PastDeadline", at: resolution.resolvedAt },
            "NotDue",
            event,
            (request) => ({ ...request, status: resolution.status, resolution }),
            grant
          )
          : transition(
            "resolve",
            requestId,
            { _tag: "BeforeDeadline", at: resolution.resolvedAt },
            "Overdue",
            event,
            (request) => ({ ...request, status: resolution.status, resolution }),
            grant
          ),

      extend: (requestId, expiresAt, event) =>
        transition(
          "extend",
          requestId,
          { _tag: "BeforeDeadline", at: event.at },
          "Overdue",
          event,
          ({ warnedAt: _, ...request }) => ({
            ...request,
            expiresAt
          })
        ),

      markWarned: (requestId, event) =>
        Effect.map(
          transition(
            "markWarned",
            requestId,
            { _tag: "Unwarned" },
            "NotPending",
            event,
            (request) => ({ ...request, warnedAt: event.at })
          ),
          (result) => result._tag === "Resolved"
        ),

      consume: (requestId, at, event) =>
        Effect.gen(function*() {
          const seqs = yield* driver.consume(
            requestId,
            at,
            event === undefined ? [] : [yield* encode("consume", codecs.event, event)]
          )
          yield* hint(seqs)
          return seqs !== undefined
        }),

      getRequest: (requestId) =>
        Effect.flatMap(driver.getRequest(requestId), Effect.transposeMapOption(decode("getRequest", codecs.request))),

      findByToolCall: (sessionKey, toolCallId) =>
        Effect.flatMap(
          driver.findByToolCall(sessionKey, toolCallId),
          Effect.transposeMapOption(decode("findByToolCall", codecs.request))
        ),

      findRecorded: (sessionKey, toolCallId) =>
        Effect.flatMap(
          driver.findRecorded(sessionKey, toolCallId),
          Effect.transposeMapOption((found) =>
            found._tag === "Request"
              ? Effect.map(
                decode("findRecorded", codecs.request)(found.request),
                (request): Recorded => ({ _tag: "Request", request })
              )
              : Effect.map(
                decode("findRecorded", codecs.decision)(found.decision),
                (decision): Recorded => ({ _tag: "Decision", decision })
              )
          )
        ),

      recordDecision: (decision, events) =>
        Effect.gen(function*() {
          const result = yield* driver.insertDecision(
            yield* encode("recordDecision", codecs.decision, decision),
            yield* encodeEvents("recordDecision", events),
            reliedOn(decision)
          )
          switch (result._tag) {
            case "Inserted":
              yield* hint(result.seqs)
              return { _tag: "Created", decision }
            case "Existing":
              return { _tag: "Existing", decision: yield* decode("recordDecision", codecs.decision)(result.decision) }
            case "Requested":
              return { _tag: "Requested", request: yield* decode("recordDecision", codecs.request)(result.request) }
            case "GrantInactive":
              return { _tag: "GrantInactive", sessionApprovalId: reliedOn(decision)! }
          }
        }),

      listPending: (options) => Effect.flatMap(driver.listPending(options), decodeAll("listPending", codecs.request)),
      listDue: (at) => Effect.flatMap(driver.listDue(at), decodeAll("listDue", codecs.request)),
      listToWarn: (at, warnBeforeMs) =>
        Effect.flatMap(driver.listToWarn(at, warnBeforeMs), decodeAll("listToWarn", codecs.request)),

      grant: (approval, event) =>
        Effect.gen(function*() {
          const result = yield* driver.insertApproval(
            [yield* encode("grant", codecs.event, event)],
            (seqs) => codecs.approval.encode({ ...approval, seq: seqs[0]! })
          )
          yield* hint(result.seqs)
          return yield* decode("grant", codecs.approval)(result.approval)
        }),

      revoke: (id, at, event) =>
        Effect.gen(function*() {
          const result = yield* driver.revoke({ id }, at, [yield* encode("revoke", codecs.event, event)], revokeAll(at))
          yield* hint(result.seqs)
          const [revoked] = yield* decodeAll("revoke", codecs.approval)(result.revoked)
          return Option.fromNullable(revoked)
        }),

      revokeWhere: (query, at, event) =>
        Effect.gen(function*() {
          const result = yield* driver.revoke(
            { sessionKey: query.sessionKey, toolName: query.toolName?.toLowerCase() },
            at,
            [yield* encode("revokeWhere", codecs.event, event)],
            revokeAll(at)
          )
          yield* hint(result.seqs)
          return yield* decodeAll("revokeWhere", codecs.approval)(result.revoked)
        }),

      sessionApprovals: (query) =>
        Effect.flatMap(driver.sessionApprovals(query), decodeAll("sessionApprovals", codecs.approval)),

      events: (query = {}) =>
        Effect.flatMap(
          driver.events(query.toolName === undefined ? query : { ...query, toolName: query.toolName.toLowerCase() }),
          (rows) =>
            Effect.forEach(rows, (row) =>
              Effect.map(
                decode("events", codecs.event)(row.event),
                (event): AuditEvent => ({ seq: row.seq, ...event })
              ))
        ),

      lastSeq: driver.lastSeq,

      subscribe: Effect.gen(function*() {
        const queue = yield* Effect.acquireRelease(
          Effect.tap(Queue.sliding<number>(1), (queue) => Effect.sync(() => subscribers.add(queue))),
          (queue) => Effect.zipRight(Effect.sync(() => subscribers.delete(queue)), Queue.shutdown(queue))
        )
        yield* RcRef.get(watcher)
        return queue
      })
    }

    /** Revoked at `at` with the event's number, in grant order. */
    const revokeAll =
      (at: number): Continue<ReadonlyArray<ApprovalEncoded>, ReadonlyArray<ApprovalEncoded>> => (before, seqs) =>
        Either.all(
          Array.from(before)
            .sort((a, b) => a.seq - b.seq)
            .map((row) =>
              Either.flatMap(
                codecs.approval.decode(row),
                (approval) => codecs.approval.encode({ ...approval, revokedAt: at, seq: seqs[0]! })
              )
            )
        )

    return store
  })

/**
 * An in-process store: the typed logic over a driver that keeps encoded rows in memory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service, never, Scope.Scope> = Effect.flatMap(
  Effect.sync(makeMemoryDriver),
  (driver) => Effect.orDie(makeEncoded(driver))
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<ApprovalStore> = Layer.scoped(ApprovalStore, makeMemory)
