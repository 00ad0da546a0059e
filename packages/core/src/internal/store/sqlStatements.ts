import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import type { Effect } from "effect"
import { lockKey, type Tables } from "../sqlSchema.js"

/**
 * The approval store's statements, each a named function whose parameters are bound by name next
 * to its SQL text. Each is compiled once (text with placeholders); a call runs the text with its
 * values on the connection at hand, skipping the per-statement span, scope and compile of
 * `@effect/sql`'s `Statement` (most of a statement's cost on SQLite).
 */

type Rows = ReadonlyArray<Record<string, unknown>>

/** Runs compiled text on the connection at hand (the transaction's, the batch's, or the pool). */
export type Exec = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<Rows, SqlError>

/**
 * A named parameter (of the `row`-th row, in a statement over rows), standing in for its value
 * while the statement compiles.
 */
class Slot {
  constructor(readonly name: string, readonly row = 0) {}
}

type Slots<P> = { readonly [K in keyof P]: Slot }

/** The slots of the `row`-th row: each name read stands for that row's value. */
const slotsOf = <P>(row: number) => new Proxy({}, { get: (_, name) => new Slot(String(name), row) }) as Slots<P>

/** Compiled text and its parameters, the slots among them. */
interface Shape {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}
const shapeOf = (statement: Statement.Statement<unknown>): Shape => {
  const [text, params] = statement.compile()
  return { text, params }
}

/** Runs a shape with its slots bound to the rows' values by name. */
const runShape = (exec: Exec, { params, text }: Shape, rows: ReadonlyArray<Record<string, unknown>>) =>
  exec(text, params.map((param) => param instanceof Slot ? rows[param.row]![param.name] ?? null : param))

/** The text of `build` with its named slots, and a function that runs it with their values. */
const prepare = (exec: Exec) =>
<P extends Record<string, unknown>>(
  build: (p: Slots<P>) => Statement.Statement<unknown>
): (values: P) => Effect.Effect<Rows, SqlError> => {
  const shape = shapeOf(build(slotsOf(0)))
  return (values) => runShape(exec, shape, [values])
}

/** Texts kept per statement over rows: the numbers of rows seen last (batches vary little). */
const SHAPES = 64

/**
 * A statement over several rows (its shape depends on their number): its text is compiled once per
 * number of rows, and a call binds its rows' values by name, as `prepare` does for one row.
 */
const prepareRows = (exec: Exec) =>
<R extends Record<string, unknown>>(
  build: (rows: ReadonlyArray<Slots<R>>) => Statement.Statement<unknown>
): (rows: ReadonlyArray<R>) => Effect.Effect<Rows, SqlError> => {
  const shapes = new Map<number, Shape>()
  return (rows) => {
    let shape = shapes.get(rows.length)
    if (shape === undefined) {
      shape = shapeOf(build(Array.from({ length: rows.length }, (_, row) => slotsOf<R>(row))))
      if (shapes.size >= SHAPES) shapes.clear()
      shapes.set(rows.length, shape)
    }
    return runShape(exec, shape, rows)
  }
}

/** The columns of an event row (`toolName` lower-cased, for the case-insensitive filter). */
export interface EventRow extends Record<string, unknown> {
  readonly at: number
  readonly type: string
  readonly outcome: string
  readonly sessionKey?: string | undefined
  readonly toolCallId?: string | undefined
  readonly toolName?: string | undefined
  readonly requestId?: string | undefined
  readonly event: string
  /** its links in the log's hash chain (`chain.ts`) */
  readonly prevHash?: string | undefined
  readonly hash: string
}

export interface RequestRow extends Record<string, unknown> {
  readonly requestId: string
  readonly sessionKey: string
  readonly toolCallId: string
  readonly status: string
  readonly createdAt: number
  readonly expiresAt: number
  readonly warnedAt?: number | undefined
  readonly consumedAt?: number | undefined
  readonly request: string
}

/**
 * A request row's columns beside its event's, in a statement over both (`insertEventsRewriting`,
 * `insertRequestsNumbered`).
 */
export interface RequestColumns extends Record<string, unknown> {
  readonly rRequestId: string
  readonly rSessionKey: string
  readonly rToolCallId: string
  readonly rStatus: string
  readonly rCreatedAt: number
  readonly rExpiresAt: number
  readonly rWarnedAt?: number | undefined
  readonly rConsumedAt?: number | undefined
  readonly rRequest: string
}

/** A request row's columns, renamed to sit beside its event's. */
export const requestColumns = (r: RequestRow): RequestColumns => ({
  rRequestId: r.requestId,
  rSessionKey: r.sessionKey,
  rToolCallId: r.toolCallId,
  rStatus: r.status,
  rCreatedAt: r.createdAt,
  rExpiresAt: r.expiresAt,
  rWarnedAt: r.warnedAt,
  rConsumedAt: r.consumedAt,
  rRequest: r.request
})

/**
 * PostgreSQL: a claim written at once with the others of its batch (`claimsAtOnce`): the request's
 * text as read (`before`) and as rewritten, its event under the number it takes (`seq`), and the
 * session approval it grants, if any (`a*`, all undefined else).
 */
export interface ClaimAtOnceRow extends EventRow, RequestColumns {
  readonly before: string
  readonly claimAt: number
  readonly seq: number
  /** the log's last number the statement's numbers follow (the same in every row) */
  readonly knownSeq: number
  readonly aId?: string | undefined
  readonly aSessionKey?: string | undefined
  readonly aToolName?: string | undefined
  readonly aRevokedAt?: number | undefined
  readonly aExpiresAt?: number | undefined
  readonly aApproval?: string | undefined
}

export interface DecisionRow extends Record<string, unknown> {
  readonly sessionKey: string
  readonly toolCallId: string
  readonly decision: string
}

export interface ApprovalRow extends Record<string, unknown> {
  readonly id: string
  readonly sessionKey: string
  readonly toolName: string
  readonly seq: number
  readonly revokedAt?: number | undefined
  readonly expiresAt?: number | undefined
  readonly approval: string
}

/** The hash of the log's last event: one step down the primary key. */
export const chainHeadOf = (sql: SqlClient.SqlClient, t: Tables): Statement.Statement<unknown> =>
  sql`SELECT seq, hash FROM ${sql(t.events)} ORDER BY seq DESC LIMIT 1`

export const make = (
  sql: SqlClient.SqlClient,
  t: Tables,
  exec: Exec,
  /** the time deadlines are judged at: the database's clock, or the caller's `at` */
  clockAt: (at: unknown) => Statement.Fragment,
  /** PostgreSQL: the NOTIFY channel the event inserts notify on, with the last seq they took */
  notifyChannel?: string | undefined
) => {
  const statement = prepare(exec)
  const statementOver = prepareRows(exec)
  const events = sql(t.events)
  const requests = sql(t.requests)
  const approvals = sql(t.sessionApprovals)
  const decisions = sql(t.decisions)
  const isSqlite = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
  const eventColumns = sql.literal(
    "at, type, outcome, session_key, tool_call_id, tool_name, request_id, event, prev_hash, hash"
  )
  // PostgreSQL numbers events from a counter row moved on in the writing transaction (a sequence
  // would burn numbers on rollback); SQLite's AUTOINCREMENT counter is transactional already.
  const nextSeq = "toolgate_next_seq"
  const takeSeqs = (n: number) =>
    sql`UPDATE ${sql(t.eventSeq)} SET last = last + ${sql.literal(String(n))} RETURNING last`
  /** The `back`-th number before the last one taken. */
  const lastTaken = (back = 0) =>
    sql`(SELECT last FROM ${sql(nextSeq)})${back > 0 ? sql.literal(` - ${back}`) : sql.literal("")}`
  const eventValues = (e: Slots<EventRow>) =>
    sql`${e.at}, ${e.type}, ${e.outcome}, ${e.sessionKey}, ${e.toolCallId}, ${e.toolName}, ${e.requestId}, ${e.event}, ${e.prevHash}, ${e.hash}`
  const pending = sql`status = 'pending'`
  /** A column of a `VALUES` list as a BIGINT (PostgreSQL types its parameters as text there). */
  const bigint = (column: string) =>
    sql.onDialectOrElse({ pg: () => sql.literal(`v.${column}::bigint`), orElse: () => sql.literal(`v.${column}`) })
  /** The condition of each kind of claim, judged at `at`. */
  const claimConditions: Record<
    "Unwarned" | "BeforeDeadline" | "PastDeadline",
    (at: Statement.Fragment) => Statement.Fragment
  > = {
    Unwarned: () => sql`warned_at IS NULL`,
    BeforeDeadline: (at) => sql`expires_at > ${at}`,
    PastDeadline: (at) => sql`expires_at <= ${at}`
  }
  /** A statement for each kind of claim. */
  const perClaim = <A>(make: (condition: (at: Statement.Fragment) => Statement.Fragment) => A) => ({
    Unwarned: make(claimConditions.Unwarned),
    BeforeDeadline: make(claimConditions.BeforeDeadline),
    PastDeadline: make(claimConditions.PastDeadline)
  })
  // SQLite: a read, run only in a batch's own transaction, whose `BEGIN IMMEDIATE` holds the one
  // write lock (an update that sets nothing new still rewrites the row and the entries of every
  // index whose condition names `status`); PostgreSQL: an update, which locks the rows
  const claimManyWhere = (condition: (at: Statement.Fragment) => Statement.Fragment) =>
    statementOver<{ requestId: string; at: number }>((claims) => {
      const claimed = sql`(VALUES ${sql.csv(claims.map((claim) => sql`(${claim.requestId}, ${claim.at})`))}) AS v
        WHERE request_id = v.column1 AND ${pending} AND ${condition(clockAt(bigint("column2")))}`
      return isSqlite
        ? sql`SELECT request_id, request FROM ${requests}, ${claimed}`
        : sql`UPDATE ${requests} SET status = status FROM ${claimed} RETURNING request_id, request`
    })
  /**
   * PostgreSQL's numbered insert of events, returning their seqs (and notifying, given a channel);
   * `also`: a data-modifying statement with `RETURNING` run with it, in the same round trip (the
   * number of rows it returned comes back as `also_rows`).
   */
  const insertNumbered = (count: number, values: Statement.Fragment, also?: Statement.Fragment) => {
    const insert = sql`INSERT INTO ${events} (seq, ${eventColumns}) VALUES ${values} RETURNING seq`
    const [alsoRun, alsoRows] = also === undefined
      ? [sql.literal(""), sql.literal("")]
      : [sql`, also AS (${also})`, sql.literal(", (SELECT COUNT(*) FROM also) AS also_rows")]
    return notifyChannel === undefined && also === undefined
      ? sql`WITH ${sql(nextSeq)} AS (${takeSeqs(count)}) ${insert}`
      : sql`WITH ${sql(nextSeq)} AS (${takeSeqs(count)}), inserted AS (${insert})${alsoRun}
        SELECT inserted.seq${alsoRows} FROM inserted${
        notifyChannel === undefined
          ? sql.literal("")
          : sql`, (SELECT pg_notify(${notifyChannel}, (SELECT MAX(seq) FROM inserted)::text)) AS notified`
      }`
  }
  /**
   * PostgreSQL: one event numbered and inserted only when `guard` holds (else nothing is written
   * and no row comes back), then its seq (and the notify, given a channel). `first`: a query named
   * before the number is taken (the guard may read it); `also`: a data-modifying statement with
   * `RETURNING` run with it (the number of rows it returned comes back as `also_rows`).
   */
  const insertOneIf = (
    guard: Statement.Fragment,
    e: Slots<EventRow>,
    ctes: { readonly first?: Statement.Fragment; readonly also?: Statement.Fragment }
  ) => {
    const none = sql.literal("")
    const first = ctes.first === undefined ? none : sql`${ctes.first}, `
    const [also, alsoRows] = ctes.also === undefined
      ? [none, none]
      : [sql`, also AS (${ctes.also})`, sql.literal(", (SELECT COUNT(*) FROM also) AS also_rows")]
    const notified = notifyChannel === undefined
      ? none
      : sql`, pg_notify(${notifyChannel}, inserted.seq::text) AS notified`
    const taken = sql(nextSeq)
    return sql`WITH ${first}${taken} AS (UPDATE ${sql(t.eventSeq)} SET last = last + 1 WHERE ${guard} RETURNING last),
      inserted AS (INSERT INTO ${events} (seq, ${eventColumns}) SELECT last, ${
      eventValues(e)
    } FROM ${taken} RETURNING seq)${also}
      SELECT inserted.seq${alsoRows}${notified} FROM inserted`
  }
  /**
   * PostgreSQL: one event written by a statement that is its own transaction (no `BEGIN`, no
   * writers' lock held across round trips): its number is taken only while the log's last number is
   * still `knownSeq` (the head the event is chained to) and no transaction holds the writers' lock
   * (`pg_try_advisory_xact_lock`, held to this statement's commit), and `guard` holds. PostgreSQL
   * judges an `UPDATE`'s condition on the newest version of a row another transaction changed after
   * the statement's snapshot, so the counter row says whether any event was committed since; and
   * since every insert of a request or a decision, and every grant or revocation of an approval,
   * appends an event, the snapshot the rest of the statement reads holds every such write (a
   * claimed row is judged anew, as any `UPDATE`'s). One row always comes back: `seq` (NULL when
   * nothing was written); `whole` divides by zero, failing the statement and undoing all of it, when
   * `first` wrote a row without the number or the number was taken without `also`'s row.
   */
  const atOnce = (
    guard: Statement.Fragment,
    e: Slots<EventRow> & { readonly knownSeq: unknown },
    ctes: { readonly first?: Statement.Fragment; readonly also?: Statement.Fragment }
  ) => {
    const none = sql.literal("")
    const first = ctes.first === undefined ? none : sql`${ctes.first}, `
    const also = ctes.also === undefined ? none : sql`, also AS (${ctes.also})`
    const count = (cte: string) => sql.literal(`(SELECT COUNT(*) FROM ${cte})`)
    const whole = ctes.first !== undefined
      ? sql`1 - ${count("claimed")} + ${count(nextSeq)}`
      : ctes.also !== undefined
      ? sql`1 - ${count(nextSeq)} + ${count("also")}`
      : sql.literal("1")
    const notified = notifyChannel === undefined
      ? none
      : sql`, (SELECT pg_notify(${notifyChannel}, seq::text) FROM inserted) AS notified`
    const taken = sql(nextSeq)
    return sql`WITH ${first}${taken} AS (UPDATE ${sql(t.eventSeq)} SET last = last + 1
        WHERE last = ${e.knownSeq} AND ${guard} AND pg_try_advisory_xact_lock(${sql.literal(String(lockKey(t.prefix)))})
        RETURNING last),
      inserted AS (INSERT INTO ${events} (seq, ${eventColumns}) SELECT last, ${
      eventValues(e)
    } FROM ${taken} RETURNING seq)${also}
      SELECT (SELECT seq FROM inserted) AS seq, 1 / (${whole}) AS whole${notified}`
  }
  /**
   * PostgreSQL: the claims of a batch, written together by a statement that is its own transaction
   * (as `atOnce`): each request rewritten when it still holds the text it was read with and meets
   * the claim, then, only when every one was and the log's last number is still `knownSeq` and no
   * transaction holds the writers' lock, their events under the numbers after it and the session
   * approvals they grant. One row always comes back: `seq`, the last number taken (NULL when nothing
   * was written); `whole` divides by zero, failing the statement and undoing all of it, when some
   * requests were rewritten but not all, or all without their events.
   */
  const claimsAtOnceWhere = (condition: (at: Statement.Fragment) => Statement.Fragment) =>
    statementOver<ClaimAtOnceRow>((rows) => {
      const count = sql.literal(String(rows.length))
      const taken = sql(nextSeq)
      const takenAny = sql`EXISTS (SELECT 1 FROM ${taken})`
      const notified = notifyChannel === undefined
        ? sql.literal("")
        : sql`, (SELECT pg_notify(${notifyChannel}, MAX(seq)::text) FROM inserted HAVING COUNT(*) > 0) AS notified`
      return sql`WITH claimed AS (UPDATE ${requests} SET status = v.column4, expires_at = ${bigint("column5")},
          warned_at = ${bigint("column6")}, consumed_at = ${bigint("column7")}, request = v.column8
          FROM (VALUES ${
        sql.csv(rows.map((r) =>
          sql`(${r.rRequestId}, ${r.before}, ${r.claimAt}, ${r.rStatus}, ${r.rExpiresAt}, ${r.rWarnedAt}, ${r.rConsumedAt}, ${r.rRequest})`
        ))
      }) AS v
          WHERE request_id = v.column1 AND ${pending} AND request = v.column2 AND ${
        condition(clockAt(bigint("column3")))
      }
          RETURNING request_id),
        ${taken} AS (UPDATE ${sql(t.eventSeq)} SET last = last + ${count}
          WHERE last = ${rows[0]!.knownSeq} AND (SELECT COUNT(*) FROM claimed) = ${count}
            AND pg_try_advisory_xact_lock(${sql.literal(String(lockKey(t.prefix)))})
          RETURNING last),
        inserted AS (INSERT INTO ${events} (seq, ${eventColumns})
          SELECT ${bigint("column1")}, ${bigint("column2")}, v.column3, v.column4, v.column5, v.column6, v.column7,
            v.column8, v.column9, v.column10, v.column11
          FROM (VALUES ${
        sql.csv(rows.map((r) =>
          sql`(${r.seq}, ${r.at}, ${r.type}, ${r.outcome}, ${r.sessionKey}, ${r.toolCallId}, ${r.toolName}, ${r.requestId}, ${r.event}, ${r.prevHash}, ${r.hash})`
        ))
      }) AS v
          WHERE ${takenAny} RETURNING seq),
        granted AS (INSERT INTO ${approvals} (id, session_key, tool_name, seq, granted_seq, revoked_at, expires_at, approval)
          SELECT v.column1, v.column2, v.column3, ${bigint("column4")}, ${bigint("column4")}, ${bigint("column5")},
            ${bigint("column6")}, v.column7
          FROM (VALUES ${
        sql.csv(rows.map((r) =>
          sql`(${r.aId}, ${r.aSessionKey}, ${r.aToolName}, ${r.seq}, ${r.aRevokedAt}, ${r.aExpiresAt}, ${r.aApproval})`
        ))
      }) AS v
          WHERE v.column1 IS NOT NULL AND ${takenAny})
        SELECT (SELECT MAX(seq) FROM inserted) AS seq,
          1 / (CASE WHEN (SELECT COUNT(*) FROM claimed) = ${count} * (SELECT COUNT(*) FROM ${taken}) THEN 1 ELSE 0 END)
            AS whole${notified}`
    })
  type RewriteSlots = Slots<RequestColumns & { readonly before: string; readonly claimAt: number }>
  type ClaimSlots = Slots<EventRow & RequestColumns & { readonly before: string; readonly claimAt: number }>
  /**
   * A claimed request's row rewritten, when it still holds the text `before` (as this process last
   * wrote it) and meets the claim's `condition`; returns its id (no row: nothing was written).
   */
  const rewriteClaimed = (p: RewriteSlots, condition: (at: Statement.Fragment) => Statement.Fragment) =>
    sql`UPDATE ${requests} SET status = ${p.rStatus}, expires_at = ${p.rExpiresAt},
      warned_at = ${p.rWarnedAt}, consumed_at = ${p.rConsumedAt}, request = ${p.rRequest}
      WHERE request_id = ${p.rRequestId} AND ${pending} AND request = ${p.before} AND ${condition(clockAt(p.claimAt))}
      RETURNING request_id`
  /** PostgreSQL: `rewriteClaimed` as the statement's first part (`claimed`). */
  const claimedAs = (p: ClaimSlots, condition: (at: Statement.Fragment) => Statement.Fragment) =>
    sql`claimed AS (${rewriteClaimed(p, condition)})`
  const claimed = sql`EXISTS (SELECT 1 FROM claimed)`
  /**
   * PostgreSQL: a claimed request's one event and its rewritten row in one statement, in the
   * running transaction (`claimedAs`); else nothing is written and no row comes back.
   */
  const claimRewritingWhere = (condition: (at: Statement.Fragment) => Statement.Fragment) =>
    statement<EventRow & RequestColumns & { readonly before: string; readonly claimAt: number }>((p) =>
      insertOneIf(claimed, p, { first: claimedAs(p, condition) })
    )
  /** `claimRewritingWhere` as its own transaction (`atOnce`). */
  const claimAtOnceWhere = (condition: (at: Statement.Fragment) => Statement.Fragment) =>
    statement<
      EventRow & RequestColumns & { readonly before: string; readonly claimAt: number; readonly knownSeq: number }
    >(
      (p) => atOnce(claimed, p, { first: claimedAs(p, condition) })
    )
  /** A field of a session approval's JSON text, in a guard. */
  const approvalField = (field: string) =>
    sql.literal(isSqlite ? `json_extract(approval, '$.${field}')` : `(approval::jsonb ->> '${field}')`)
  // NULL-safe comparisons
  const distinct = sql.literal(isSqlite ? "IS NOT" : "IS DISTINCT FROM")
  const same = sql.literal(isSqlite ? "IS" : "IS NOT DISTINCT FROM")
  type NewRequestSlots = Slots<
    EventRow & RequestColumns & { readonly grantToolName: string; readonly argsDigest: string }
  >
  /**
   * A lone request's guard: its call id has no record, and its session no approval for its tool
   * (`grantToolName`), active at its creation on the store's clock, that may cover it: any but one
   * of `exact` scope for other arguments than the call's (`argsDigest`).
   */
  const requestFree = (p: NewRequestSlots) =>
    sql`NOT EXISTS (SELECT 1 FROM ${requests} WHERE session_key = ${p.rSessionKey} AND tool_call_id = ${p.rToolCallId})
      AND NOT EXISTS (SELECT 1 FROM ${decisions} WHERE session_key = ${p.rSessionKey} AND tool_call_id = ${p.rToolCallId})
      AND NOT EXISTS (SELECT 1 FROM ${approvals} WHERE session_key = ${p.rSessionKey} AND tool_name = ${p.grantToolName}
        AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${clockAt(p.rCreatedAt)})
        AND (${approvalField("scope")} ${distinct} 'exact' OR ${approvalField("argsDigest")} ${same} ${p.argsDigest}))`
  /** A lone request inserted under the number `nextSeq` took. */
  const requestUnderTaken = (p: NewRequestSlots) =>
    sql`INSERT INTO ${requests}
      (request_id, session_key, tool_call_id, status, created_at, expires_at, warned_at, consumed_at, request, requested_seq)
      SELECT ${p.rRequestId}, ${p.rSessionKey}, ${p.rToolCallId}, ${p.rStatus}, ${p.rCreatedAt}, ${p.rExpiresAt},
        ${p.rWarnedAt}, ${p.rConsumedAt}, ${p.rRequest}, last FROM ${sql(nextSeq)}
      ON CONFLICT DO NOTHING RETURNING request_id`
  const numberedValues = (rows: ReadonlyArray<Slots<EventRow>>) =>
    sql.csv(rows.map((row, i) => sql`(${lastTaken(rows.length - 1 - i)}, ${eventValues(row)})`))
  // requested_seq: creation order, breaking ties between requests of the same millisecond: the seq
  // of the request's `approval.requested` event
  const insertRequestsOf = (rows: ReadonlyArray<readonly [Slots<RequestRow>, unknown]>) =>
    sql`INSERT INTO ${requests}
        (request_id, session_key, tool_call_id, status, created_at, expires_at, warned_at, consumed_at, request, requested_seq)
        VALUES ${
      sql.csv(
        rows.map(([r, requestedSeq]) =>
          sql`(${r.requestId}, ${r.sessionKey}, ${r.toolCallId}, ${r.status}, ${r.createdAt}, ${r.expiresAt}, ${r.warnedAt}, ${r.consumedAt}, ${r.request}, ${requestedSeq})`
        )
      )
    } ON CONFLICT DO NOTHING RETURNING request_id`
  const rewriteRequestsOf = (rows: ReadonlyArray<Slots<RequestRow>>) =>
    sql`UPDATE ${requests} SET status = v.column2, expires_at = ${bigint("column3")},
        warned_at = ${bigint("column4")}, consumed_at = ${bigint("column5")}, request = v.column6
        FROM (VALUES ${
      sql.csv(rows.map((r) =>
        sql`(${r.requestId}, ${r.status}, ${r.expiresAt}, ${r.warnedAt}, ${r.consumedAt}, ${r.request})`
      ))
    }) AS v WHERE request_id = v.column1 RETURNING request_id`

  return {
    lastSeq: statement<{}>(() => sql`SELECT MAX(seq) AS seq FROM ${events}`),

    /** The pending requests and the log's last seq, in one statement: one snapshot holds both. */
    pendingCount: statement<{}>(() =>
      sql`SELECT (SELECT COUNT(*) FROM ${requests} WHERE status = 'pending') AS pending,
        (SELECT MAX(seq) FROM ${events}) AS seq`
    ),

    /** The seq and hash of the log's last event (the chain's head); no row when the log is empty. */
    chainHead: statement<{}>(() => chainHeadOf(sql, t)),

    /** A page of the log (the tailer's read, after each change signal): compiled once. */
    eventsAfter: statement<{ afterSeq: number; limit: number }>((p) =>
      sql`SELECT seq, prev_hash, hash, event FROM ${events} WHERE seq > ${p.afterSeq} ORDER BY seq LIMIT ${p.limit}`
    ),

    /** The events after `afterSeq` as stored, with the columns that repeat their fields, for checking the hash chain. */
    chainLinks: statement<{ afterSeq: number; limit: number }>((p) =>
      sql`SELECT seq, prev_hash, hash, event, at, type, outcome, session_key, tool_call_id, tool_name, request_id
        FROM ${events} WHERE seq > ${p.afterSeq} ORDER BY seq LIMIT ${p.limit}`
    ),

    insertEvent: statement<EventRow>((e) =>
      isSqlite
        ? sql`INSERT INTO ${events} (${eventColumns}) VALUES (${eventValues(e)}) RETURNING seq`
        : insertNumbered(1, sql`(${lastTaken()}, ${eventValues(e)})`)
    ),

    /** Several events in one statement. */
    insertEvents: statementOver<EventRow>((rows) =>
      isSqlite
        ? sql`INSERT INTO ${events} (${eventColumns}) VALUES ${
          sql.csv(rows.map((row) => sql`(${eventValues(row)})`))
        } RETURNING seq`
        : insertNumbered(rows.length, numberedValues(rows))
    ),

    /**
     * PostgreSQL: the events of claimed requests (one each) numbered and inserted, and those
     * requests rewritten, in one statement (one round trip); returns the events' seqs.
     */
    insertEventsRewriting: statementOver<EventRow & RequestColumns>((rows) =>
      insertNumbered(
        rows.length,
        numberedValues(rows),
        rewriteRequestsOf(rows.map((row) =>
          ({
            requestId: row.rRequestId,
            status: row.rStatus,
            expiresAt: row.rExpiresAt,
            warnedAt: row.rWarnedAt,
            consumedAt: row.rConsumedAt,
            request: row.rRequest
          }) as Slots<RequestRow>
        ))
      )
    ),

    rewriteRequest: statement<RequestRow>((r) =>
      sql`UPDATE ${requests} SET status = ${r.status}, expires_at = ${r.expiresAt}, warned_at = ${r.warnedAt},
        consumed_at = ${r.consumedAt}, request = ${r.request} WHERE request_id = ${r.requestId}`
    ),

    requestById: statement<{ requestId: string }>((p) =>
      sql`SELECT request FROM ${requests} WHERE request_id = ${p.requestId}`
    ),

    requestByCall: statement<{ sessionKey: string; toolCallId: string }>((p) =>
      sql`SELECT request FROM ${requests} WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId}`
    ),

    recordedByCall: statement<{ sessionKey: string; toolCallId: string }>((p) =>
      sql`SELECT request, NULL AS decision FROM ${requests} WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId}
        UNION ALL SELECT NULL, decision FROM ${decisions} WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId}`
    ),

    /**
     * The records of a call id and the session's approvals for its tool active on the store's
     * clock at `at`, in one read (a row has one of `request`, `decision`, `approval`).
     */
    recordedOrCovering: statement<{ sessionKey: string; toolCallId: string; toolName: string; at: number }>((p) =>
      sql`SELECT request, NULL AS decision, NULL AS approval FROM ${requests}
          WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId}
        UNION ALL SELECT NULL, decision, NULL FROM ${decisions}
          WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId}
        UNION ALL SELECT NULL, NULL, approval FROM ${approvals}
          WHERE session_key = ${p.sessionKey} AND tool_name = ${p.toolName}
          AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${clockAt(p.at)})`
    ),

    /** The records of several call ids in one read, with the call ids they belong to. */
    recordedByCalls: statementOver<{ sessionKey: string; toolCallId: string }>((calls) => {
      const pairs = sql.csv(calls.map((call) => sql`(${call.sessionKey}, ${call.toolCallId})`))
      return sql`SELECT session_key, tool_call_id, request, NULL AS decision FROM ${requests}
          WHERE (session_key, tool_call_id) IN (VALUES ${pairs})
        UNION ALL SELECT session_key, tool_call_id, NULL, decision FROM ${decisions}
          WHERE (session_key, tool_call_id) IN (VALUES ${pairs})`
    }),

    /**
     * Several requests in one statement, each with its own `requested_seq` (the seq of its
     * `approval.requested` event, written just before); returns the ids inserted.
     */
    insertRequests: statementOver<RequestRow & { readonly requestedSeq: number }>((rows) =>
      insertRequestsOf(rows.map((r) => [r, r.requestedSeq]))
    ),

    /**
     * PostgreSQL: requests with their events (one each) numbered and inserted, each request's
     * `requested_seq` its event's seq, in one statement (one round trip). Returns the events'
     * seqs, and as `also_rows` how many requests were inserted.
     */
    insertRequestsNumbered: statementOver<EventRow & RequestColumns>((rows) =>
      insertNumbered(
        rows.length,
        numberedValues(rows),
        insertRequestsOf(rows.map((row, i) => [{
          requestId: row.rRequestId,
          sessionKey: row.rSessionKey,
          toolCallId: row.rToolCallId,
          status: row.rStatus,
          createdAt: row.rCreatedAt,
          expiresAt: row.rExpiresAt,
          warnedAt: row.rWarnedAt,
          consumedAt: row.rConsumedAt,
          request: row.rRequest
        } as Slots<RequestRow>, lastTaken(rows.length - 1 - i)]))
      )
    ),

    /**
     * PostgreSQL: `insertRequestsNumbered` for one request, only when nothing stands in its way
     * (`requestFree`); else nothing is written and no row comes back.
     */
    insertRequestIfFree: statement<
      EventRow & RequestColumns & { readonly grantToolName: string; readonly argsDigest: string }
    >((p) => insertOneIf(requestFree(p), p, { also: requestUnderTaken(p) })),

    /**
     * SQLite: a lone request's event inserted only when nothing stands in its way (`requestFree`),
     * its request then inserted under its seq (`insertRequests`); returns the seq, or no row when
     * nothing was written.
     */
    insertEventIfFree: statement<
      EventRow & RequestColumns & { readonly grantToolName: string; readonly argsDigest: string }
    >((p) =>
      sql`INSERT INTO ${events} (${eventColumns}) SELECT ${eventValues(p)} WHERE ${requestFree(p)} RETURNING seq`
    ),

    /** `insertRequestIfFree` as its own transaction (`atOnce`). */
    insertRequestAtOnce: statement<
      EventRow & RequestColumns & {
        readonly grantToolName: string
        readonly argsDigest: string
        readonly knownSeq: number
      }
    >((p) => atOnce(requestFree(p), p, { also: requestUnderTaken(p) })),

    /** `claimMany`'s conditions with the request's rewrite and its event folded in (`claimRewritingWhere`). */
    claimRewriting: perClaim(claimRewritingWhere),

    /** SQLite: `claimMany`'s conditions with the request's rewrite folded in (`rewriteClaimed`); its event follows. */
    rewriteClaimed: perClaim((condition) =>
      statement<RequestColumns & { readonly before: string; readonly claimAt: number }>((p) =>
        rewriteClaimed(p, condition)
      )
    ),

    /** `claimRewriting`, each as its own transaction (`atOnce`). */
    claimAtOnce: perClaim(claimAtOnceWhere),

    /** The claims of a batch written together, as their own transaction (`claimsAtOnceWhere`). */
    claimsAtOnce: perClaim(claimsAtOnceWhere),

    /** PostgreSQL: the requests of these ids (one array parameter, so one text for any number). */
    requestsById: statement<{ requestIds: ReadonlyArray<string> }>((p) =>
      sql`SELECT request_id, request FROM ${requests} WHERE request_id = ANY(${p.requestIds})`
    ),

    /**
     * Claims a pending request for a transition (the transaction's first write), returning its
     * pre-image: not yet warned, or within (`before`) or past its deadline on the store's clock.
     */
    claimUnwarned: statement<{ requestId: string }>((p) =>
      sql`UPDATE ${requests} SET status = status
        WHERE request_id = ${p.requestId} AND ${pending} AND warned_at IS NULL RETURNING request`
    ),
    claimBeforeDeadline: statement<{ requestId: string; at: number }>((p) =>
      sql`UPDATE ${requests} SET status = status
        WHERE request_id = ${p.requestId} AND ${pending} AND expires_at > ${clockAt(p.at)} RETURNING request`
    ),
    claimPastDeadline: statement<{ requestId: string; at: number }>((p) =>
      sql`UPDATE ${requests} SET status = status
        WHERE request_id = ${p.requestId} AND ${pending} AND expires_at <= ${clockAt(p.at)} RETURNING request`
    ),

    /**
     * Claims several pending requests at once, each at its own time: those not yet warned, or
     * within or past their deadline on the store's clock. Returns the pre-images with their ids.
     * Only inside a transaction that holds the writers' lock (a batch's).
     */
    claimMany: perClaim(claimManyWhere),

    /** `rewriteRequest` for several requests in one statement. */
    rewriteRequests: statementOver<RequestRow>(rewriteRequestsOf),

    /** `insertApproval` for several approvals in one statement. */
    insertApprovals: statementOver<ApprovalRow>((rows) =>
      sql`INSERT INTO ${approvals}
        (id, session_key, tool_name, seq, granted_seq, revoked_at, expires_at, approval) VALUES ${
        sql.csv(
          rows.map((a) =>
            sql`(${a.id}, ${a.sessionKey}, ${a.toolName}, ${a.seq}, ${a.seq}, ${a.revokedAt}, ${a.expiresAt}, ${a.approval})`
          )
        )
      }`
    ),

    // One statement, so one autocommit: the row's JSON gets `consumedAt` from the database's own
    // JSON functions (no read, no rewrite, no transaction).
    consume: statement<{ requestId: string; at: number }>((p) =>
      sql`UPDATE ${requests} SET consumed_at = ${p.at}, request = ${
        sql.onDialectOrElse({
          pg: () => sql`(request::jsonb || jsonb_build_object('consumedAt', ${p.at}::bigint))::text`,
          orElse: () => sql`json_set(request, '$.consumedAt', ${p.at})`
        })
      } WHERE request_id = ${p.requestId} AND status = 'approved' AND consumed_at IS NULL RETURNING request_id`
    ),

    /** `consume` for several requests in one statement; returns the ids spent. */
    consumeMany: statementOver<{ requestId: string; at: number }>((spends) => {
      const at = bigint("column2")
      return sql`UPDATE ${requests} SET consumed_at = ${at}, request = ${
        sql.onDialectOrElse({
          pg: () => sql`(request::jsonb || jsonb_build_object('consumedAt', ${at}))::text`,
          orElse: () => sql`json_set(request, '$.consumedAt', ${at})`
        })
      } FROM (VALUES ${sql.csv(spends.map((spend) => sql`(${spend.requestId}, ${spend.at})`))}) AS v
        WHERE request_id = v.column1 AND status = 'approved' AND consumed_at IS NULL RETURNING request_id`
    }),

    insertDecision: statement<DecisionRow>((p) =>
      sql`INSERT INTO ${decisions} (session_key, tool_call_id, decision) VALUES (${p.sessionKey}, ${p.toolCallId}, ${p.decision})
        ON CONFLICT DO NOTHING RETURNING session_key`
    ),

    /** The decision, unless a request or a decision holds its call id: one statement for both checks. */
    insertDecisionUnrequested: statement<DecisionRow>((p) =>
      sql`INSERT INTO ${decisions} (session_key, tool_call_id, decision)
        SELECT ${p.sessionKey}, ${p.toolCallId}, ${p.decision}
        WHERE NOT EXISTS (SELECT 1 FROM ${requests} WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId})
        ON CONFLICT DO NOTHING RETURNING session_key`
    ),

    /**
     * Many decisions in one statement, each unless a request or a decision holds its call id;
     * returns the call ids it inserted.
     */
    insertDecisionsUnrequested: statementOver<DecisionRow>((rows) =>
      sql`INSERT INTO ${decisions} (session_key, tool_call_id, decision)
        SELECT v.column1, v.column2, v.column3 FROM (VALUES ${
        sql.csv(rows.map((row) => sql`(${row.sessionKey}, ${row.toolCallId}, ${row.decision})`))
      }) AS v
        WHERE NOT EXISTS (SELECT 1 FROM ${requests} r WHERE r.session_key = v.column1 AND r.tool_call_id = v.column2)
        ON CONFLICT DO NOTHING RETURNING session_key, tool_call_id`
    ),

    decisionByCall: statement<{ sessionKey: string; toolCallId: string }>((p) =>
      sql`SELECT decision FROM ${decisions} WHERE session_key = ${p.sessionKey} AND tool_call_id = ${p.toolCallId}`
    ),

    /** The session's approvals for a tool active on the store's clock at `at`. */
    activeGrants: statement<{ sessionKey: string; toolName: string; at: number }>((p) =>
      sql`SELECT approval FROM ${approvals} WHERE session_key = ${p.sessionKey} AND tool_name = ${p.toolName}
        AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${clockAt(p.at)})`
    ),

    /**
     * The approvals of several (session, tool) pairs active on the store's clock at the first
     * pair's `at`, with the pair each belongs to and its expiry.
     */
    activeGrantsOf: statementOver<{ sessionKey: string; toolName: string; at: number }>((pairs) =>
      sql`SELECT session_key, tool_name, expires_at, approval FROM ${approvals}
        WHERE (session_key, tool_name) IN (VALUES ${
        sql.csv(pairs.map((pair) => sql`(${pair.sessionKey}, ${pair.toolName})`))
      }) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${clockAt(pairs[0]!.at)})`
    ),

    grantActive: statement<{ id: string; at: number }>((p) =>
      sql`SELECT id FROM ${approvals} WHERE id = ${p.id}
        AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${clockAt(p.at)})`
    ),

    // granted_seq keeps grant order among rows that a later revocation gave one seq
    insertApproval: statement<ApprovalRow>((a) =>
      sql`INSERT INTO ${approvals} (id, session_key, tool_name, seq, granted_seq, revoked_at, expires_at, approval)
        VALUES (${a.id}, ${a.sessionKey}, ${a.toolName}, ${a.seq}, ${a.seq}, ${a.revokedAt}, ${a.expiresAt}, ${a.approval})`
    ),

    rewriteApproval: statement<ApprovalRow>((a) =>
      sql`UPDATE ${approvals} SET seq = ${a.seq}, revoked_at = ${a.revokedAt}, expires_at = ${a.expiresAt},
        approval = ${a.approval} WHERE id = ${a.id}`
    ),

    /** Revokes the approval `id` when it is active at `at` (the caller's time); its pre-image. */
    revokeOne: statement<{ id: string; at: number }>((p) =>
      sql`UPDATE ${approvals} SET revoked_at = ${p.at}
        WHERE id = ${p.id} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${p.at}) RETURNING approval`
    )
  }
}

export type Statements = ReturnType<typeof make>
