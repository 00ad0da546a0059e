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
import { Context, Effect, type Either, Layer, type Option, type ParseResult, type Queue, type Stream } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalRequest, RequestId, Resolution } from "./ApprovalRequest.js"
import type { AuditEvent, AuditQuery, ShadowEvent, UnsequencedEvent } from "./AuditEvent.js"
import type { Recorded as RecordedDecision } from "./Decision.js"
import * as internal from "./internal/store/approvalStore.js"
import type * as Codecs from "./internal/store/codecs.js"
import { makeMemoryDriver } from "./internal/store/memoryDriver.js"
import type { SessionApproval, SessionApprovalId } from "./SessionApproval.js"
import type { PersistenceError } from "./ToolGateError.js"

/**
 * The outcome of a conditional resolve: applied, or refused because the request had already left
 * `pending` (the current row is returned so the caller can tell a repeat from a conflict).
 *
 * @since 0.1.0
 * @category models
 */
export type ResolveResult =
  | {
    readonly _tag: "Resolved"
    readonly request: ApprovalRequest
    readonly event: AuditEvent
    /** the session approval committed with the resolution, numbered */
    readonly grant?: SessionApproval | undefined
  }
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
 * What an answer makes of the pending request it claimed: its resolution, the event committed with
 * it and, for `approve_session`, the session approval it grants.
 *
 * @since 0.1.0
 * @category models
 */
export interface Answer {
  readonly resolution: Resolution
  readonly event: UnsequencedEvent
  readonly grant?: NewSessionApproval | undefined
}

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
 * The requests pending at one moment, and the log's last seq then: every event up to `seq` is
 * reflected in `pending`, none after it (a reader that counts the events after `seq` keeps the
 * figure exact).
 *
 * @since 0.2.0
 * @category models
 */
export interface PendingCount {
  readonly pending: number
  readonly seq: number
}

/**
 * An event of the log as its hash chain covers it (`AuditChain`): its number, the hashes stored
 * with it (absent on events written before the store chained them) and its JSON text as stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChainLink {
  readonly seq: number
  readonly prevHash: string | undefined
  readonly hash: string | undefined
  readonly text: string
  /**
   * SQL stores: the columns the log's queries filter on, which repeat fields of the text (the hash
   * covers the text only): `at`, `type`, `outcome`, `session_key`, `tool_call_id`, `tool_name`
   * (lower-cased), `request_id`, as stored
   */
  readonly columns?: ReadonlyArray<readonly [column: string, value: unknown]> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Appends events that change no projection (policy decisions); returns them sequenced. The
   * events of a request's lifecycle (`approval.requested`, `.resolved`, `.expired`, `.expiring`,
   * `.extended`) are refused: only the transitions of the request's row write them, with it.
   */
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
    shadow?: typeof ShadowEvent.Type
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
  /**
   * Answers a pending request in one step: claims it as `resolve` does (refused as `Overdue` once
   * its deadline has passed at `at`), then commits what `answer` makes of the claimed request. The
   * request is not read before the claim, so concurrent answers merge into one write. `answer` is
   * a function of the request it is given: it may run more than once, and on the request as this
   * process last wrote it, before the claim is decided; only what it makes of the request as
   * claimed commits.
   */
  readonly answer: (
    requestId: RequestId,
    at: number,
    answer: (request: ApprovalRequest) => Answer
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
  /**
   * How many requests are pending, with the log's last seq read at the same moment (no request is
   * read or decoded).
   *
   * @since 0.2.0
   */
  readonly countPending: Effect.Effect<PendingCount, PersistenceError>
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
   * The events after `afterSeq` (at most `limit`, in `seq` order) as stored, for checking the
   * hash chain (`AuditChain.verify`): nothing is decoded, so a damaged row is reported, not refused.
   */
  readonly chainLinks: (afterSeq: number, limit: number) => Effect.Effect<ReadonlyArray<ChainLink>, PersistenceError>
  /**
   * The log after `afterSeq` (at most `limit` events) for a reader woken by `subscribe`: what
   * `events` gives, except that the commits after the newest hint may be left for the next hint.
   * When this process's own latest commits hold every event up to that hint, they are returned
   * without a read.
   */
  readonly tail: (afterSeq: number, limit: number) => Effect.Effect<ReadonlyArray<AuditEvent>, PersistenceError>
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
 * The session approval a decision relies on (an allow through a session approval), if any.
 *
 * @since 0.1.0
 * @category utils
 */
export const reliedOn: (decision: RecordedDecision) => string | undefined = internal.reliedOn

/**
 * Encoded forms, as drivers keep them (`Schema.encode` of each entity).
 *
 * @since 0.1.0
 * @category driver
 */
export type RequestEncoded = Codecs.RequestEncoded
/** @since 0.1.0 @category driver */
export type EventEncoded = Codecs.EventEncoded
/**
 * An event of the log as a driver returns it: its encoded form with its `seq`.
 *
 * @since 0.1.0
 * @category driver
 */
export type EventRow = Codecs.EventRow
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
 * A claimed request's transition: the events to append, the row after them and, made once the
 * events have their numbers, the session approval it grants.
 *
 * @since 0.1.0
 * @category driver
 */
export interface Transition {
  readonly events: ReadonlyArray<EventEncoded>
  readonly request: RequestEncoded
  readonly grant?: ((seqs: ReadonlyArray<number>) => Either.Either<ApprovalEncoded, ParseResult.ParseError>) | undefined
}

/**
 * The storage under the store: rows as the SQL stores keep them, each method one atomic step (one
 * transaction). Writes take the events to append with them and return them numbered, as rows
 * (consecutive, ascending `seq`), each chained to the log's last event (`prevHash`, `hash`: see
 * `AuditChain`; a driver that no other process shares may hash them when they are read). Designed so that a driver answers each call in few statements: a read
 * folded into its write (`RETURNING`), no read before an insert that the database can refuse.
 *
 * @since 0.1.0
 * @category driver
 */
export interface Encoded {
  /** Appends `events`; `then` makes the result of their rows (in the same step: one effect less per decision). */
  readonly append: <A>(
    events: ReadonlyArray<EventEncoded>,
    then: (rows: ReadonlyArray<EventRow>) => A
  ) => Effect.Effect<A, PersistenceError>
  /**
   * Insert-or-return-existing: the request and its events, unless a record of its
   * `(sessionKey, toolCall.id)` exists (`Existing`, `Decided`) or `covering` picks one of the
   * session's approvals for the tool active at `request.createdAt` on the store's clock (`Covered`).
   * `argsDigest`: the call's (`ToolCall.argsDigest`), which an approval of `exact` scope must hold to
   * cover it, for a driver that rules approvals out before calling `covering`.
   */
  readonly insertRequest: (
    request: RequestEncoded,
    events: ReadonlyArray<EventEncoded>,
    covering: (active: ReadonlyArray<ApprovalEncoded>) => Either.Either<number, ParseResult.ParseError>,
    argsDigest: string
  ) => Effect.Effect<
    | { readonly _tag: "Inserted"; readonly events: ReadonlyArray<EventRow> }
    | { readonly _tag: "Existing"; readonly request: RequestEncoded }
    | { readonly _tag: "Decided"; readonly decision: DecisionEncoded }
    | { readonly _tag: "Covered"; readonly grant: ApprovalEncoded },
    PersistenceError
  >
  /**
   * Conditional claim-and-rewrite: when the request meets `claim`, appends the events `transition`
   * makes of the claimed row, rewrites the row as it says (and inserts the session approval it may
   * grant); otherwise writes nothing and returns the row as it is. `transition` may also be made of
   * the row as this process last wrote it, before the claim (the write then applies only while the
   * row is that very row), and may run more than once.
   */
  readonly claimRequest: (
    /** the store call, for errors */
    operation: string,
    requestId: string,
    claim: Claim,
    transition: (before: RequestEncoded) => Either.Either<Transition, ParseResult.ParseError>
  ) => Effect.Effect<
    | { readonly _tag: "Claimed"; readonly request: RequestEncoded; readonly events: ReadonlyArray<EventRow> }
    | { readonly _tag: "Refused"; readonly current: Option.Option<RequestEncoded> },
    PersistenceError
  >
  /** Sets `consumedAt` of an approved, unspent request, with `events`; `undefined` when not spent. */
  readonly consume: (
    requestId: string,
    at: number,
    events: ReadonlyArray<EventEncoded>
  ) => Effect.Effect<ReadonlyArray<EventRow> | undefined, PersistenceError>
  /**
   * Insert-or-return-existing for a policy decision, unless a request holds its call id
   * (`Requested`) or the session approval it relies on is not active at `at` on the store's clock.
   */
  readonly insertDecision: (
    decision: DecisionEncoded,
    events: ReadonlyArray<EventEncoded>,
    reliedOn: string | undefined
  ) => Effect.Effect<
    | { readonly _tag: "Inserted"; readonly events: ReadonlyArray<EventRow> }
    | { readonly _tag: "Existing"; readonly decision: DecisionEncoded }
    | { readonly _tag: "Requested"; readonly request: RequestEncoded }
    | { readonly _tag: "GrantInactive" },
    PersistenceError
  >
  /** Appends `events`, then inserts the session approval `approval` makes with their numbers. */
  readonly insertApproval: (
    events: ReadonlyArray<EventEncoded>,
    approval: (seqs: ReadonlyArray<number>) => Either.Either<ApprovalEncoded, ParseResult.ParseError>
  ) => Effect.Effect<{ readonly approval: ApprovalEncoded; readonly events: ReadonlyArray<EventRow> }, PersistenceError>
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
    { readonly revoked: ReadonlyArray<ApprovalEncoded>; readonly events: ReadonlyArray<EventRow> },
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
  readonly listPending: (
    options?: { readonly sessionKey?: string | undefined; readonly limit?: number | undefined }
  ) => Effect.Effect<ReadonlyArray<RequestEncoded>, PersistenceError>
  readonly countPending: Effect.Effect<PendingCount, PersistenceError>
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
  ) => Effect.Effect<ReadonlyArray<EventRow>, PersistenceError>
  readonly lastSeq: Effect.Effect<number, PersistenceError>
  /** The events after `afterSeq` (at most `limit`) as stored, with their hashes (`Service.chainLinks`). */
  readonly chainLinks: (afterSeq: number, limit: number) => Effect.Effect<ReadonlyArray<ChainLink>, PersistenceError>
  /**
   * Signals that another process may have grown the log (the store then hints its readers), with
   * the seq it reached when the signal knows it.
   */
  readonly changes: Stream.Stream<number | undefined>
  /**
   * The events `events` returns are the very rows it returned when they were written (the memory
   * driver), made of values checked when they were encoded: reading them back checks nothing again.
   */
  readonly returnsWhatItWasGiven: boolean
}

/**
 * The store over a driver: the request transitions, the result shaping, the codecs and the
 * subscriber hints, once for every driver. Needs a scope for the driver's change signal, which
 * runs only while someone is subscribed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEncoded: (driver: Encoded) => Effect.Effect<Service, PersistenceError, Scope.Scope> =
  internal.makeEncoded

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
