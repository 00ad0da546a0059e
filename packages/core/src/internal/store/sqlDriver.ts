import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Effect, Either, Option, type ParseResult } from "effect"
import type * as Scope from "effect/Scope"
import type {
  ApprovalEncoded,
  Claim,
  DecisionEncoded,
  Encoded,
  EventEncoded,
  EventRow,
  RequestEncoded
} from "../../ApprovalStore.js"
import type { ChangeFeed } from "../../SqlChangeFeed.js"
import { PersistenceError } from "../../ToolGateError.js"
import * as Batcher from "../sqlBatcher.js"
import { lockKey, type Tables } from "../sqlSchema.js"
import { first, seqsOf } from "./sqlEntityRows.js"
import * as EntityRows from "./sqlEntityRows.js"
import * as Statements from "./sqlStatements.js"

/**
 * The approval store's SQL driver: each method one transaction (or one statement), on SQLite or
 * PostgreSQL. Writers are serialized (SQLite by its write lock, PostgreSQL by an advisory lock), so
 * sequence numbers commit in order and a reader tailing `seq > last` never skips a row. Calls made
 * while another runs are committed together (group commit, `sqlBatcher.ts`), each still
 * all-or-nothing; the decisions of calls judged without a session approval (the allow hot path)
 * are written in one statement per batch, their events in another. Rows hold their entity as JSON text, read through a cache (`sqlRows.ts`).
 */

type Failure = SqlError | ParseResult.ParseError

export interface Options {
  readonly tables: Tables
  readonly feed: ChangeFeed
  /** judge deadlines on the database's clock (`database`) or at the time the caller passes */
  readonly clock: "database" | "caller"
}

const fromEither = <A>(either: Either.Either<A, ParseResult.ParseError>): Effect.Effect<A, ParseResult.ParseError> =>
  Either.isRight(either) ? Effect.succeed(either.right) : Effect.fail(either.left)

export const make = (
  options: Options
): Effect.Effect<Encoded, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const { feed, tables: t } = options
    const isSqlite = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
    const databaseNow = sql.onDialectOrElse({
      pg: () => sql.literal("(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"),
      orElse: () => sql.literal("CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)")
    })
    const clockAt = (at: unknown): Statement.Fragment => options.clock === "caller" ? sql`${at}` : databaseNow

    /** Runs text on the transaction's (or the batch's) connection when there is one, else the pool. */
    const exec: Statements.Exec = (text, params) =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) =>
        transaction._tag === "Some"
          ? transaction.value[0].execute(text, params as ReadonlyArray<any>, undefined)
          : isSqlite
          ? Effect.scoped(
            Effect.flatMap(sql.reserve, (conn) => conn.execute(text, params as ReadonlyArray<any>, undefined))
          )
          : sql.unsafe<any>(text, params as ReadonlyArray<any>))
    // PostgreSQL NOTIFY folded into the event insert (the feed's `onCommit` otherwise)
    const notifyChannel = isSqlite ? undefined : feed.channel
    const q = Statements.make(sql, t, exec, clockAt, notifyChannel)
    /** Compiles a statement built per call (its shape depends on the query) and runs it. */
    const run = (statement: Statement.Statement<unknown>) => {
      const [text, params] = statement.compile()
      return exec(text, params)
    }

    // Group commit; on SQLite reads queue too, since the one connection serves them.
    const batcher = yield* Batcher.make({
      reserve: sql.reserve,
      // PostgreSQL: one round trip (a simple query of two statements)
      begin: isSqlite ? ["BEGIN IMMEDIATE"] : [`BEGIN; SELECT pg_advisory_xact_lock(${lockKey(t.prefix)})`]
    })
    const inTransaction = Effect.map(Effect.serviceOption(SqlClient.TransactionConnection), Option.isSome)
    // PostgreSQL sequence values may commit out of order; one lock per table set keeps them in order
    const serialize = isSqlite
      ? Effect.void
      : Effect.asVoid(run(sql`SELECT pg_advisory_xact_lock(${sql.literal(String(lockKey(t.prefix)))})`))

    /** A read: on SQLite through the batcher (unless the caller is inside its own transaction). */
    const read = <A>(operation: string, body: Effect.Effect<A, Failure>): Effect.Effect<A, PersistenceError> =>
      PersistenceError.refail(operation)(
        isSqlite ? Effect.flatMap(inTransaction, (inside) => inside ? body : batcher.read(body)) : body
      )

    /**
     * One transaction per call, as callers see it (the batcher may commit several calls' bodies
     * together). Inside a caller's own transaction, a savepoint of it. `single`: one statement.
     */
    const write = <A>(operation: string, body: Effect.Effect<A, Failure>, single = false) =>
      Effect.flatMap(inTransaction, (inside) =>
        inside ? sql.withTransaction(Effect.zipRight(serialize, body)) : batcher.write(body, single)).pipe(
          PersistenceError.refail(operation)
        )

    const { approvalRow, approvalsOf, decisionsOf, decisionText, eventRow, eventsOf, requestRow, requestsOf } =
      EntityRows.make()

    /** A write joining `group` (on SQLite or PostgreSQL); inside a caller's transaction, a savepoint of it. */
    const writeJoined = <I, A>(operation: string, group: Batcher.Group<I, A, Failure>, input: I, single = false) =>
      Effect.flatMap(inTransaction, (inside) =>
        inside
          ? sql.withTransaction(Effect.zipRight(
            serialize,
            Effect.map(group.run([input]), (results) =>
              results[0]!)
          ))
          : batcher.join(group, input, single)).pipe(PersistenceError.refail(operation))

    const numbersOf = (rows: ReadonlyArray<EventRow>) => rows.map((row) => row.seq)
    /** Appends events: numbered consecutively (writers are serialized), as rows. */
    const appendEvents = (events: ReadonlyArray<EventEncoded>): Effect.Effect<ReadonlyArray<EventRow>, Failure> =>
      events.length === 0 ? Effect.succeed([]) : Effect.gen(function*() {
        const rows = events.map(eventRow)
        // numbered in insertion order (RETURNING's row order is not promised)
        const seqs = yield* Effect.flatMap(rows.length === 1 ? q.insertEvent(rows[0]!) : q.insertEvents(rows), seqsOf)
        if (notifyChannel === undefined) yield* feed.onCommit(seqs[seqs.length - 1]!)
        return events.map((event, i) => ({ seq: seqs[i]!, ...event }) as EventRow)
      })

    const requestByCall = (sessionKey: string, toolCallId: string) =>
      Effect.map(Effect.flatMap(q.requestByCall({ sessionKey, toolCallId }), requestsOf), first)
    const decisionByCall = (sessionKey: string, toolCallId: string) =>
      Effect.map(Effect.flatMap(q.decisionByCall({ sessionKey, toolCallId }), decisionsOf), first)

    /** The request (it wins: the record of a call that needed approval) or the decision of a call id, in one read. */
    const recordOf = (rows: ReadonlyArray<Record<string, unknown>>): Effect.Effect<
      Option.Option<
        | { readonly _tag: "Request"; readonly request: RequestEncoded }
        | { readonly _tag: "Decision"; readonly decision: DecisionEncoded }
      >,
      Failure
    > => {
      const request = rows.find((row) => row.request !== null)
      return request !== undefined
        ? Effect.map(requestsOf([request]), ([r]) => Option.some({ _tag: "Request", request: r! } as const))
        : Effect.map(
          decisionsOf(rows),
          ([d]) => d === undefined ? Option.none() : Option.some({ _tag: "Decision", decision: d } as const)
        )
    }
    const recordedByCall = (sessionKey: string, toolCallId: string) =>
      Effect.flatMap(q.recordedByCall({ sessionKey, toolCallId }), recordOf)

    /** A read joining `group`: on SQLite through the batcher (merged with the reads queued beside it). */
    const readJoined = <I, A>(operation: string, group: Batcher.Group<I, A, Failure>, input: I) =>
      PersistenceError.refail(operation)(
        isSqlite
          ? Effect.flatMap(
            inTransaction,
            (inside) => inside ? Effect.map(group.run([input]), (results) => results[0]!) : batcher.join(group, input)
          )
          : Effect.map(group.run([input]), (results) => results[0]!)
      )

    /** Call ids in a batch: the first input of each one, the later ones told apart. */
    const firstsOf = <I>(inputs: ReadonlyArray<I>, sessionKey: (input: I) => string, id: (input: I) => string) => {
      const seen = new Map<string, Set<string>>()
      return new Set(inputs.filter((input) => {
        const ids = seen.get(sessionKey(input)) ?? new Set()
        seen.set(sessionKey(input), ids)
        return ids.has(id(input)) ? false : (ids.add(id(input)), true)
      }))
    }

    type CallRecord = Effect.Effect.Success<ReturnType<typeof recordedByCall>>
    interface CallKey {
      readonly sessionKey: string
      readonly toolCallId: string
    }

    /** `recordedByCall` for the call ids of a batch's reads, in one statement. */
    const recordedCalls: Batcher.Group<CallKey, CallRecord, Failure> = {
      write: false,
      run: (calls) =>
        calls.length === 1
          ? Effect.map(recordedByCall(calls[0]!.sessionKey, calls[0]!.toolCallId), (found) => [found])
          : Effect.gen(function*() {
            const rows = yield* q.recordedByCalls(calls)
            const bySession = new Map<unknown, Map<unknown, Array<Record<string, unknown>>>>()
            for (const row of rows) {
              const ids = bySession.get(row.session_key) ?? new Map()
              bySession.set(row.session_key, ids)
              ids.set(row.tool_call_id, [...(ids.get(row.tool_call_id) ?? []), row])
            }
            return yield* Effect.forEach(
              calls,
              (call) => recordOf(bySession.get(call.sessionKey)?.get(call.toolCallId) ?? [])
            )
          })
    }

    type DecisionInsert = Effect.Effect.Success<ReturnType<Encoded["insertDecision"]>>

    /** What the call id's record is, when a decision for it was not inserted: a request wins. */
    const foundInstead = (sessionKey: string, toolCallId: string) =>
      Effect.map(
        recordedByCall(sessionKey, toolCallId),
        (recorded): DecisionInsert => {
          const found = Option.getOrThrow(recorded)
          return found._tag === "Request"
            ? { _tag: "Requested", request: found.request }
            : { _tag: "Existing", decision: found.decision }
        }
      )

    /**
     * Decisions that rely on no session approval (the calls a policy allows or denies), merged
     * across a batch: one insert for the decisions (each skipped when a request or a decision holds
     * its call id: the first of a batch's calls with one id wins), one for their events.
     */
    const unrequestedDecisions: Batcher.Group<
      { readonly row: Statements.DecisionRow; readonly events: ReadonlyArray<EventEncoded> },
      DecisionInsert,
      Failure
    > = {
      write: true,
      run: (inputs) =>
        Effect.gen(function*() {
          if (inputs.length === 1) {
            const { events, row } = inputs[0]!
            return (yield* q.insertDecisionUnrequested(row)).length > 0
              ? [{ _tag: "Inserted", events: yield* appendEvents(events) }]
              : [yield* foundInstead(row.sessionKey, row.toolCallId)]
          }
          const firsts = firstsOf(inputs, (input) => input.row.sessionKey, (input) => input.row.toolCallId)
          const inserted = new Map<string, Set<unknown>>()
          for (const row of yield* q.insertDecisionsUnrequested(Array.from(firsts, (input) => input.row))) {
            const key = String(row.session_key)
            inserted.set(key, (inserted.get(key) ?? new Set()).add(row.tool_call_id))
          }
          const isInserted = (input: typeof inputs[number]) =>
            firsts.has(input) && inserted.get(input.row.sessionKey)?.has(input.row.toolCallId) === true
          const rows = yield* appendEvents(inputs.flatMap((input) => isInserted(input) ? input.events : []))
          let at = 0
          return yield* Effect.forEach(inputs, (input) => {
            if (!isInserted(input)) return foundInstead(input.row.sessionKey, input.row.toolCallId)
            at += input.events.length
            return Effect.succeed<DecisionInsert>({
              _tag: "Inserted",
              events: rows.slice(at - input.events.length, at)
            })
          })
        })
    }

    /**
     * Spending approved requests, merged across a batch: one update for all (the first spend of a
     * request in the batch wins), one insert for their events.
     */
    const spends: Batcher.Group<
      { readonly requestId: string; readonly at: number; readonly events: ReadonlyArray<EventEncoded> },
      ReadonlyArray<EventRow> | undefined,
      Failure
    > = {
      write: true,
      run: (inputs) =>
        Effect.gen(function*() {
          if (inputs.length === 1) {
            const { at, events, requestId } = inputs[0]!
            return (yield* q.consume({ requestId, at })).length === 0 ? [undefined] : [yield* appendEvents(events)]
          }
          const firsts = firstsOf(inputs, () => "", (input) => input.requestId)
          const spent = new Set(
            (yield* q.consumeMany(Array.from(firsts))).map((row) => row.request_id)
          )
          const isSpent = (input: typeof inputs[number]) => firsts.has(input) && spent.has(input.requestId)
          const rows = yield* appendEvents(inputs.flatMap((input) => isSpent(input) ? input.events : []))
          let at = 0
          return inputs.map((input) => {
            if (!isSpent(input)) return undefined
            at += input.events.length
            return rows.slice(at - input.events.length, at)
          })
        })
    }

    type RequestInsert = Effect.Effect.Success<ReturnType<Encoded["insertRequest"]>>
    interface NewRequest {
      readonly request: RequestEncoded
      readonly events: ReadonlyArray<EventEncoded>
      readonly covering: Parameters<Encoded["insertRequest"]>[2]
    }
    const reuseOf = (requestId: string) =>
      Effect.dieMessage(`request id ${requestId} is already used by another tool call`)
    /** What stands in a request's way: the record its call id has, or a session approval that covers it. */
    const foundFor = (
      recorded: CallRecord,
      active: ReadonlyArray<ApprovalEncoded>,
      covering: NewRequest["covering"]
    ): Effect.Effect<RequestInsert | undefined, Failure> => {
      if (Option.isSome(recorded)) {
        return Effect.succeed(
          recorded.value._tag === "Request"
            ? { _tag: "Existing", request: recorded.value.request }
            : { _tag: "Decided", decision: recorded.value.decision }
        )
      }
      return Effect.map(
        fromEither(covering(active)),
        (covered) => covered >= 0 ? { _tag: "Covered", grant: active[covered]! } : undefined
      )
    }

    /**
     * New requests, merged across a batch: one read of their call ids' records, one of the session
     * approvals that may cover them, one insert for the events of those still to be made, one for
     * the requests (the first of a batch's calls with one id wins; the others meet its request).
     */
    const newRequests: Batcher.Group<NewRequest, RequestInsert, Failure> = {
      write: true,
      run: (inputs) =>
        Effect.gen(function*() {
          if (inputs.length === 1) {
            const { covering, events, request } = inputs[0]!
            const call = request.toolCall
            const recorded = yield* recordedByCall(call.sessionKey, call.id)
            const active = Option.isSome(recorded) ? [] : yield* Effect.flatMap(
              q.activeGrants({ sessionKey: call.sessionKey, toolName: call.name.toLowerCase(), at: request.createdAt }),
              approvalsOf
            )
            const found = yield* foundFor(recorded, active, covering)
            if (found !== undefined) return [found]
            if ((yield* q.insertRequest(requestRow(request))).length === 0) return yield* reuseOf(request.requestId)
            return [{ _tag: "Inserted", events: yield* appendEvents(events) }]
          }
          const callOf = (input: NewRequest) => input.request.toolCall
          const firsts = firstsOf(inputs, (input) => callOf(input).sessionKey, (input) => callOf(input).id)
          const recorded = yield* recordedCalls.run(
            inputs.map((input) => ({ sessionKey: callOf(input).sessionKey, toolCallId: callOf(input).id }))
          )
          const earliest = Math.min(...inputs.map((input) => input.request.createdAt))
          const grantRows = yield* q.activeGrantsOf(inputs.map((input) => ({
            sessionKey: callOf(input).sessionKey,
            toolName: callOf(input).name.toLowerCase(),
            at: earliest
          })))
          const results: Array<RequestInsert | undefined> = new Array(inputs.length)
          const toMake: Array<number> = []
          for (let i = 0; i < inputs.length; i++) {
            const input = inputs[i]!
            if (!firsts.has(input)) continue
            const call = callOf(input)
            // active at the request's own time (one read served the batch from its earliest)
            const rows = grantRows.filter((row) =>
              row.session_key === call.sessionKey && row.tool_name === call.name.toLowerCase() &&
              (options.clock === "database" || row.expires_at === null ||
                Number(row.expires_at) > input.request.createdAt)
            )
            results[i] = yield* foundFor(recorded[i]!, yield* approvalsOf(rows), input.covering)
            if (results[i] === undefined) toMake.push(i)
          }
          const eventRows = yield* appendEvents(toMake.flatMap((i) => inputs[i]!.events))
          let at = 0
          const made = toMake.map((i) => {
            const count = inputs[i]!.events.length
            at += count
            return { i, events: eventRows.slice(at - count, at) }
          })
          const inserted = yield* q.insertRequests(
            made.map(({ events, i }) => ({ ...requestRow(inputs[i]!.request), requestedSeq: events[0]!.seq }))
          )
          // writers are serialized and the batch's call ids were read above: only a request id
          // already taken is left (the batch then runs call by call, and that call alone dies)
          if (inserted.length !== made.length) return yield* reuseOf("of this batch")
          for (const { events, i } of made) results[i] = { _tag: "Inserted", events }
          return yield* Effect.forEach(inputs, (input, i) =>
            results[i] !== undefined
              ? Effect.succeed(results[i]!)
              : Effect.flatMap(
                recordedByCall(callOf(input).sessionKey, callOf(input).id),
                (found) => Effect.map(foundFor(found, [], () => Either.right(-1)), (result) => result!)
              ))
        })
    }

    type ClaimResult = Effect.Effect.Success<ReturnType<Encoded["claimRequest"]>>
    interface ClaimInput {
      readonly requestId: string
      readonly claim: Claim
      readonly events: ReadonlyArray<EventEncoded>
      readonly rewrite: Parameters<Encoded["claimRequest"]>[4]
    }
    const refused = (requestId: string) =>
      Effect.map(
        Effect.flatMap(q.requestById({ requestId }), requestsOf),
        (rows): ClaimResult => ({ _tag: "Refused", current: first(rows) })
      )

    /**
     * Transitions of pending requests under one kind of claim, merged across a batch: one update
     * claims them all (each at its own time; the first claim of a request in the batch goes first,
     * the others then find it as that one left it), one insert for their events, one update for the
     * rewritten rows, one insert for the session approvals they grant.
     */
    const claimsOf = (kind: Claim["_tag"]): Batcher.Group<ClaimInput, ClaimResult, Failure> => ({
      write: true,
      run: (inputs) =>
        Effect.gen(function*() {
          if (inputs.length === 1) {
            const { claim, events, requestId, rewrite } = inputs[0]!
            const [before] = yield* Effect.flatMap(claimOf(requestId, claim), requestsOf)
            if (before === undefined) return [yield* refused(requestId)]
            const rows = yield* appendEvents(events)
            const after = yield* fromEither(rewrite(before, numbersOf(rows)))
            yield* q.rewriteRequest(requestRow(after.request))
            if (after.grant !== undefined) yield* q.insertApproval(approvalRow(after.grant))
            return [{ _tag: "Claimed", request: after.request, events: rows }]
          }
          const firsts = firstsOf(inputs, () => "", (input) => input.requestId)
          const claimedRows = yield* q.claimMany[kind](
            Array.from(
              firsts,
              (input) => ({ requestId: input.requestId, at: "at" in input.claim ? input.claim.at : 0 })
            )
          )
          const befores = yield* requestsOf(claimedRows)
          const beforeOf = new Map(claimedRows.map((row, i) => [row.request_id, befores[i]!]))
          const claimed = inputs.filter((input) => firsts.has(input) && beforeOf.has(input.requestId))
          const eventRows = yield* appendEvents(claimed.flatMap((input) => input.events))
          let at = 0
          const afters = new Map<ClaimInput, { readonly request: RequestEncoded; readonly events: Array<EventRow> }>()
          const grants: Array<ApprovalEncoded> = []
          for (const input of claimed) {
            at += input.events.length
            const events = eventRows.slice(at - input.events.length, at)
            const after = yield* fromEither(input.rewrite(beforeOf.get(input.requestId)!, numbersOf(events)))
            afters.set(input, { request: after.request, events })
            if (after.grant !== undefined) grants.push(after.grant)
          }
          if (afters.size > 0) {
            yield* q.rewriteRequests(Array.from(afters.values(), (after) => requestRow(after.request)))
          }
          if (grants.length > 0) yield* q.insertApprovals(grants.map(approvalRow))
          return yield* Effect.forEach(inputs, (input) => {
            const after = afters.get(input)
            return after === undefined
              ? refused(input.requestId)
              : Effect.succeed<ClaimResult>({ _tag: "Claimed", request: after.request, events: after.events })
          })
        })
    })
    const claims = {
      Unwarned: claimsOf("Unwarned"),
      BeforeDeadline: claimsOf("BeforeDeadline"),
      PastDeadline: claimsOf("PastDeadline")
    }

    const claimOf = (requestId: string, claim: Claim) => {
      switch (claim._tag) {
        case "Unwarned":
          return q.claimUnwarned({ requestId })
        case "BeforeDeadline":
          return q.claimBeforeDeadline({ requestId, at: claim.at })
        case "PastDeadline":
          return q.claimPastDeadline({ requestId, at: claim.at })
      }
    }

    const selectRequests = (operation: string, where: Statement.Fragment, order: Statement.Fragment) =>
      read(
        operation,
        Effect.flatMap(run(sql`SELECT request FROM ${sql(t.requests)} WHERE ${where} ${order}`), requestsOf)
      )

    // --- the driver -------------------------------------------------------------------------------

    const driver: Encoded = {
      append: (events, then) => Effect.map(write("append", appendEvents(events)), then),

      insertRequest: (request, events, covering) =>
        writeJoined("createRequest", newRequests, { request, events, covering }),

      claimRequest: (operation, requestId, claim, events, rewrite) =>
        writeJoined(operation, claims[claim._tag], { requestId, claim, events, rewrite }),

      // with no events, a spend alone is one statement
      consume: (requestId, at, events) =>
        writeJoined("consume", spends, { requestId, at, events }, events.length === 0),

      insertDecision: (decision, events, reliedOn) => {
        const row = {
          sessionKey: decision.sessionKey,
          toolCallId: decision.toolCallId,
          decision: decisionText(decision)
        }
        // the common case, a call the policy allows: the checks folded into the insert
        if (reliedOn === undefined) return writeJoined("recordDecision", unrequestedDecisions, { row, events })
        return write(
          "recordDecision",
          Effect.gen(function*() {
            const requested = yield* requestByCall(decision.sessionKey, decision.toolCallId)
            if (Option.isSome(requested)) return { _tag: "Requested", request: requested.value } as const
            if ((yield* q.grantActive({ id: reliedOn, at: decision.at })).length === 0) {
              return { _tag: "GrantInactive" } as const
            }
            const inserted = yield* q.insertDecision(row)
            if (inserted.length === 0) {
              const existing = yield* decisionByCall(decision.sessionKey, decision.toolCallId)
              return { _tag: "Existing", decision: Option.getOrThrow(existing) } as const
            }
            return { _tag: "Inserted", events: yield* appendEvents(events) } as const
          })
        )
      },

      insertApproval: (events, approval) =>
        write(
          "grant",
          Effect.gen(function*() {
            const rows = yield* appendEvents(events)
            const row = yield* fromEither(approval(numbersOf(rows)))
            yield* q.insertApproval(approvalRow(row))
            return { approval: row, events: rows }
          })
        ),

      revoke: (which, at, events, rewrite) =>
        write(
          "id" in which ? "revoke" : "revokeWhere",
          Effect.gen(function*() {
            let before: ReadonlyArray<ApprovalEncoded>
            let rows: ReadonlyArray<EventRow>
            if ("id" in which) {
              before = yield* Effect.flatMap(q.revokeOne({ id: which.id, at }), approvalsOf)
              if (before.length === 0) return { revoked: [], events: [] }
              rows = yield* appendEvents(events)
            } else {
              rows = yield* appendEvents(events)
              before = yield* Effect.flatMap(
                run(sql`UPDATE ${sql(t.sessionApprovals)} SET revoked_at = ${at}, seq = ${rows[0]!.seq}
                  WHERE ${
                  sql.and([
                    sql`revoked_at IS NULL`,
                    ...(which.sessionKey !== undefined ? [sql`session_key = ${which.sessionKey}`] : []),
                    ...(which.toolName !== undefined ? [sql`tool_name = ${which.toolName}`] : [])
                  ])
                } RETURNING approval`),
                approvalsOf
              )
            }
            const revoked = yield* fromEither(rewrite(before, numbersOf(rows)))
            for (const row of revoked) yield* q.rewriteApproval(approvalRow(row))
            return { revoked, events: rows }
          })
        ),

      getRequest: (requestId) =>
        read("getRequest", Effect.map(Effect.flatMap(q.requestById({ requestId }), requestsOf), first)),

      findByToolCall: (sessionKey, toolCallId) => read("findByToolCall", requestByCall(sessionKey, toolCallId)),

      findRecorded: (sessionKey, toolCallId) => readJoined("findRecorded", recordedCalls, { sessionKey, toolCallId }),

      listPending: (query) =>
        selectRequests(
          "listPending",
          sql.and([
            sql`status = 'pending'`,
            ...(query?.sessionKey !== undefined ? [sql`session_key = ${query.sessionKey}`] : [])
          ]),
          sql`ORDER BY created_at, requested_seq ${query?.limit !== undefined ? sql`LIMIT ${query.limit}` : sql``}`
        ),

      listDue: (at) =>
        selectRequests(
          "listDue",
          sql`status = 'pending' AND expires_at <= ${at}`,
          sql`ORDER BY expires_at, requested_seq`
        ),

      // expiresAt - min(warnBeforeMs, (expiresAt - createdAt) / 2) <= at, in integers and
      // bounded by expires_at so the pending-by-expiry index serves it
      listToWarn: (at, warnBeforeMs) =>
        selectRequests(
          "listToWarn",
          sql`status = 'pending' AND warned_at IS NULL AND expires_at <= ${at + warnBeforeMs}
            AND expires_at + created_at <= ${2 * at}`,
          sql`ORDER BY expires_at, requested_seq`
        ),

      sessionApprovals: (query) =>
        read(
          "sessionApprovals",
          Effect.flatMap(
            run(sql`SELECT approval FROM ${sql(t.sessionApprovals)} WHERE ${
              sql.and([
                ...(query?.id !== undefined ? [sql`id = ${query.id}`] : []),
                ...(query?.sessionKey !== undefined ? [sql`session_key = ${query.sessionKey}`] : []),
                ...(query?.afterSeq !== undefined ? [sql`seq > ${query.afterSeq}`] : []),
                ...(query?.activeAt !== undefined
                  ? [sql`revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${query.activeAt})`]
                  : [])
              ])
            } ORDER BY seq, granted_seq`),
            approvalsOf
          )
        ),

      events: (query) =>
        read(
          "events",
          Effect.flatMap(
            run(sql`SELECT seq, event FROM ${sql(t.events)} WHERE ${
              sql.and([
                sql`seq > ${query.afterSeq ?? 0}`,
                ...(query.sessionKey !== undefined
                  ? [sql`(session_key = ${query.sessionKey} OR session_key IS NULL)`]
                  : []),
                ...(query.toolName !== undefined ? [sql`tool_name = ${query.toolName}`] : []),
                ...(query.outcome !== undefined ? [sql`outcome = ${query.outcome}`] : []),
                ...(query.since !== undefined ? [sql`at >= ${query.since}`] : []),
                ...(query.until !== undefined ? [sql`at <= ${query.until}`] : [])
              ])
            } ORDER BY seq ${query.limit !== undefined ? sql`LIMIT ${query.limit}` : sql``}`),
            eventsOf
          )
        ),

      lastSeq: read("lastSeq", Effect.map(Effect.flatMap(q.lastSeq({}), seqsOf), (seqs) => seqs[0] ?? 0)),

      changes: feed.changes,
      returnsWhatItWasGiven: false
    }
    return driver
  })
