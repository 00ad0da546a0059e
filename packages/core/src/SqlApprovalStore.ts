/**
 * The approval store on `@effect/sql`: one schema for SQLite (the embedded default) and
 * PostgreSQL (scale-out), with its migrations shipped here and its tables under a configurable
 * prefix. An append-only event log (the audit trail) and two projections (requests, session
 * approvals) are written in one transaction per store call; "only if still pending" and "one
 * request per tool call" are decided by the database, so answers are exactly-once across
 * processes. Writers are serialized (SQLite by its write lock, PostgreSQL by an advisory lock), so
 * sequence numbers commit in order and a reader tailing `seq > last` never skips a row.
 *
 * Speed: statements run straight on the connection at hand (no per-statement span), rows this
 * process wrote are read back from a cache and others' through a checked `JSON.parse` (the
 * entity Schema decodes only what that check cannot vouch for), and calls made while another
 * runs are committed together (group commit), each still all-or-nothing and exactly-once.
 *
 * Wake-ups: this process's own commits are hinted to `subscribe`rs at once; other processes'
 * commits arrive through a pluggable feed (module `SqlChangeFeed`: `layerPollingFeed` for any
 * database, `layerNotifyFeed` for PostgreSQL LISTEN/NOTIFY).
 *
 * @example
 * import { SqliteClient } from "@effect/sql-sqlite-bun"
 * import { Policy, SqlApprovalStore, ToolGate } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Store = SqlApprovalStore.layer({ tablePrefix: "toolgate_" }).pipe(
 *   Layer.provide(SqlApprovalStore.layerPollingFeed("50 millis")),
 *   // the store turns WAL on itself, so a damaged file is a PersistenceError, not a driver defect
 *   Layer.provide(SqliteClient.layer({ filename: "toolgate.db", disableWAL: true }))
 * )
 * const Gate = ToolGate.layer({ policy: Policy.allowAll }).pipe(Layer.provide(Store))
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Layer, Option, type ParseResult, Queue, RcRef, Stream } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalRequest, RequestId } from "./ApprovalRequest.js"
import {
  ApprovalStore,
  type CreateResult,
  type Recorded,
  type RecordResult,
  reliedOn,
  type ResolveResult,
  type Service
} from "./ApprovalStore.js"
import type { AuditEvent, UnsequencedEvent } from "./AuditEvent.js"
import * as Batcher from "./internal/sqlBatcher.js"
import * as Rows from "./internal/sqlRows.js"
import { lockKey, migrate, migrations, retryOpen, tables } from "./internal/sqlSchema.js"
import { covers, type SessionApproval } from "./SessionApproval.js"
import { SqlChangeFeed } from "./SqlChangeFeed.js"
import { PersistenceError } from "./ToolGateError.js"

/**
 * The change feeds, from their own module (`SqlChangeFeed`), under the names they had here.
 *
 * @since 0.1.0
 * @category change feeds
 */
export {
  type ChangeFeed,
  layerNotifyFeed,
  layerPollingFeed,
  type Listener,
  makeNotifyFeed,
  type NotifyFeedOptions,
  SqlChangeFeed
} from "./SqlChangeFeed.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** prefix of every table (and index) name; lower-case letters, digits and `_` (default `toolgate_`) */
  readonly tablePrefix?: string | undefined
  /** SQLite: how long a write waits for another process's write lock (default 5000 ms) */
  readonly busyTimeoutMs?: number | undefined
  /**
   * SQLite durability (default `normal`). In WAL mode, `normal` survives a process crash or
   * `kill -9` with nothing lost; only a power loss or OS crash may drop the last commits (the file
   * stays consistent). `full` syncs the WAL on every commit and survives those too, slower.
   */
  readonly synchronous?: "normal" | "full" | undefined
  /**
   * SQLite: how many pages the write-ahead log may hold before it is copied back into the database
   * (default 10,000, about 40 MB). Each copy stalls the commit that triggers it; SQLite's own
   * default of 1,000 made those stalls 10 times as frequent (pause p99 4-5 ms instead of 0.7 ms in
   * W2) for a WAL a tenth the size.
   */
  readonly walAutocheckpointPages?: number | undefined
  /**
   * Whose clock judges deadlines in the writing transactions: whether an answer or extension
   * comes too late, whether an expiry is due, whether a session approval is still active.
   * `database` (default): the database's own clock, so gate processes on hosts with skewed clocks
   * agree. `caller`: the time the gate passes in (its `Clock`), for tests on the `TestClock`.
   */
  readonly clock?: "database" | "caller" | undefined
}

type Failure = SqlError | ParseResult.ParseError

/**
 * Opens the store: sets SQLite up (busy timeout, WAL), runs the migrations, and returns the
 * service. Needs a `SqlClient` and a `SqlChangeFeed`; the feed's fiber lives in the given scope and
 * runs only while someone is subscribed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<Service, PersistenceError, SqlClient.SqlClient | SqlChangeFeed | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const feed = yield* SqlChangeFeed
    const prefix = options.tablePrefix ?? "toolgate_"
    // lower case only: PostgreSQL folds unquoted names, and the Migrator probes its table unquoted
    if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) {
      return yield* Effect.dieMessage(`SqlApprovalStore: invalid table prefix ${JSON.stringify(prefix)}`)
    }
    const t = tables(prefix)
    const events = sql(t.events)
    const requests = sql(t.requests)
    const approvals = sql(t.sessionApprovals)
    const decisions = sql(t.decisions)
    const isSqlite = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
    // the time deadlines are judged at: the database's clock, or the caller's `at`
    const databaseNow = sql.onDialectOrElse({
      pg: () => sql.literal("(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"),
      orElse: () => sql.literal("CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)")
    })
    const clockAt = (at: number): Fragment => options.clock === "caller" ? sql`${at}` : databaseNow
    const codecs = Rows.makeCodecs()
    const readRequests = Rows.requests(codecs)
    const readApprovals = Rows.approvals(codecs)
    const readEvents = Rows.events(codecs)
    const readDecisions = Rows.decisions(codecs)

    const setUp: Effect.Effect<unknown, SqlError> = isSqlite
      ? Effect.all([
        sql`PRAGMA busy_timeout = ${sql.literal(String(Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000))))}`,
        sql`PRAGMA journal_mode = WAL`,
        sql`PRAGMA synchronous = ${sql.literal(options.synchronous === "full" ? "FULL" : "NORMAL")}`,
        sql`PRAGMA wal_autocheckpoint = ${
          sql.literal(String(Math.max(1, Math.trunc(options.walAutocheckpointPages ?? 10_000))))
        }`
      ], { discard: true })
      : Effect.void
    // Processes opening one database at once wait for each other: the migrations run under the
    // writers' lock, and a busy database (or a lost DDL race with an older version) is retried.
    yield* retryOpen(Effect.zipRight(
      PersistenceError.refail("open")(setUp),
      PersistenceError.refail("migrate")(migrate({ loader: migrations(t), table: t.migrations, lock: lockKey(prefix) }))
    ))

    // --- statements -----------------------------------------------------------------------------

    /**
     * Runs a compiled statement on the connection at hand, skipping the per-statement span, scope
     * and compile of `@effect/sql`'s `Statement` (most of a statement's cost on SQLite): the
     * transaction's (or the batch's) connection when there is one, else the pool.
     */
    const exec = (text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<any>, SqlError> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) =>
        transaction._tag === "Some"
          ? transaction.value[0].execute(text, params as ReadonlyArray<any>, undefined)
          : isSqlite
          ? Effect.scoped(
            Effect.flatMap(sql.reserve, (conn) => conn.execute(text, params as ReadonlyArray<any>, undefined))
          )
          : sql.unsafe<any>(text, params as ReadonlyArray<any>))

    // Group commit; on SQLite reads queue too, since the one connection serves them.
    const batcher = yield* Batcher.make({
      reserve: sql.reserve,
      begin: isSqlite
        ? ["BEGIN IMMEDIATE"]
        : ["BEGIN", `SELECT pg_advisory_xact_lock(${lockKey(prefix)})`]
    })
    const inTransaction = Effect.map(Effect.serviceOption(SqlClient.TransactionConnection), Option.isSome)

    /** A read: on SQLite through the batcher (unless the caller is inside its own transaction). */
    const read = <A>(operation: string, body: Effect.Effect<A, Failure>): Effect.Effect<A, PersistenceError> =>
      PersistenceError.refail(operation)(
        isSqlite ? Effect.flatMap(inTransaction, (inside) => inside ? body : batcher.read(body)) : body
      )

    /** Compiles once: the statement's text with its placeholders, for `exec` with fresh parameters. */
    const textOf = (statement: Statement.Statement<unknown>) => statement.compile()[0]

    /** Compiles a statement built per call (its shape depends on the query) and runs it. */
    const run = (statement: Statement.Statement<unknown>) => {
      const [text, params] = statement.compile()
      return exec(text, params)
    }

    const json = <A>(codec: Rows.Codec<A>, value: A) => codec.json(value)

    // PostgreSQL numbers events from a counter row moved on in the writing transaction (a sequence
    // would burn numbers on rollback); SQLite's AUTOINCREMENT counter is transactional already.
    const eventColumns = sql.literal("at, type, outcome, session_key, tool_call_id, tool_name, request_id, event")
    const nextSeq = "toolgate_next_seq"
    const takeSeqs = (n: number) =>
      sql`UPDATE ${sql(t.eventSeq)} SET last = last + ${sql.literal(String(n))} RETURNING last`
    /** The `back`-th number before the last one taken. */
    const lastTaken = (back = 0) =>
      sql`(SELECT last FROM ${sql(nextSeq)})${back > 0 ? sql.literal(` - ${back}`) : sql.literal("")}`

    const q = {
      lastSeq: textOf(sql`SELECT MAX(seq) AS seq FROM ${events}`),
      insertEvent: isSqlite
        ? textOf(sql`INSERT INTO ${events} (${eventColumns})
          VALUES (${0}, ${""}, ${""}, ${""}, ${""}, ${""}, ${""}, ${""}) RETURNING seq`)
        : textOf(sql`WITH ${sql(nextSeq)} AS (${takeSeqs(1)}) INSERT INTO ${events} (seq, ${eventColumns})
          VALUES (${lastTaken()}, ${0}, ${""}, ${""}, ${""}, ${""}, ${""}, ${""}, ${""}) RETURNING seq`),
      // requested_seq: creation order, breaking ties between requests of the same millisecond. The
      // next seq, read while this writer holds the write lock: the seq of the request's
      // `approval.requested` event (seq is gap-free; only a deleted tail of the log would make it
      // lower, still in creation order).
      insertRequest: textOf(sql`INSERT INTO ${requests}
        (request_id, session_key, tool_call_id, status, created_at, expires_at, warned_at, consumed_at, request, requested_seq)
        VALUES (${""}, ${""}, ${""}, ${""}, ${0}, ${0}, ${0}, ${0}, ${""}, (SELECT COALESCE(MAX(seq), 0) + 1 FROM ${events}))
        ON CONFLICT DO NOTHING RETURNING request_id`),
      requestById: textOf(sql`SELECT request FROM ${requests} WHERE request_id = ${""}`),
      requestByCall: textOf(sql`SELECT request FROM ${requests} WHERE session_key = ${""} AND tool_call_id = ${""}`),
      recordedByCall: textOf(
        sql`SELECT request, NULL AS decision FROM ${requests} WHERE session_key = ${""} AND tool_call_id = ${""}
        UNION ALL SELECT NULL, decision FROM ${decisions} WHERE session_key = ${""} AND tool_call_id = ${""}`
      ),
      insertDecision: textOf(
        sql`INSERT INTO ${decisions} (session_key, tool_call_id, decision) VALUES (${""}, ${""}, ${""})
        ON CONFLICT DO NOTHING RETURNING session_key`
      ),
      decisionByCall: textOf(sql`SELECT decision FROM ${decisions} WHERE session_key = ${""} AND tool_call_id = ${""}`),
      rewriteRequest: textOf(sql`UPDATE ${requests}
        SET status = ${""}, expires_at = ${0}, warned_at = ${0}, consumed_at = ${0}, request = ${""} WHERE request_id = ${""}`),
      // One statement, so one autocommit: the row's JSON gets `consumedAt` from the database's own
      // JSON functions (no read, no rewrite, no transaction).
      consume: textOf(sql`UPDATE ${requests} SET consumed_at = ${0}, request = ${
        sql.onDialectOrElse({
          pg: () => sql`(request::jsonb || jsonb_build_object('consumedAt', ${0}::bigint))::text`,
          orElse: () => sql`json_set(request, '$.consumedAt', ${0})`
        })
      } WHERE request_id = ${""} AND status = 'approved' AND consumed_at IS NULL RETURNING request_id`),
      insertApproval: textOf(sql`INSERT INTO ${approvals}
        (id, session_key, tool_name, seq, granted_seq, revoked_at, expires_at, approval)
        VALUES (${""}, ${""}, ${""}, ${0}, ${0}, ${0}, ${0}, ${""})`),
      rewriteApproval: textOf(sql`UPDATE ${approvals}
        SET seq = ${0}, revoked_at = ${0}, expires_at = ${0}, approval = ${""} WHERE id = ${""}`)
    }

    // --- hints ------------------------------------------------------------------------------

    const readLastSeq = Effect.flatMap(exec(q.lastSeq, []), Rows.seqs).pipe(
      Effect.map((seqs) => seqs[0] ?? 0)
    )
    // Highest sequence number hinted so far, from this process's commits or the feed.
    let known = yield* PersistenceError.refail("lastSeq")(readLastSeq)
    // Each subscriber holds at most one outstanding hint: while one is unread, commits add
    // nothing, so a burst of commits costs the reader one wake-up, not one per commit.
    const subscribers = new Set<Queue.Queue<number>>()
    const offer = (seq: number) => {
      for (const queue of subscribers) {
        // size is negative while the reader waits in `take`
        if (Option.getOrElse(queue.unsafeSize(), () => 0) <= 0) queue.unsafeOffer(seq)
      }
    }
    const hint = (seq: number | undefined) =>
      Effect.sync(() => {
        if (seq === undefined || seq <= known) return
        known = seq
        offer(seq)
      })
    // Another process may have committed: readers read the log after what they have seen (reading
    // `max(seq)` first would only put one more read on the way to a waiter).
    const watcher = yield* RcRef.make({
      acquire: feed.changes.pipe(
        Stream.runForEach(() => Effect.sync(() => offer(known))),
        Effect.forkScoped
      )
    })

    // --- writing ------------------------------------------------------------------------------

    // PostgreSQL sequence values may commit out of order; one lock per table set keeps them in
    // order (the batcher takes it when it opens a transaction).
    const serialize = isSqlite
      ? Effect.void
      : Effect.asVoid(run(sql`SELECT pg_advisory_xact_lock(${sql.literal(String(lockKey(prefix)))})`))

    /**
     * One transaction per call, as callers see it (the batcher may commit several calls' bodies
     * together). Inside a caller's own transaction, a savepoint of it. `committed` names the last
     * event written, hinted to subscribers after COMMIT. `single`: the body is one statement.
     */
    const write = <A>(
      operation: string,
      body: Effect.Effect<A, Failure>,
      committed: (a: A) => number | undefined,
      single = false
    ): Effect.Effect<A, PersistenceError> =>
      Effect.flatMap(inTransaction, (inside) =>
        inside
          ? sql.withTransaction(Effect.zipRight(serialize, body))
          : batcher.write(body, single)).pipe(
          Effect.tap((a) => hint(committed(a))),
          PersistenceError.refail(operation)
        )

    const eventParams = (event: UnsequencedEvent, text: string) => [
      event.at,
      event.type,
      event.outcome,
      event.sessionKey ?? null,
      event.toolCallId ?? null,
      // lower-cased so the indexed column answers the case-insensitive tool filter
      event.toolName?.toLowerCase() ?? null,
      event.requestId ?? null,
      text
    ]

    const insertEvents = (batch: ReadonlyArray<UnsequencedEvent>) =>
      Effect.gen(function*() {
        let seqs: Array<number>
        if (batch.length === 1) {
          seqs = yield* Effect.flatMap(
            exec(q.insertEvent, eventParams(batch[0]!, yield* json(codecs.event, batch[0]!))),
            Rows.seqs
          )
        } else {
          const rows: Array<ReturnType<typeof eventParams>> = []
          for (const event of batch) rows.push(eventParams(event, yield* json(codecs.event, event)))
          const values = (row: ReturnType<typeof eventParams>) => sql.csv(row.map((value) => sql`${value}`))
          const inserted = isSqlite
            ? run(sql`INSERT INTO ${events} (${eventColumns})
              VALUES ${sql.csv(rows.map((row) => sql`(${values(row)})`))} RETURNING seq`)
            : run(sql`WITH ${sql(nextSeq)} AS (${takeSeqs(rows.length)}) INSERT INTO ${events} (seq, ${eventColumns})
              VALUES ${
              sql.csv(rows.map((row, i) => sql`(${lastTaken(rows.length - 1 - i)}, ${values(row)})`))
            } RETURNING seq`)
          // numbered in insertion order (RETURNING's row order is not promised)
          seqs = yield* Effect.map(Effect.flatMap(inserted, Rows.seqs), (numbers) => [...numbers].sort((a, b) => a - b))
        }
        // writers are serialized, so the rows got consecutive numbers in insertion order
        yield* feed.onCommit(seqs[seqs.length - 1]!)
        return batch.map((event, i): AuditEvent => ({ seq: seqs[i]!, ...event }))
      })
    const insertEvent = (event: UnsequencedEvent) => Effect.map(insertEvents([event]), (sequenced) => sequenced[0]!)

    const rewriteRequest = (request: ApprovalRequest) =>
      Effect.flatMap(json(codecs.request, request), (text) =>
        exec(q.rewriteRequest, [
          request.status,
          request.expiresAt,
          request.warnedAt ?? null,
          request.consumedAt ?? null,
          text,
          request.requestId
        ]))

    // granted_seq keeps grant order among rows that a later revocation gave one seq
    const insertApproval = (approval: SessionApproval) =>
      Effect.flatMap(json(codecs.approval, approval), (text) =>
        exec(q.insertApproval, [
          approval.id,
          approval.sessionKey,
          approval.toolName,
          approval.seq,
          approval.seq,
          approval.revokedAt ?? null,
          approval.expiresAt ?? null,
          text
        ]))

    const rewriteApproval = (approval: SessionApproval) =>
      Effect.flatMap(
        json(codecs.approval, approval),
        (text) =>
          exec(q.rewriteApproval, [
            approval.seq,
            approval.revokedAt ?? null,
            approval.expiresAt ?? null,
            text,
            approval.id
          ])
      )

    const selectRequests = (where: Fragment, order = sql``) =>
      Effect.flatMap(run(sql`SELECT request FROM ${requests} WHERE ${where} ${order}`), readRequests)

    const firstOf = (rows: ReadonlyArray<ApprovalRequest>) => Option.fromNullable(rows[0])
    const requestById = (requestId: string) =>
      Effect.flatMap(exec(q.requestById, [requestId]), readRequests).pipe(Effect.map(firstOf))
    const requestByCall = (sessionKey: string, toolCallId: string) =>
      Effect.flatMap(exec(q.requestByCall, [sessionKey, toolCallId]), readRequests).pipe(Effect.map(firstOf))

    /**
     * Claims a request with a conditional UPDATE (the transaction's first write), then rewrites
     * its JSON from the pre-image the UPDATE returned and commits `event` with it. When the
     * condition does not hold nothing is written, and the request as it is now is returned.
     */
    const transition = (
      operation: string,
      requestId: RequestId,
      claim: { readonly set: Fragment; readonly when: Fragment },
      next: (request: ApprovalRequest) => ApprovalRequest,
      event: UnsequencedEvent | undefined,
      alongside: (seq: number) => Effect.Effect<unknown, Failure> = () => Effect.void
    ) =>
      write(
        operation,
        Effect.gen(function*() {
          const [before] = yield* Effect.flatMap(
            run(
              sql`UPDATE ${requests} SET ${claim.set} WHERE request_id = ${requestId} AND ${claim.when} RETURNING request`
            ),
            readRequests
          )
          if (before === undefined) {
            return { _tag: "Refused", current: yield* requestById(requestId) } as const
          }
          const request = next(before)
          const sequenced = event === undefined ? undefined : yield* insertEvent(event)
          yield* rewriteRequest(request)
          if (sequenced !== undefined) yield* alongside(sequenced.seq)
          return { _tag: "Applied", request, event: sequenced } as const
        }),
        (result) => result._tag === "Applied" ? result.event?.seq : undefined
      )

    /**
     * A transition of a pending request within (`Overdue` otherwise) or past (`NotDue` otherwise)
     * its deadline, judged at `at` on the store's clock; or why it was refused.
     */
    const pendingTransition = (
      operation: string,
      requestId: RequestId,
      deadline: { readonly at: number; readonly refusal: "Overdue" | "NotDue" },
      set: Fragment,
      next: (request: ApprovalRequest) => ApprovalRequest,
      event: UnsequencedEvent,
      alongside?: (seq: number) => Effect.Effect<unknown, Failure>
    ): Effect.Effect<ResolveResult, PersistenceError> => {
      const now = clockAt(deadline.at)
      const when = deadline.refusal === "Overdue"
        ? sql`status = 'pending' AND expires_at > ${now}`
        : sql`status = 'pending' AND expires_at <= ${now}`
      return Effect.map(
        transition(operation, requestId, { set, when }, next, event, alongside),
        (result): ResolveResult =>
          result._tag === "Applied"
            ? { _tag: "Resolved", request: result.request, event: result.event! }
            : Option.match(result.current, {
              onNone: () => ({ _tag: "NotFound" }),
              onSome: (request) =>
                request.status === "pending"
                  ? { _tag: deadline.refusal, request }
                  : { _tag: "NotPending", request }
            })
      )
    }

    /** A write's result, with the last seq it wrote (hinted to subscribers after COMMIT). */
    const unwritten = <A>(result: A): { readonly result: A; readonly seq: number | undefined } => ({
      result,
      seq: undefined
    })

    const activeAt = (at: number) => sql`revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${at})`
    /** Active on the store's clock (`clockAt(at)`). */
    const activeNow = (at: number) => sql`revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${clockAt(at)})`

    // --- the service ----------------------------------------------------------------------------

    const store: Service = {
      append: (batch) =>
        batch.length === 0
          ? Effect.succeed([])
          : write("append", insertEvents(batch), (sequenced) => sequenced[sequenced.length - 1]!.seq),

      createRequest: (request, event, shadow) =>
        write(
          "createRequest",
          Effect.gen(function*() {
            const call = request.toolCall
            const existing = yield* requestByCall(call.sessionKey, call.id)
            if (Option.isSome(existing)) return unwritten<CreateResult>({ _tag: "Existing", request: existing.value })
            const [decided] = yield* Effect.flatMap(exec(q.decisionByCall, [call.sessionKey, call.id]), readDecisions)
            if (decided !== undefined) return unwritten<CreateResult>({ _tag: "Decided", decision: decided })
            const grants = yield* Effect.flatMap(
              run(sql`SELECT approval FROM ${approvals}
                WHERE session_key = ${call.sessionKey} AND tool_name = ${call.name.toLowerCase()} AND ${
                activeNow(request.createdAt)
              }`),
              readApprovals
            )
            // the query judged activity on the store's clock; `covers` judges scope and arguments
            const grant = grants.find((g) => covers(g, call, Number.NEGATIVE_INFINITY))
            if (grant !== undefined) return unwritten<CreateResult>({ _tag: "Covered", grant })
            const inserted = yield* exec(q.insertRequest, [
              request.requestId,
              request.toolCall.sessionKey,
              request.toolCall.id,
              request.status,
              request.createdAt,
              request.expiresAt,
              request.warnedAt ?? null,
              request.consumedAt ?? null,
              yield* json(codecs.request, request)
            ])
            if (inserted.length === 0) {
              return yield* Effect.dieMessage(`request id ${request.requestId} is already used by another tool call`)
            }
            if (shadow === undefined) {
              const sequenced = yield* insertEvent(event)
              return { result: { _tag: "Created", request, event: sequenced } as CreateResult, seq: sequenced.seq }
            }
            const [requested, shadowed] = yield* insertEvents([event, { ...shadow, requestId: request.requestId }])
            return {
              result: { _tag: "Created", request, event: requested!, shadow: shadowed! } as CreateResult,
              seq: shadowed!.seq
            }
          }),
          (written) => written.seq
        ).pipe(Effect.map((written) => written.result)),

      resolve: (requestId, resolution, event, grant) =>
        pendingTransition(
          "resolve",
          requestId,
          { at: resolution.resolvedAt, refusal: resolution.status === "expired" ? "NotDue" : "Overdue" },
          sql`status = ${resolution.status}`,
          (request) => ({ ...request, status: resolution.status, resolution }),
          event,
          grant === undefined ? undefined : (seq) => insertApproval({ ...grant, seq })
        ),

      extend: (requestId, expiresAt, event) =>
        pendingTransition(
          "extend",
          requestId,
          { at: event.at, refusal: "Overdue" },
          sql`expires_at = ${expiresAt}, warned_at = NULL`,
          ({ warnedAt: _, ...request }) => ({ ...request, expiresAt }),
          event
        ),

      markWarned: (requestId, event) =>
        Effect.map(
          transition(
            "markWarned",
            requestId,
            { set: sql`warned_at = ${event.at}`, when: sql`status = 'pending' AND warned_at IS NULL` },
            (request) => ({ ...request, warnedAt: event.at }),
            event
          ),
          (result) => result._tag === "Applied"
        ),

      consume: (requestId, at, event) =>
        event === undefined
          ? write(
            "consume",
            Effect.map(exec(q.consume, [at, at, requestId]), (rows) => rows.length > 0),
            () => undefined,
            true
          )
          : write(
            "consume",
            Effect.gen(function*() {
              const spent = (yield* exec(q.consume, [at, at, requestId])).length > 0
              return spent ? { spent, seq: (yield* insertEvent(event)).seq } : { spent, seq: undefined }
            }),
            (result) => result.seq
          ).pipe(Effect.map((result) => result.spent)),

      getRequest: (requestId) => read("getRequest", requestById(requestId)),

      findByToolCall: (sessionKey, toolCallId) => read("findByToolCall", requestByCall(sessionKey, toolCallId)),

      findRecorded: (sessionKey, toolCallId) =>
        read(
          "findRecorded",
          Effect.flatMap(exec(q.recordedByCall, [sessionKey, toolCallId, sessionKey, toolCallId]), (rows) => {
            // a request wins: it is the record of a call that needed approval
            const request = rows.find((row) => row.request !== null)
            if (request !== undefined) {
              return Effect.map(readRequests([request]), ([r]): Option.Option<Recorded> =>
                Option.some({ _tag: "Request", request: r! }))
            }
            return Effect.map(readDecisions(rows), ([d]): Option.Option<Recorded> =>
              d === undefined ? Option.none() : Option.some({ _tag: "Decision", decision: d }))
          })
        ),

      recordDecision: (decision, batch) =>
        write(
          "recordDecision",
          Effect.gen(function*() {
            const requested = yield* requestByCall(decision.sessionKey, decision.toolCallId)
            if (Option.isSome(requested)) {
              return unwritten<RecordResult>({ _tag: "Requested", request: requested.value })
            }
            const grantId = reliedOn(decision)
            if (grantId !== undefined) {
              const active = yield* run(
                sql`SELECT id FROM ${approvals} WHERE id = ${grantId} AND ${activeNow(decision.at)}`
              )
              if (active.length === 0) {
                return unwritten<RecordResult>({ _tag: "GrantInactive", sessionApprovalId: grantId })
              }
            }
            const inserted = yield* exec(q.insertDecision, [
              decision.sessionKey,
              decision.toolCallId,
              yield* json(codecs.decision, decision)
            ])
            if (inserted.length === 0) {
              const [existing] = yield* Effect.flatMap(
                exec(q.decisionByCall, [decision.sessionKey, decision.toolCallId]),
                readDecisions
              )
              return unwritten<RecordResult>({ _tag: "Existing", decision: existing! })
            }
            const sequenced = batch.length === 0 ? [] : yield* insertEvents(batch)
            return { result: { _tag: "Created", decision } as RecordResult, seq: sequenced[sequenced.length - 1]?.seq }
          }),
          (written) => written.seq
        ).pipe(Effect.map((written) => written.result)),

      listPending: (query) =>
        read(
          "listPending",
          selectRequests(
            sql.and([
              sql`status = 'pending'`,
              ...(query?.sessionKey !== undefined ? [sql`session_key = ${query.sessionKey}`] : [])
            ]),
            sql`ORDER BY created_at, requested_seq ${query?.limit !== undefined ? sql`LIMIT ${query.limit}` : sql``}`
          )
        ),

      listDue: (at) =>
        read(
          "listDue",
          selectRequests(sql`status = 'pending' AND expires_at <= ${at}`, sql`ORDER BY expires_at, requested_seq`)
        ),

      // expiresAt - min(warnBeforeMs, (expiresAt - createdAt) / 2) <= at, in integers and
      // bounded by expires_at so the pending-by-expiry index serves it
      listToWarn: (at, warnBeforeMs) =>
        read(
          "listToWarn",
          selectRequests(
            sql`status = 'pending' AND warned_at IS NULL AND expires_at <= ${at + warnBeforeMs}
                AND expires_at + created_at <= ${2 * at}`,
            sql`ORDER BY expires_at, requested_seq`
          )
        ),

      grant: (approval, event) =>
        write(
          "grant",
          Effect.gen(function*() {
            const sequenced = yield* insertEvent(event)
            const granted: SessionApproval = { ...approval, seq: sequenced.seq }
            yield* insertApproval(granted)
            return granted
          }),
          (granted) => granted.seq
        ),

      revoke: (id, at, event) =>
        write(
          "revoke",
          Effect.gen(function*() {
            const [before] = yield* Effect.flatMap(
              run(
                sql`UPDATE ${approvals} SET revoked_at = ${at} WHERE id = ${id} AND ${activeAt(at)} RETURNING approval`
              ),
              readApprovals
            )
            if (before === undefined) return Option.none()
            const revoked: SessionApproval = { ...before, revokedAt: at, seq: (yield* insertEvent(event)).seq }
            yield* rewriteApproval(revoked)
            return Option.some(revoked)
          }),
          Option.match({ onNone: () => undefined, onSome: (revoked) => revoked.seq })
        ),

      revokeWhere: (query, at, event) =>
        write(
          "revokeWhere",
          Effect.gen(function*() {
            const { seq } = yield* insertEvent(event)
            const before = yield* Effect.flatMap(
              run(sql`UPDATE ${approvals} SET revoked_at = ${at}, seq = ${seq}
                  WHERE ${
                sql.and([
                  sql`revoked_at IS NULL`,
                  ...(query.sessionKey !== undefined ? [sql`session_key = ${query.sessionKey}`] : []),
                  ...(query.toolName !== undefined ? [sql`tool_name = ${query.toolName.toLowerCase()}`] : [])
                ])
              }
                  RETURNING approval`),
              readApprovals
            )
            // until now each row's seq was the one it was granted with: grant order
            const revoked = before
              .sort((a, b) => a.seq - b.seq)
              .map((approval): SessionApproval => ({ ...approval, revokedAt: at, seq }))
            yield* Effect.forEach(revoked, rewriteApproval, { discard: true })
            return { seq, revoked }
          }),
          (result) => result.seq
        ).pipe(Effect.map((result) => result.revoked)),

      sessionApprovals: (query) =>
        read(
          "sessionApprovals",
          Effect.flatMap(
            run(sql`SELECT approval FROM ${approvals} WHERE ${
              sql.and([
                ...(query?.id !== undefined ? [sql`id = ${query.id}`] : []),
                ...(query?.sessionKey !== undefined ? [sql`session_key = ${query.sessionKey}`] : []),
                ...(query?.afterSeq !== undefined ? [sql`seq > ${query.afterSeq}`] : []),
                ...(query?.activeAt !== undefined ? [activeAt(query.activeAt)] : [])
              ])
            } ORDER BY seq, granted_seq`),
            readApprovals
          )
        ),

      events: (query = {}) =>
        read(
          "events",
          Effect.flatMap(
            run(sql`SELECT seq, event FROM ${events} WHERE ${
              sql.and([
                sql`seq > ${query.afterSeq ?? 0}`,
                ...(query.sessionKey !== undefined
                  ? [sql`(session_key = ${query.sessionKey} OR session_key IS NULL)`]
                  : []),
                ...(query.toolName !== undefined ? [sql`tool_name = ${query.toolName.toLowerCase()}`] : []),
                ...(query.outcome !== undefined ? [sql`outcome = ${query.outcome}`] : []),
                ...(query.since !== undefined ? [sql`at >= ${query.since}`] : []),
                ...(query.until !== undefined ? [sql`at <= ${query.until}`] : [])
              ])
            } ORDER BY seq ${query.limit !== undefined ? sql`LIMIT ${query.limit}` : sql``}`),
            readEvents
          )
        ),

      lastSeq: read("lastSeq", readLastSeq),

      subscribe: Effect.gen(function*() {
        const queue = yield* Effect.acquireRelease(
          Effect.tap(Queue.sliding<number>(1), (queue) => Effect.sync(() => subscribers.add(queue))),
          (queue) => Effect.zipRight(Effect.sync(() => subscribers.delete(queue)), Queue.shutdown(queue))
        )
        yield* RcRef.get(watcher)
        return queue
      })
    }
    return store
  })

/**
 * The store as a layer. Migrations run when it is built (concurrent builders are serialized by the
 * Migrator); provide a `SqlClient` and a `SqlChangeFeed` (`layerPollingFeed` or `layerNotifyFeed`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: Options
): Layer.Layer<ApprovalStore, PersistenceError, SqlClient.SqlClient | SqlChangeFeed> =>
  Layer.scoped(ApprovalStore, make(options))
