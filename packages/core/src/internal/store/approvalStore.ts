import { Effect, Either, Option, Queue, RcRef, Stream } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalRequest, RequestId } from "../../ApprovalRequest.js"
import type {
  ApprovalEncoded,
  Claim,
  Continue,
  CreateResult,
  Encoded,
  NewSessionApproval,
  Recorded,
  RecordResult,
  ResolveResult,
  Service
} from "../../ApprovalStore.js"
import type { AuditEvent, UnsequencedEvent } from "../../AuditEvent.js"
import type { Recorded as RecordedDecision } from "../../Decision.js"
import { covers, type SessionApproval } from "../../SessionApproval.js"
import { argsDigest } from "../../ToolCall.js"
import { PersistenceError } from "../../ToolGateError.js"
import * as Codecs from "./codecs.js"
import * as OwnTail from "./ownTail.js"

/**
 * The approval store's typed logic, once for every driver: the request transitions (resolve,
 * extend, mark warned), the shaping of their refusals (not found, not pending, overdue, not due),
 * the codecs between entities and the driver's encoded rows, and the hints to subscribers.
 */

/** The session approval a decision relies on (an allow through a session approval), if any. */
export const reliedOn = (decision: RecordedDecision): string | undefined =>
  decision.decision._tag === "Allow" && decision.decision.via === "sessionApproval"
    ? decision.decision.sessionApprovalId
    : undefined

/**
 * The events of a request's lifecycle: only the transitions that change the request's row write
 * them, in the same transaction, so the log holds one only when the row changed with it (a waiter
 * settles on an `approval.resolved` without reading the row).
 */
const LIFECYCLE_EVENTS: ReadonlySet<AuditEvent["type"]> = new Set([
  "approval.requested",
  "approval.resolved",
  "approval.expired",
  "approval.expiring",
  "approval.extended"
])

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
    // Events are encoded and decoded on every decision, so in plain loops, not `Effect.forEach`.
    const encodeEventsSync = (
      operation: string,
      events: ReadonlyArray<UnsequencedEvent>
    ): Either.Either<Array<Codecs.EventEncoded>, PersistenceError> => {
      const out: Array<Codecs.EventEncoded> = new Array(events.length)
      for (let i = 0; i < events.length; i++) {
        const encoded = codecs.event.encode(events[i]!)
        if (Either.isLeft(encoded)) return Either.left(new PersistenceError({ operation, cause: encoded.left }))
        out[i] = encoded.right
      }
      return Either.right(out)
    }
    /**
     * The written events, numbered: the rows a driver returns for a write are made of the values
     * the store encoded (and so checked), with their numbers.
     */
    const written = (rows: ReadonlyArray<Codecs.EventRow> | undefined): ReadonlyArray<AuditEvent> =>
      (rows ?? []) as ReadonlyArray<AuditEvent>

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
    const ownTail = OwnTail.make()
    /** After a commit: the last seq it wrote, if any. */
    const notify = (rows: ReadonlyArray<Codecs.EventRow> | undefined) => {
      if (rows !== undefined) ownTail.remember(written(rows))
      const seq = rows?.[rows.length - 1]?.seq
      if (seq === undefined || seq <= known) return
      known = seq
      offer(seq)
    }
    const hint = (rows: ReadonlyArray<Codecs.EventRow> | undefined) => Effect.sync(() => notify(rows))
    // Another process may have committed: readers read the log after what they have seen. A
    // signal naming a seq already hinted is this process's own commit (or one before it: seqs
    // follow commit order), which readers read or are about to.
    const signalled = (seq: number | undefined) => {
      if (seq === undefined) ownTail.unsure()
      if (seq !== undefined && seq <= known) return
      if (seq !== undefined) known = seq
      offer(known)
    }
    const watcher = yield* RcRef.make({
      acquire: driver.changes.pipe(
        Stream.runForEach((seq) => Effect.sync(() => signalled(seq))),
        Effect.forkScoped
      )
    })

    // --- transitions -----------------------------------------------------------------------------

    /** What a transition of a claimed request commits: its event, the row after it, its grant. */
    interface Step {
      readonly event: UnsequencedEvent
      readonly next: ApprovalRequest
      readonly grant?: NewSessionApproval | undefined
    }

    /**
     * A transition of a pending request: claimed under `claim`, then committed as `step` makes it
     * of the claimed request; or why it was refused.
     */
    const transition = (
      operation: string,
      requestId: RequestId,
      claim: Claim,
      refusal: "Overdue" | "NotDue" | "NotPending",
      step: (request: ApprovalRequest) => Step
    ): Effect.Effect<ResolveResult, PersistenceError> =>
      Effect.suspend(() => {
        // the grant of the transition that ran last: a merged batch that fails runs each call again
        let granted: SessionApproval | undefined
        const claimed = driver.claimRequest(operation, requestId, claim, (before) =>
          Either.flatMap(codecs.request.decode(before), (request) => {
            const { event, grant, next } = step(request)
            return Either.flatMap(codecs.event.encode(event), (encoded) =>
              Either.map(codecs.request.encode(next), (rewritten) => {
                granted = undefined
                return {
                  events: [encoded],
                  request: rewritten,
                  grant: grant === undefined ? undefined : (seqs: ReadonlyArray<number>) => {
                    granted = { ...grant, seq: seqs[0]! }
                    return codecs.approval.encode(granted)
                  }
                }
              }))
          }))
        return Effect.flatMap(claimed, (result): Effect.Effect<ResolveResult, PersistenceError> => {
          if (result._tag === "Claimed") {
            return Effect.zipRight(
              hint(result.events),
              Effect.map(decode(operation, codecs.request)(result.request), (request) => ({
                _tag: "Resolved",
                request,
                event: written(result.events)[0]!,
                ...(granted !== undefined ? { grant: granted } : {})
              } as const))
            )
          }
          if (Option.isNone(result.current)) {
            return Effect.succeed({ _tag: "NotFound" } as const)
          }
          return Effect.map(
            decode(operation, codecs.request)(result.current.value),
            (current) =>
              current.status === "pending" && refusal !== "NotPending"
                ? { _tag: refusal, request: current }
                : { _tag: "NotPending", request: current }
          )
        })
      })

    const store: Service = {
      // Encoded as the effect is made, not when it runs: encoding is pure, and one step fewer
      // counts on the path of every decision.
      append: (events) => {
        if (events.length === 0) return Effect.succeed([])
        const lifecycle = events.find((event) => LIFECYCLE_EVENTS.has(event.type))
        if (lifecycle !== undefined) {
          return Effect.fail(
            new PersistenceError({
              operation: "append",
              cause: new Error(`${lifecycle.type} is written only with the change of its request's row`)
            })
          )
        }
        const encoded = encodeEventsSync("append", events)
        if (Either.isLeft(encoded)) return Effect.fail(encoded.left)
        return driver.append(encoded.right, (rows) => {
          notify(rows)
          return written(rows)
        })
      },

      createRequest: (request, event, shadow) =>
        Effect.suspend(() => {
          const events = shadow === undefined ? [event] : [event, { ...shadow, requestId: request.requestId }]
          const call = request.toolCall
          const digest = argsDigest(call.args)
          const encoded = encodeEventsSync("createRequest", events)
          if (Either.isLeft(encoded)) return Effect.fail(encoded.left)
          const requestEncoded = codecs.request.encode(request)
          if (Either.isLeft(requestEncoded)) {
            return Effect.fail(new PersistenceError({ operation: "createRequest", cause: requestEncoded.left }))
          }
          const inserted = driver.insertRequest(
            requestEncoded.right,
            encoded.right,
            // the driver judged activity on the store's clock; `covers` judges scope and arguments
            (active) => {
              for (let i = 0; i < active.length; i++) {
                const grant = codecs.approval.decode(active[i])
                if (Either.isLeft(grant)) return Either.left(grant.left)
                if (covers(grant.right, call, Number.NEGATIVE_INFINITY, digest)) return Either.right(i)
              }
              return Either.right(-1)
            },
            digest
          )
          return Effect.flatMap(inserted, (result): Effect.Effect<CreateResult, PersistenceError> => {
            switch (result._tag) {
              case "Inserted": {
                notify(result.events)
                const [requested, shadowed] = written(result.events)
                return Effect.succeed(
                  shadowed === undefined
                    ? { _tag: "Created", request, event: requested! }
                    : { _tag: "Created", request, event: requested!, shadow: shadowed }
                )
              }
              case "Existing":
                return Effect.map(
                  decode("createRequest", codecs.request)(result.request),
                  (existing) => ({ _tag: "Existing", request: existing })
                )
              case "Decided":
                return Effect.map(
                  decode("createRequest", codecs.decision)(result.decision),
                  (decision) => ({ _tag: "Decided", decision })
                )
              case "Covered":
                return Effect.map(
                  decode("createRequest", codecs.approval)(result.grant),
                  (grant) => ({ _tag: "Covered", grant })
                )
            }
          })
        }),

      resolve: (requestId, resolution, event, grant) => {
        const step = (request: ApprovalRequest): Step => ({
          event,
          next: { ...request, status: resolution.status, resolution },
          grant
        })
        return resolution.status === "expired"
          ? transition("resolve", requestId, { _tag: "PastDeadline", at: resolution.resolvedAt }, "NotDue", step)
          : transition("resolve", requestId, { _tag: "BeforeDeadline", at: resolution.resolvedAt }, "Overdue", step)
      },

      answer: (requestId, at, answer) =>
        transition("answer", requestId, { _tag: "BeforeDeadline", at }, "Overdue", (request) => {
          const { event, grant, resolution } = answer(request)
          return { event, next: { ...request, status: resolution.status, resolution }, grant }
        }),

      extend: (requestId, expiresAt, event) =>
        transition(
          "extend",
          requestId,
          { _tag: "BeforeDeadline", at: event.at },
          "Overdue",
          ({ warnedAt: _, ...request }) => ({
            event,
            next: { ...request, expiresAt }
          })
        ),

      markWarned: (requestId, event) =>
        Effect.map(
          transition("markWarned", requestId, { _tag: "Unwarned" }, "NotPending", (request) => ({
            event,
            next: { ...request, warnedAt: event.at }
          })),
          (result) => result._tag === "Resolved"
        ),

      consume: (requestId, at, event) =>
        Effect.suspend(() => {
          const consumed = (events: ReadonlyArray<Codecs.EventEncoded>) =>
            Effect.map(driver.consume(requestId, at, events), (rows) => {
              notify(rows)
              return rows !== undefined
            })
          return event === undefined
            ? consumed([])
            : Effect.flatMap(encode("consume", codecs.event, event), (encoded) => consumed([encoded]))
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

      recordDecision: (decision, events) => {
        const encoded = codecs.decision.encode(decision)
        if (Either.isLeft(encoded)) {
          return Effect.fail(new PersistenceError({ operation: "recordDecision", cause: encoded.left }))
        }
        const encodedEvents = encodeEventsSync("recordDecision", events)
        if (Either.isLeft(encodedEvents)) return Effect.fail(encodedEvents.left)
        return Effect.flatMap(
          driver.insertDecision(encoded.right, encodedEvents.right, reliedOn(decision)),
          (result): Effect.Effect<RecordResult, PersistenceError> => {
            switch (result._tag) {
              case "Inserted":
                notify(result.events)
                return Effect.succeed({ _tag: "Created", decision })
              case "Existing":
                return Effect.map(
                  decode("recordDecision", codecs.decision)(result.decision),
                  (decision) => ({ _tag: "Existing", decision })
                )
              case "Requested":
                return Effect.map(
                  decode("recordDecision", codecs.request)(result.request),
                  (request) => ({ _tag: "Requested", request })
                )
              case "GrantInactive":
                return Effect.succeed({ _tag: "GrantInactive", sessionApprovalId: reliedOn(decision)! })
            }
          }
        )
      },

      listPending: (options) => Effect.flatMap(driver.listPending(options), decodeAll("listPending", codecs.request)),
      countPending: driver.countPending,
      listDue: (at) => Effect.flatMap(driver.listDue(at), decodeAll("listDue", codecs.request)),
      listToWarn: (at, warnBeforeMs) =>
        Effect.flatMap(driver.listToWarn(at, warnBeforeMs), decodeAll("listToWarn", codecs.request)),

      grant: (approval, event) =>
        Effect.gen(function*() {
          const result = yield* driver.insertApproval(
            [yield* encode("grant", codecs.event, event)],
            (seqs) => codecs.approval.encode({ ...approval, seq: seqs[0]! })
          )
          yield* hint(result.events)
          return yield* decode("grant", codecs.approval)(result.approval)
        }),

      revoke: (id, at, event) =>
        Effect.gen(function*() {
          const result = yield* driver.revoke({ id }, at, [yield* encode("revoke", codecs.event, event)], revokeAll(at))
          yield* hint(result.events)
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
          yield* hint(result.events)
          return yield* decodeAll("revokeWhere", codecs.approval)(result.revoked)
        }),

      sessionApprovals: (query) =>
        Effect.flatMap(driver.sessionApprovals(query), decodeAll("sessionApprovals", codecs.approval)),

      events: (query = {}) =>
        Effect.flatMap(
          driver.events(query.toolName === undefined ? query : { ...query, toolName: query.toolName.toLowerCase() }),
          (rows) => {
            // the memory driver's rows are the very ones its writes returned
            if (driver.returnsWhatItWasGiven) return Effect.succeed(rows as ReadonlyArray<AuditEvent>)
            const out: Array<AuditEvent> = new Array(rows.length)
            for (let i = 0; i < rows.length; i++) {
              const event = codecs.event.decodeRow(rows[i])
              if (Either.isLeft(event)) {
                return Effect.fail(new PersistenceError({ operation: "events", cause: event.left }))
              }
              out[i] = event.right
            }
            return Effect.succeed(out)
          }
        ),

      lastSeq: driver.lastSeq,

      chainLinks: driver.chainLinks,

      tail: (afterSeq, limit) => ownTail.after(afterSeq, known, limit, store.events({ afterSeq, limit })),

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
