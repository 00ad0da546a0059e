import { Effect, Either, Option, type ParseResult } from "effect"
import type {
  ApprovalEncoded,
  ChainLink,
  DecisionEncoded,
  EventEncoded,
  EventRow,
  PendingCount,
  RequestEncoded
} from "../../ApprovalStore.js"
import { BuiltEvent } from "../builtEvent.js"
import * as Rows from "../sqlRows.js"
import { link } from "./chain.js"
import type * as Statements from "./sqlStatements.js"

/**
 * The SQL driver's rows: an encoded entity as the columns a statement binds (its JSON text and the
 * fields the queries filter on), and the rows a query returns read back into encoded entities.
 * Each store has its own columns, so its own read caches (`sqlRows.ts`).
 */

type Row = Record<string, unknown>

/** The fields an entity and its row share, copied as they are. */
const copied = <E, K extends keyof E>(entity: E, keys: ReadonlyArray<K>): Pick<E, K> => {
  const out = {} as Pick<E, K>
  for (const key of keys) out[key] = entity[key]
  return out
}
const requestFields = ["requestId", "status", "createdAt", "expiresAt", "warnedAt", "consumedAt"] as const
const approvalFields = ["id", "sessionKey", "toolName", "seq", "revokedAt", "expiresAt"] as const
const eventFields = ["at", "type", "outcome", "sessionKey", "toolCallId", "requestId"] as const

/** A continuation's result as an effect (its failure rolls the step back). */
export const fromEither = <A>(
  either: Either.Either<A, ParseResult.ParseError>
): Effect.Effect<A, ParseResult.ParseError> =>
  Either.isRight(either) ? Effect.succeed(either.right) : Effect.fail(either.left)

/** A column that holds text, or `undefined` (SQL `NULL`); anything else as its text. */
export const textOrNot = (value: unknown): string | undefined =>
  value === null || value === undefined ? undefined : typeof value === "string" ? value : String(value)

/** The columns of an event row that repeat fields of its text, for the log's filters. */
const filteredColumns = ["at", "type", "outcome", "session_key", "tool_call_id", "tool_name", "request_id"] as const

/** The first row, if any. */
export const first = <A>(rows: ReadonlyArray<A>): Option.Option<A> => Option.fromNullable(rows[0])

/** The pending requests and the log's last seq of `pendingCount`'s row (the `MAX` of an empty log reads as 0). */
export const pendingCountOf = (rows: ReadonlyArray<Row>): Effect.Effect<PendingCount, ParseResult.ParseError> => {
  const row = rows[0]
  const pending = Rows.dbInt(row?.pending ?? 0)
  if (Either.isLeft(pending)) return Effect.fail(pending.left)
  const seq = Rows.dbInt(row?.seq ?? 0)
  if (Either.isLeft(seq)) return Effect.fail(seq.left)
  return Effect.succeed({ pending: pending.right, seq: seq.right })
}

/** Event sequence numbers in ascending order (the `MAX` of an empty log reads as 0). */
export const seqsOf = (rows: ReadonlyArray<Row>): Effect.Effect<Array<number>, ParseResult.ParseError> => {
  const out: Array<number> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const value = rows[i]!.seq
    if (value === null) {
      out[i] = 0
      continue
    }
    const seq = Rows.dbInt(value)
    if (Either.isLeft(seq)) return Effect.fail(seq.left)
    out[i] = seq.right
  }
  return Effect.succeed(out.sort((a, b) => a - b))
}

export const make = () => {
  const columns = {
    request: Rows.column<RequestEncoded>(4096, true),
    event: Rows.column<EventEncoded>(4096, true),
    approval: Rows.column<ApprovalEncoded>(4096, true),
    decision: Rows.column<DecisionEncoded>(0)
  }
  /** The encoded entities in one column of `rows` (checked by the store's codecs). */
  const parse = <I>(column: Rows.Column<I>, name: string) => (rows: ReadonlyArray<Row>) => {
    const out: Array<I> = new Array(rows.length)
    for (let i = 0; i < rows.length; i++) {
      const encoded = column.read(rows[i]![name])
      if (Either.isLeft(encoded)) {
        return Effect.fail(encoded.left)
      }
      out[i] = encoded.right as I
    }
    return Effect.succeed(out)
  }

  return {
    requestsOf: parse(columns.request, "request"),
    approvalsOf: parse(columns.approval, "approval"),
    decisionsOf: parse(columns.decision, "decision"),

    /** Events with their sequence numbers and hashes, from `SELECT seq, prev_hash, hash, event`. */
    eventsOf: (rows: ReadonlyArray<Row>) => {
      const out: Array<EventRow> = new Array(rows.length)
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!
        const seq = Rows.dbInt(row.seq)
        if (Either.isLeft(seq)) return Effect.fail(seq.left)
        const event = columns.event.read(row.event)
        if (Either.isLeft(event)) return Effect.fail(event.left)
        // checked by the store, which names anything that is not an event (or hashes not text)
        const { hash, prev_hash } = row
        out[i] = (hash === null
          ? { seq: seq.right, ...(event.right as EventEncoded) }
          : prev_hash === null
          ? { seq: seq.right, ...(event.right as EventEncoded), hash }
          : { seq: seq.right, ...(event.right as EventEncoded), prevHash: prev_hash, hash }) as EventRow
      }
      return Effect.succeed(out)
    },

    /** The rows of `SELECT seq, prev_hash, hash, event` and the filtered columns, as the chain covers them. */
    linksOf: (rows: ReadonlyArray<Row>) => {
      const out: Array<ChainLink> = new Array(rows.length)
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!
        const seq = Rows.dbInt(row.seq)
        if (Either.isLeft(seq)) return Effect.fail(seq.left)
        out[i] = {
          seq: seq.right,
          prevHash: textOrNot(row.prev_hash),
          hash: textOrNot(row.hash),
          text: String(row.event),
          columns: filteredColumns.map((column) => [column, row[column]] as const)
        }
      }
      return Effect.succeed(out)
    },

    requestRow: (request: RequestEncoded): Statements.RequestRow => ({
      ...copied(request, requestFields),
      sessionKey: request.toolCall.sessionKey,
      toolCallId: request.toolCall.id,
      request: columns.request.write(request)
    }),

    approvalRow: (approval: ApprovalEncoded): Statements.ApprovalRow => ({
      ...copied(approval, approvalFields),
      approval: columns.approval.write(approval)
    }),

    /**
     * `toolName` lower-cased, for the case-insensitive filter; its text hashed onto `prevHash`, the
     * hash of the event before it in the log. A decision event built by its constructor holds
     * only strings and finite numbers: its text reads back as it, so the cache keeps it and the
     * tailer's read of this process's own decisions parses nothing.
     */
    eventRow: (event: EventEncoded, prevHash: string | undefined): Statements.EventRow => {
      const text = columns.event.write(event, event instanceof BuiltEvent)
      return {
        ...copied(event, eventFields),
        toolName: event.toolName?.toLowerCase(),
        event: text,
        prevHash,
        hash: link(prevHash, text)
      }
    },

    decisionText: (decision: DecisionEncoded): string => columns.decision.write(decision)
  }
}

export type EntityRows = ReturnType<typeof make>
