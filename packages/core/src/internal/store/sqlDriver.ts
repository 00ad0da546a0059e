import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Context, Deferred, Effect, Either, Exit, type Fiber, Option, type ParseResult, Stream } from "effect"
import type * as Scope from "effect/Scope"
import type {
  ApprovalEncoded,
  Claim,
  Encoded,
  EventEncoded,
  EventRow,
  RequestEncoded,
  Transition
} from "../../ApprovalStore.js"
import type { AuditQuery } from "../../AuditEvent.js"
import type { ChangeFeed } from "../../SqlChangeFeed.js"
import { PersistenceError } from "../../ToolGateError.js"
import * as KeptConnection from "../keptConnection.js"
import * as LostConnection from "../lostConnection.js"
import * as Newest from "../newest.js"
import * as Batcher from "../sqlBatcher.js"
import { lockKey, type Tables } from "../sqlSchema.js"
import { meets } from "./claims.js"
import { first, fromEither, pendingCountOf, seqsOf, textOrNot } from "./sqlEntityRows.js"
import * as EntityRows from "./sqlEntityRows.js"
import * as Merged from "./sqlMergedWrites.js"
import * as Statements from "./sqlStatements.js"

/**
 * The approval store's SQL driver: each method one transaction (or one statement), on SQLite or
 * PostgreSQL. Writers are serialized (SQLite by its write lock, PostgreSQL by an advisory lock), so
 * sequence numbers commit in order and a reader tailing `seq > last` never skips a row. Calls made
 * while another runs are committed together (group commit, `sqlBatcher.ts`), each still
 * all-or-nothing; the decisions of calls judged without a session approval (the allow hot path)
 * are written in one statement per batch, their events in another. Rows hold their entity as JSON text, read through a cache (`sqlRows.ts`).
 * Each event is hashed onto the one before it in the log (`chain.ts`), in commit order, under the
 * writers' lock: the log's last hash is read once per writing transaction, whichever process wrote it.
 * A lone new request, and a lone claim of a request this process wrote, fold their read into their
 * write, guarded so that it writes nothing when the guard fails, and the step then runs as before
 * (PostgreSQL: one statement with the event's; SQLite: the event's insert, or the row's rewrite,
 * carries the guard). On PostgreSQL, when this process knows the log's head from its last commit
 * and has no other write in flight, that statement is first tried as its own transaction
 * (`atOnce`), with no writers' lock held across round trips: it takes a number only while the
 * log's last number is the one it knows and no transaction holds the lock. The claims of a batch
 * (answers, in flight together) go the same way before its transaction (`claimsAhead`): their
 * requests read, and their transitions written together in one such statement, each guarded by
 * the text it was read with; what that cannot write runs in the transaction.
 */

type Failure = SqlError | ParseResult.ParseError

// The pending requests' texts a driver keeps (see `pendingTexts`): the newest 2,048,
// each at most 16 K characters (a model chooses the arguments a text holds), so at most 32 M.
const knownPending = 2_048
const knownTextLength = 16_384

export interface Options {
  readonly tables: Tables
  readonly feed: ChangeFeed
  /** judge deadlines on the database's clock (`database`) or at the time the caller passes */
  readonly clock: "database" | "caller"
  /** PostgreSQL: keep a connection for writes and one for reads (`SqlApprovalStore.Options`) */
  readonly keepConnections: boolean
}

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

    // PostgreSQL with `keepConnections`: statements outside a transaction (reads) run on a
    // connection kept for them while it is free (see keptConnection.ts)
    const keep = !isSqlite && options.keepConnections
    const onKept = keep ? yield* KeptConnection.makeShared(sql.reserve) : undefined
    /** The connection of the transaction the fiber runs in (a batch's or the caller's), if any. */
    const transactionOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Connection | undefined => {
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      return transaction._tag === "Some" ? transaction.value[0] : undefined
    }
    const onConnection = (text: string, params: ReadonlyArray<unknown>) => (conn: Connection) =>
      conn.execute(text, params as ReadonlyArray<any>, undefined)
    /**
     * Runs text outside a transaction: on SQLite's one connection, else the pool (or the kept one),
     * again on another connection while it loses the one it ran on (reads and statements that
     * change nothing the second time run here).
     */
    const outside: Statements.Exec = isSqlite
      ? (text, params) => Effect.scoped(Effect.flatMap(sql.reserve, onConnection(text, params)))
      : onKept === undefined
      ? (text, params) => LostConnection.retryWhileLost(sql.unsafe<any>(text, params as ReadonlyArray<any>))
      : (text, params) => onKept(onConnection(text, params), sql.unsafe<any>(text, params as ReadonlyArray<any>))
    /** Runs text on the transaction's (or the batch's) connection when there is one, else outside. */
    const exec: Statements.Exec = (text, params) =>
      Effect.withFiberRuntime((fiber) => {
        const conn = transactionOf(fiber)
        return conn !== undefined ? conn.execute(text, params as ReadonlyArray<any>, undefined) : outside(text, params)
      })
    // PostgreSQL NOTIFY folded into the event insert (the feed's `onCommit` otherwise)
    const notifyChannel = isSqlite ? undefined : feed.channel
    const q = Statements.make(sql, t, exec, clockAt, notifyChannel)
    const entityRows = EntityRows.make()
    const { approvalRow, approvalsOf, decisionsOf, decisionText, eventRow, eventsOf, linksOf, requestsOf } = entityRows
    /** Compiles a statement built per call (its shape depends on the query) and runs it. */
    const run = (statement: Statement.Statement<unknown>) => {
      const [text, params] = statement.compile()
      return exec(text, params)
    }

    // --- the hash chain ----------------------------------------------------------------------------

    /** The log's last event as the writing transaction on `conn` sees it: its seq (0: none yet) and hash. */
    interface Head {
      readonly conn: Connection | undefined
      seq: number
      hash: string | undefined
    }
    // The head of the running transaction, known since its BEGIN or its last append. The batcher's
    // transactions run on connections wrapped by `tracked`, whose BEGIN forgets it (on PostgreSQL,
    // reads it, in the same round trip as the lock): a batch run again call by call after a
    // rollback begins each call anew. A write inside a caller's own transaction forgets it first
    // (`serialize`). Then the next append reads it.
    let head: Head | undefined
    const headOf = (conn: Connection | undefined, rows: ReadonlyArray<Record<string, unknown>> | undefined): Head => ({
      conn,
      seq: Number(rows?.[0]?.seq ?? 0),
      hash: textOrNot(rows?.[0]?.hash)
    })
    const forgetHead = Effect.sync(() => {
      head = undefined
    })
    // PostgreSQL: the log's head as of this process's last commit through the batcher (or a step
    // written at once), which a lone step may chain onto without a transaction (`atOnce`)
    let committed: { readonly seq: number; readonly hash: string | undefined } | undefined
    // PostgreSQL: one round trip (a simple query of three statements, whose results come back as a list)
    const begin = isSqlite
      ? "BEGIN IMMEDIATE"
      : `BEGIN; SELECT pg_advisory_xact_lock(${lockKey(t.prefix)}); ${Statements.chainHeadOf(sql, t).compile()[0]}`
    // SQLite: the batcher's connection between its `BEGIN IMMEDIATE` and the transaction's end,
    // when it holds the one write lock
    let locked: Connection | undefined
    const ended = Effect.sync(() => {
      head = undefined
      locked = undefined
    })
    const tracked = (conn: Connection): Connection => {
      // a kept connection (PostgreSQL) runs many transactions: the head is known only inside one
      const watch = <A>(text: string, statement: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> =>
        text === begin
          ? Effect.tap(statement, (results) => {
            head = isSqlite ? undefined : headOf(wrapped, (results as Array<Array<any>>)[2])
            if (isSqlite) locked = wrapped
          })
          : text === "COMMIT"
          ? Effect.ensuring(
            Effect.tap(statement, () => {
              if (!isSqlite && head !== undefined && head.conn === wrapped) {
                committed = { seq: head.seq, hash: head.hash }
              }
            }),
            ended
          )
          : text === "ROLLBACK"
          ? Effect.ensuring(statement, ended)
          : statement
      const wrapped: Connection = {
        execute: (text, params, transform) => watch(text, conn.execute(text, params, transform)),
        executeUnprepared: (text, params, transform) => watch(text, conn.executeUnprepared(text, params, transform)),
        executeRaw: (text, params) => conn.executeRaw(text, params),
        executeStream: (text, params, transform) => conn.executeStream(text, params, transform),
        executeValues: (text, params) => conn.executeValues(text, params)
      }
      return wrapped
    }
    const holdsWriteLock = Effect.withFiberRuntime<boolean>((fiber) => {
      const conn = transactionOf(fiber)
      return Effect.succeed(conn !== undefined && conn === locked)
    })
    /** The head for the next append of the running transaction: known, or read (after the lock). */
    const headNow: Effect.Effect<Head, SqlError> = Effect.withFiberRuntime((fiber) => {
      const conn = transactionOf(fiber)
      if (head !== undefined && conn !== undefined && head.conn === conn) return Effect.succeed(head)
      return Effect.map(q.chainHead({}), (rows) => {
        const read = headOf(conn, rows)
        if (conn !== undefined) head = read
        return read
      })
    })
    /** Rows of `events` hashed one after another onto `after`, which then holds the last one's hash. */
    const chainedRows = (events: ReadonlyArray<EventEncoded>, after: Head) => {
      const rows: Array<Statements.EventRow> = new Array(events.length)
      let prevHash = after.hash
      for (let i = 0; i < events.length; i++) {
        const row = eventRow(events[i]!, prevHash)
        rows[i] = row
        prevHash = row.hash
      }
      return rows
    }
    /** An event as written: numbered, with its links in the chain. */
    const writtenRow = (seq: number, event: EventEncoded, row: Statements.EventRow) =>
      (row.prevHash === undefined
        ? { seq, ...event, hash: row.hash }
        : { seq, ...event, prevHash: row.prevHash, hash: row.hash }) as EventRow

    // PostgreSQL sequence values may commit out of order; one lock per table set keeps them in order.
    // The chain's head is read again after it.
    const serialize = isSqlite
      ? forgetHead
      : Effect.zipRight(run(sql`SELECT pg_advisory_xact_lock(${sql.literal(String(lockKey(t.prefix)))})`), forgetHead)

    // Group commit; on SQLite reads queue too, since the one connection serves them. Inside a
    // caller's own transaction, a write is a savepoint of it, and a read runs there.
    const batcher = yield* Batcher.make({
      reserve: Effect.map(sql.reserve, tracked),
      begin: [begin],
      prepared: isSqlite,
      synchronous: isSqlite,
      keep,
      inTransaction: (body) => sql.withTransaction(Effect.zipRight(serialize, body))
    })

    // PostgreSQL: this process's writes in flight that may append to the log (and so take the
    // writers' lock and move its head); a lone step goes at once only when there is none. A lone
    // `single` write (a spend that appends nothing) is not one: alone, it takes neither.
    let writing = 0
    const counted = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      isSqlite ? effect : Effect.suspend(() => {
        writing++
        return Effect.ensuring(
          effect,
          Effect.sync(() => {
            writing--
          })
        )
      })

    /** A read: on SQLite through the batcher. */
    const read = <A>(operation: string, body: Effect.Effect<A, Failure>): Effect.Effect<A, PersistenceError> =>
      PersistenceError.refail(operation)(isSqlite ? batcher.read(body) : body)

    /**
     * One transaction per call, as callers see it (the batcher may commit several calls' bodies
     * together). `single`: one statement.
     */
    const write = <A>(operation: string, body: Effect.Effect<A, Failure>, single = false) =>
      PersistenceError.refail(operation)(counted(batcher.write(body, single)))

    /** A write joining `group` (on SQLite or PostgreSQL). */
    const writeJoined = <I, A>(operation: string, group: Batcher.Group<I, A, Failure>, input: I, single = false) =>
      PersistenceError.refail(operation)(
        single ? batcher.join(group, input, single) : counted(batcher.join(group, input, single))
      )

    const numbersOf = (rows: ReadonlyArray<EventRow>) => rows.map((row) => row.seq)
    /** `then()` once the feed knows of this process's commit through `seq` (a NOTIFY in it tells the others). */
    const afterCommit = <A>(seq: number, then: () => A): Effect.Effect<A, SqlError> =>
      notifyChannel === undefined ? Effect.map(feed.onCommit(seq), then) : Effect.sync(then)
    /** Appends events: numbered consecutively and chained (writers are serialized), as rows. */
    const appendEvents = (events: ReadonlyArray<EventEncoded>): Effect.Effect<ReadonlyArray<EventRow>, Failure> =>
      events.length === 0 ? Effect.succeed([]) : Effect.flatMap(headNow, (after) => {
        const rows = chainedRows(events, after)
        // numbered in insertion order (RETURNING's row order is not promised)
        const inserted = rows.length === 1 ? q.insertEvent(rows[0]!) : q.insertEvents(rows)
        return Effect.flatMap(Effect.flatMap(inserted, seqsOf), (seqs) => {
          after.hash = rows[rows.length - 1]!.hash
          after.seq = seqs[seqs.length - 1]!
          return afterCommit(after.seq, () => events.map((event, i) => writtenRow(seqs[i]!, event, rows[i]!)))
        })
      })

    /** The events of several writes in one insert; each write's own rows back, in order. */
    const appendEach = <W extends { readonly events: ReadonlyArray<EventEncoded> }>(writes: ReadonlyArray<W>) =>
      Effect.map(appendEvents(writes.flatMap((write) => write.events)), (rows) => {
        const rowsOf = new Map<W, ReadonlyArray<EventRow>>()
        let at = 0
        for (const write of writes) rowsOf.set(write, rows.slice(at, at += write.events.length))
        return rowsOf
      })

    // The text of each pending request as this process last wrote it, so that a claim
    // of one it wrote can be folded into the claim's write (`claimKnown`). Only a hint: the folded
    // write applies only while the row holds that very text (a write rolled back, or one made
    // elsewhere since, leaves the claim to its own statement).
    const pendingTexts = new Map<string, string>()
    const keepPendingTexts = Newest.keeper(pendingTexts, knownPending)
    /** A request row about to be written, noted in `pendingTexts`. */
    const noted = (row: Statements.RequestRow): Statements.RequestRow => {
      pendingTexts.delete(row.requestId)
      if (row.status === "pending" && row.request.length <= knownTextLength) {
        pendingTexts.set(row.requestId, row.request)
        keepPendingTexts()
      }
      return row
    }
    const requestRowOf = (request: RequestEncoded) => noted(entityRows.requestRow(request))

    /** PostgreSQL with one event per request: the statements that write both in one round trip apply. */
    const foldsWithRequests = (writes: ReadonlyArray<Merged.RequestWrite>) =>
      !isSqlite && writes.every((write) => write.events.length === 1)

    /**
     * PostgreSQL: each write's one event numbered and written by `statement` beside its request's
     * columns; the statement's rows and each write's own event rows.
     */
    const numberedWithRequests = <W extends Merged.RequestWrite>(
      statement: (
        rows: ReadonlyArray<Statements.EventRow & Statements.RequestColumns>
      ) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, SqlError>,
      writes: ReadonlyArray<W>
    ) =>
      Effect.flatMap(headNow, (after) => {
        const events = chainedRows(writes.map((write) => write.events[0]!), after)
        const written = statement(writes.map((write, i) => ({
          ...events[i]!,
          ...Statements.requestColumns(requestRowOf(write.request))
        })))
        return Effect.flatMap(written, (rows) => {
          after.hash = events[events.length - 1]!.hash
          return Effect.flatMap(seqsOf(rows), (seqs) => {
            after.seq = seqs[seqs.length - 1]!
            return afterCommit(after.seq, () => ({
              rows,
              rowsOf: new Map<W, ReadonlyArray<EventRow>>(
                writes.map((write, i) => [write, [writtenRow(seqs[i]!, write.events[0]!, events[i]!)]])
              )
            }))
          })
        })
      })

    /**
     * Appends the events of claimed requests and rewrites those requests; each write's own event
     * rows back. On PostgreSQL, when each claim has one event, in one statement (one round trip).
     */
    const appendRewriting = <W extends Merged.RequestWrite>(
      writes: ReadonlyArray<W>
    ): Effect.Effect<Map<W, ReadonlyArray<EventRow>>, Failure> =>
      writes.length === 0
        ? Effect.succeed(new Map())
        : foldsWithRequests(writes)
        ? Effect.map(numberedWithRequests(q.insertEventsRewriting, writes), ({ rowsOf }) => rowsOf)
        : Effect.tap(
          appendEach(writes),
          () => q.rewriteRequests(writes.map((write) => requestRowOf(write.request)))
        )

    /**
     * Inserts new requests with their events, each request's `requested_seq` the seq of its first
     * event; each write's own event rows back, or `None` when a request id was taken (nothing of
     * it may commit). On PostgreSQL, when each request has one event, in one statement.
     */
    const insertRequests = <W extends Merged.RequestWrite>(
      writes: ReadonlyArray<W>
    ): Effect.Effect<Option.Option<Map<W, ReadonlyArray<EventRow>>>, Failure> =>
      writes.length === 0
        ? Effect.succeed(Option.some(new Map()))
        : foldsWithRequests(writes)
        ? Effect.map(
          numberedWithRequests(q.insertRequestsNumbered, writes),
          ({ rows, rowsOf }) => Number(rows[0]?.also_rows) === writes.length ? Option.some(rowsOf) : Option.none()
        )
        : Effect.flatMap(appendEach(writes), (rowsOf) =>
          Effect.map(
            q.insertRequests(writes.map((write) => ({
              ...requestRowOf(write.request),
              requestedSeq: rowsOf.get(write)![0]!.seq
            }))),
            (inserted) => inserted.length === writes.length ? Option.some(rowsOf) : Option.none()
          ))

    /**
     * PostgreSQL: a statement writing one event (numbered and chained) beside a request's row when
     * its guard holds: the rows it returned and the event as written, or `None` when it wrote nothing
     * (the chain's head is then as it was).
     */
    const writeOneIf = <P extends Record<string, unknown>>(
      statement: (
        params: Statements.EventRow & Statements.RequestColumns & P
      ) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, SqlError>,
      event: EventEncoded,
      request: RequestEncoded,
      params: P
    ) =>
      Effect.flatMap(headNow, (after) => {
        const row = chainedRows([event], after)[0]!
        const requestRow = entityRows.requestRow(request)
        const written = statement({ ...row, ...Statements.requestColumns(requestRow), ...params })
        return Effect.flatMap(written, (rows) => {
          if (rows.length === 0) return Effect.succeedNone
          after.hash = row.hash
          return Effect.flatMap(seqsOf(rows), ([seq]) => {
            after.seq = seq!
            return afterCommit(seq!, () => {
              noted(requestRow)
              return Option.some({
                rows,
                events: [writtenRow(seq!, event, row)] as ReadonlyArray<EventRow>,
                requestRow
              })
            })
          })
        })
      })

    /**
     * SQLite: a new request's one event inserted when nothing stands in its way (as
     * `insertRequestIfFree`), then its request under the event's seq.
     */
    const insertEventIfFree = (write: Merged.NewRequest, guard: { grantToolName: string; argsDigest: string }) =>
      Effect.flatMap(writeOneIf(q.insertEventIfFree, write.events[0]!, write.request, guard), (written) =>
        Option.isNone(written) ? Effect.succeedNone : Effect.map(
          q.insertRequests([{ ...written.value.requestRow, requestedSeq: written.value.events[0]!.seq }]),
          (inserted) =>
            Option.some(inserted.length === 1 ? Option.some(written.value.events) : Option.none())
        ))

    /**
     * A new request with its one event written only when its call id has no record and no active
     * approval of its session may cover it (of its tool, and of the whole tool or of the call's
     * arguments): on PostgreSQL in one statement, on SQLite in two. `None`: nothing was written (the
     * read decides); `Some(None)`: its request id was taken.
     */
    const insertRequestIfFree = (
      write: Merged.NewRequest
    ): Effect.Effect<Option.Option<Option.Option<ReadonlyArray<EventRow>>>, Failure> => {
      if (write.events.length !== 1) {
        return Effect.succeedNone
      }
      const guard = { grantToolName: write.request.toolCall.name.toLowerCase(), argsDigest: write.argsDigest }
      return isSqlite ? insertEventIfFree(write, guard) : Effect.map(
        writeOneIf(q.insertRequestIfFree, write.events[0]!, write.request, guard),
        Option.map(({ events, rows }) =>
          Number(rows[0]?.also_rows) === 1 ? Option.some(events) : Option.none()
        )
      )
    }

    /**
     * The transition of a claim made from the pending text this process last wrote of
     * its request, and the statement's parameters (that text, the claim's time), when the text
     * meets the claim and the transition appends one event; `None` otherwise (the claim is then
     * left to its own statement).
     */
    const knownTransition = (input: Merged.ClaimInput) =>
      Effect.suspend(() => {
        const before = pendingTexts.get(input.requestId)
        if (before === undefined) return Effect.succeedNone
        return Effect.map(entityRows.requestsOf([{ request: before }]), ([encoded]) => {
          if (!meets(input.claim, encoded!)) return Option.none()
          const claimed = input.transition(encoded!)
          return Either.isRight(claimed) && claimed.right.events.length === 1
            ? Option.some({
              claimed: claimed.right,
              params: { before, claimAt: "at" in input.claim ? input.claim.at : 0 }
            })
            : Option.none()
        })
      })

    /**
     * The claim of a request whose pending text this process wrote, folded into its write
     * (`knownTransition`) while the row still holds that text and meets the claim: on PostgreSQL one
     * statement; on SQLite the row's rewrite, then its event. `None`: nothing was written (the
     * claim runs on its own).
     */
    const claimKnown = (
      input: Merged.ClaimInput
    ): Effect.Effect<
      Option.Option<{ readonly claimed: Transition; readonly events: ReadonlyArray<EventRow> }>,
      Failure
    > =>
      Effect.flatMap(knownTransition(input), (known) => {
        if (Option.isNone(known)) return Effect.succeedNone
        const { claimed, params } = known.value
        if (!isSqlite) {
          return Effect.map(
            writeOneIf(q.claimRewriting[input.claim._tag], claimed.events[0]!, claimed.request, params),
            Option.map(({ events }) => ({ claimed, events }))
          )
        }
        const requestRow = entityRows.requestRow(claimed.request)
        return Effect.flatMap(
          q.rewriteClaimed[input.claim._tag]({ ...Statements.requestColumns(requestRow), ...params }),
          (rows) =>
            rows.length === 0 ? Effect.succeedNone : Effect.map(appendEvents(claimed.events), (events) => {
              noted(requestRow)
              return Option.some({ claimed, events })
            })
        )
      })

    // The step written at once that is running, if any (one at a time: it runs only when no other
    // write of this process does). Its NOTIFY may reach the feed before its result reaches this
    // process, which would take its own commit for another's and read the log: a signal that
    // arrives meanwhile waits for it (`changes`), so the store has been told of the commit first.
    let atOnceRunning: Deferred.Deferred<void> | undefined

    // After a step that could not be written at once (most often: another process wrote since),
    // the next few go straight to a transaction, whose commit tells the head again.
    const afterMiss = 4
    let skips = 0

    /** The statement of a step written at once failed its own check (`whole`): nothing was written. */
    const isUndone = (error: Failure) =>
      error._tag === "SqlError" && (error.cause as { readonly code?: unknown } | undefined)?.code === "22012"

    /**
     * PostgreSQL: a lone step written at once (`atOnce` in `sqlStatements.ts`): one statement that is
     * its own transaction, its event chained onto the head this process committed last, when no other
     * write of this process is in flight and no caller's transaction is running. `None`: nothing was
     * written (another process wrote since, a transaction holds the writers' lock, or the step's own
     * guard failed), and the step runs as before.
     */
    const atOnce = <P extends Record<string, unknown>>(
      statement: (
        params: Statements.EventRow & Statements.RequestColumns & P & { readonly knownSeq: number }
      ) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, SqlError>,
      event: EventEncoded,
      request: RequestEncoded,
      params: P
    ): Effect.Effect<Option.Option<ReadonlyArray<EventRow>>, Failure> =>
      Effect.withFiberRuntime((fiber) => {
        const known = committed
        if (
          known === undefined || writing > 0 || transactionOf(fiber) !== undefined
        ) return Effect.succeedNone
        if (skips > 0) {
          skips--
          return Effect.succeedNone
        }
        const missed = Effect.sync(() => {
          skips = afterMiss
          return Option.none<ReadonlyArray<EventRow>>()
        })
        const row = eventRow(event, known.hash)
        const requestRow = entityRows.requestRow(request)
        const written = Effect.flatMap(
          statement({ ...row, ...Statements.requestColumns(requestRow), ...params, knownSeq: known.seq }),
          (rows) => {
            const seq = rows[0]?.seq
            if (seq === null || seq === undefined) return missed
            return Effect.flatMap(seqsOf(rows), ([taken]) => {
              committed = { seq: taken!, hash: row.hash }
              return afterCommit(taken!, () => {
                noted(requestRow)
                return Option.some([writtenRow(taken!, event, row)] as ReadonlyArray<EventRow>)
              })
            })
          }
        )
        const running = Deferred.unsafeMake<void>(fiber.id())
        atOnceRunning = running
        return counted(Effect.catchIf(written, isUndone, () => missed)).pipe(
          Effect.ensuring(Effect.sync(() => {
            atOnceRunning = undefined
            Deferred.unsafeDone(running, Effect.void)
          }))
        )
      })

    /** PostgreSQL: a new request with its one event written at once (`atOnce`), when nothing stands in its way. */
    const requestAtOnce = (write: Merged.NewRequest) =>
      write.events.length !== 1
        ? Effect.succeedNone
        : atOnce(q.insertRequestAtOnce, write.events[0]!, write.request, {
          grantToolName: write.request.toolCall.name.toLowerCase(),
          argsDigest: write.argsDigest
        })

    /**
     * PostgreSQL: `claimKnown` written at once (`atOnce`); a transition that grants a session
     * approval takes the transaction.
     */
    const claimAtOnce = (input: Merged.ClaimInput) =>
      committed === undefined || writing > 0 ?
        Effect.succeedNone :
        Effect.flatMap(knownTransition(input), (known) =>
          Option.isNone(known) || known.value.claimed.grant !== undefined ? Effect.succeedNone : Effect.map(
            atOnce(
              q.claimAtOnce[input.claim._tag],
              known.value.claimed.events[0]!,
              known.value.claimed.request,
              known.value.params
            ),
            Option.map((events) => ({ _tag: "Claimed", request: known.value.claimed.request, events }) as const)
          ))

    type ClaimResult = Effect.Effect.Success<ReturnType<Encoded["claimRequest"]>>

    /**
     * PostgreSQL: the claims of a batch (of one kind) settled before its transaction, when this
     * process knows the log's head from its last commit: the requests read (but those whose text it
     * wrote), the ones no longer pending, or gone, refused as read; the transitions of the others
     * that meet their claim and append one event written in one statement that is its own
     * transaction (`claimsAtOnce`), with the session approvals they grant. What is left (a later
     * claim of a request in the batch, a claim the statement could not write: another process
     * wrote since, or a row changed since it was read) runs in the transaction.
     */
    const claimsAhead = (kind: Claim["_tag"]) =>
    (
      inputs: ReadonlyArray<Merged.ClaimInput>
    ): Effect.Effect<ReadonlyArray<Exit.Exit<ClaimResult, Failure> | undefined>> => {
      const exits = new Array<Exit.Exit<ClaimResult, Failure> | undefined>(inputs.length)
      if (committed === undefined) {
        return Effect.succeed(exits)
      }
      if (skips > 0) {
        skips--
        return Effect.succeed(exits)
      }
      // the first claim of each request, in the batch's order (a later one meets what it leaves, in the transaction)
      const firsts = new Map<string, number>()
      for (let i = 0; i < inputs.length; i++) {
        if (!firsts.has(inputs[i]!.requestId)) {
          firsts.set(inputs[i]!.requestId, i)
        }
      }
      const unknown = Array.from(firsts.keys()).filter((requestId) =>
        !pendingTexts.has(requestId)
      )
      const read = unknown.length === 0 ? Effect.succeed([]) : q.requestsById({ requestIds: unknown })
      const settled = Effect.flatMap(read, (rows) => {
        const texts = new Map<string, string>()
        for (const row of rows) texts.set(String(row.request_id), String(row.request))
        // the text of each request claimed, as read (or as this process wrote it); gone ones refused
        const found: Array<{ readonly at: number; readonly before: string }> = []
        for (const [requestId, at] of firsts) {
          const before = texts.get(requestId) ?? pendingTexts.get(requestId)
          if (before === undefined) exits[at] = Exit.succeed({ _tag: "Refused", current: Option.none() })
          else found.push({ at, before })
        }
        return Effect.flatMap(entityRows.requestsOf(found.map(({ before }) => ({ request: before }))), (requests) => {
          const candidates: Array<{ readonly at: number; readonly before: string; readonly claimed: Transition }> = []
          found.forEach(({ at, before }, i) => {
            const request = requests[i]!
            if (request.status !== "pending") {
              exits[at] = Exit.succeed({ _tag: "Refused", current: Option.some(request) })
              return
            }
            // judged again by the statement, on the store's clock
            if (!meets(inputs[at]!.claim, request)) return
            const claimed = inputs[at]!.transition(request)
            if (Either.isRight(claimed) && claimed.right.events.length === 1) {
              candidates.push({ at, before, claimed: claimed.right })
            }
          })
          return candidates.length > 0
            ? Effect.as(writeClaimsAtOnce(kind, inputs, candidates, exits), exits)
            : Effect.succeed(exits)
        })
      })
      // a read that failed leaves every claim to the transaction
      return Effect.catchAll(settled, () => Effect.succeed(new Array(inputs.length)))
    }

    /** `claimsAhead`'s statement: each candidate's exit set when it wrote them all, none else. */
    const writeClaimsAtOnce = (
      kind: Claim["_tag"],
      inputs: ReadonlyArray<Merged.ClaimInput>,
      candidates: ReadonlyArray<{ readonly at: number; readonly before: string; readonly claimed: Transition }>,
      exits: Array<Exit.Exit<ClaimResult, Failure> | undefined>
    ) =>
      Effect.withFiberRuntime<void>((fiber) => {
        const known = committed
        if (known === undefined) return Effect.void
        let prevHash = known.hash
        const rows: Array<Statements.ClaimAtOnceRow> = []
        const written: Array<{
          readonly at: number
          readonly request: RequestEncoded
          readonly requestRow: Statements.RequestRow
          readonly event: EventRow
        }> = []
        for (const { at, before, claimed } of candidates) {
          const seq = known.seq + 1 + rows.length
          const grant = claimed.grant === undefined ? undefined : claimed.grant([seq])
          // one whose grant does not encode fails alone, in the transaction
          if (grant !== undefined && Either.isLeft(grant)) continue
          const approval = grant === undefined ? undefined : approvalRow(grant.right)
          const event = eventRow(claimed.events[0]!, prevHash)
          prevHash = event.hash
          const requestRow = entityRows.requestRow(claimed.request)
          const claim = inputs[at]!.claim
          rows.push({
            ...event,
            ...Statements.requestColumns(requestRow),
            before,
            claimAt: "at" in claim ? claim.at : 0,
            seq,
            knownSeq: known.seq,
            aId: approval?.id,
            aSessionKey: approval?.sessionKey,
            aToolName: approval?.toolName,
            aRevokedAt: approval?.revokedAt,
            aExpiresAt: approval?.expiresAt,
            aApproval: approval?.approval
          })
          written.push({ at, request: claimed.request, requestRow, event: writtenRow(seq, claimed.events[0]!, event) })
        }
        if (rows.length === 0) return Effect.void
        const missed = Effect.sync(() => {
          skips = afterMiss
        })
        const write = Effect.flatMap(q.claimsAtOnce[kind](rows), (result): Effect.Effect<void, Failure> => {
          if (result[0]?.seq === null || result[0]?.seq === undefined) return missed
          const last = known.seq + rows.length
          committed = { seq: last, hash: prevHash }
          return afterCommit(last, () => {
            for (const { at, event, request, requestRow } of written) {
              noted(requestRow)
              exits[at] = Exit.succeed({ _tag: "Claimed", request, events: [event] })
            }
          })
        })
        const running = Deferred.unsafeMake<void>(fiber.id())
        atOnceRunning = running
        // Failed, it wrote nothing, or (its connection lost) may have: either way the transaction
        // claims them again, and finds a claim it committed no longer pending (at most once).
        return Effect.catchIf(write, isUndone, () => missed).pipe(
          Effect.ignore,
          Effect.ensuring(Effect.sync(() => {
            atOnceRunning = undefined
            Deferred.unsafeDone(running, Effect.void)
          }))
        )
      })

    const requestByCall = (sessionKey: string, toolCallId: string) =>
      Effect.map(Effect.flatMap(q.requestByCall({ sessionKey, toolCallId }), requestsOf), first)
    const decisionByCall = (sessionKey: string, toolCallId: string) =>
      Effect.map(Effect.flatMap(q.decisionByCall({ sessionKey, toolCallId }), decisionsOf), first)

    // PostgreSQL: reads that merge (a group's) queue while one runs, as all of SQLite's do, and run
    // on a connection of their own (the kept one while free): 1,000 calls in flight read their
    // records in a few statements, not one each. A lone read runs at once.
    const pgReads = isSqlite ? undefined : yield* Batcher.make({
      reserve: onKept === undefined ? sql.reserve : onKept.borrow(sql.reserve),
      begin: []
    })

    /**
     * A read joining `group`, merged with the reads queued beside it. On PostgreSQL one that failed
     * runs again alone, once: its connection may have been a kept one the server ended.
     */
    const readJoined = <I, A>(operation: string, group: Batcher.Group<I, A, Failure>, input: I) =>
      PersistenceError.refail(operation)(
        pgReads === undefined
          ? batcher.join(group, input)
          : Effect.catchAll(pgReads.join(group, input), () => Batcher.alone(group, input))
      )

    /**
     * The log's head for the calls in flight together: one read, run after each of them asked (a
     * call that arrives while a read runs waits for the next), so the head is as fresh for each as
     * a read of its own. (A server's pending lists read it before every list they serve.)
     */
    const heads: Batcher.Group<void, number, Failure> = {
      write: false,
      run: (inputs) => Effect.map(Effect.flatMap(q.lastSeq({}), seqsOf), (seqs) => inputs.map(() => seqs[0] ?? 0))
    }

    const { claims, newRequests, recordedCalls, spends, unrequestedDecisions } = Merged.make({
      q,
      clock: options.clock,
      claimsAhead: isSqlite ? undefined : claimsAhead,
      appendEvents,
      appendEach,
      appendRewriting,
      insertRequests,
      insertRequestIfFree,
      claimKnown,
      numbersOf,
      rows: entityRows,
      holdsWriteLock
    })

    const selectRequests = (operation: string, where: Statement.Fragment, order: Statement.Fragment) =>
      read(
        operation,
        Effect.flatMap(run(sql`SELECT request FROM ${sql(t.requests)} WHERE ${where} ${order}`), requestsOf)
      )

    // --- the driver -------------------------------------------------------------------------------

    // SQLite: a signal naming no seq (a watch on the file, a poll) stands for another connection's
    // commit only when the database's data_version moved; this connection's own commits leave it
    // as it was, so they wake no reader twice.
    const dataVersion = read("changes", Effect.map(exec("PRAGMA data_version", []), (rows) => rows[0]?.data_version))
    let lastVersion = isSqlite ? yield* Effect.orElseSucceed(dataVersion, () => undefined) : undefined
    const changedElsewhere = Effect.map(dataVersion, (version) => {
      const changed = version === undefined || version !== lastVersion
      lastVersion = version
      return changed
    }).pipe(Effect.orElseSucceed(() => true))

    /** A query of a page after a seq and nothing else (the tailer's): its statement is compiled once. */
    const isPage = (query: AuditQuery): query is AuditQuery & { readonly limit: number } =>
      query.limit !== undefined && query.sessionKey === undefined && query.toolName === undefined &&
      query.outcome === undefined && query.since === undefined && query.until === undefined

    const driver: Encoded = {
      append: (events, then) => Effect.map(write("append", appendEvents(events)), then),

      // PostgreSQL: a lone step is first tried at once (`atOnce`)
      insertRequest: (request, events, covering, argsDigest) => {
        const input = { request, events, covering, argsDigest }
        return isSqlite
          ? writeJoined("createRequest", newRequests, input)
          : Effect.flatMap(
            PersistenceError.refail("createRequest")(requestAtOnce(input)),
            (done) =>
              Option.isSome(done)
                ? Effect.succeed({ _tag: "Inserted", events: done.value } as const)
                : writeJoined("createRequest", newRequests, input)
          )
      },

      claimRequest: (operation, requestId, claim, transition) => {
        const input = { requestId, claim, transition }
        return isSqlite
          ? writeJoined(operation, claims[claim._tag], input)
          : Effect.flatMap(
            PersistenceError.refail(operation)(claimAtOnce(input)),
            (done) =>
              Option.isSome(done) ? Effect.succeed(done.value) : writeJoined(operation, claims[claim._tag], input)
          )
      },

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

      countPending: read("countPending", Effect.flatMap(q.pendingCount({}), pendingCountOf)),

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
            isPage(query) ?
              q.eventsAfter({ afterSeq: query.afterSeq ?? 0, limit: query.limit }) :
              run(sql`SELECT seq, prev_hash, hash, event FROM ${sql(t.events)} WHERE ${
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

      lastSeq: readJoined("lastSeq", heads, undefined),

      chainLinks: (afterSeq, limit) => read("chainLinks", Effect.flatMap(q.chainLinks({ afterSeq, limit }), linksOf)),

      changes: isSqlite
        ? Stream.filterEffect(feed.changes, (seq) => seq === undefined ? changedElsewhere : Effect.succeed(true))
        : Stream.mapEffect(feed.changes, (seq) => {
          const running = atOnceRunning
          return running === undefined ? Effect.succeed(seq) : Effect.as(Deferred.await(running), seq)
        }),
      returnsWhatItWasGiven: false
    }
    return driver
  })
