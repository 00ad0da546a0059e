import { Effect, Either, Option, type ParseResult, Stream } from "effect"
import type {
  ApprovalEncoded,
  DecisionEncoded,
  Encoded,
  EventEncoded,
  EventRow,
  RequestEncoded
} from "../../ApprovalStore.js"
import { PersistenceError } from "../../ToolGateError.js"
import { link } from "./chain.js"
import { meets } from "./claims.js"

/**
 * The in-process driver: encoded rows in maps, as the SQL driver keeps them in tables. Each method
 * runs in one synchronous step, so each is atomic like a transaction; a continuation's failure
 * leaves the maps as they were (it runs before anything is changed). Each event is chained as it
 * is appended, over the text the SQL driver would store, so the rows a write returns (which the
 * live audit stream carries) have their links, as the SQL driver's do.
 */

type Result<K extends keyof Encoded> = Encoded[K] extends (...args: any) => Effect.Effect<infer A, any> ? A : never

const callKey = (sessionKey: string, toolCallId: string) => `${sessionKey}\u0000${toolCallId}`

/** Active at `at` (the SQL driver's `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > at)`). */
const activeAt = (row: ApprovalEncoded, at: number) =>
  row.revokedAt === undefined && (row.expiresAt === undefined || row.expiresAt > at)

/** Runs a step; a continuation's `ParseError` fails it as the operation's `PersistenceError`. */
const step = <A>(operation: string, f: () => Either.Either<A, ParseResult.ParseError>) =>
  Effect.suspend(() => {
    const result = f()
    return Either.isRight(result)
      ? Effect.succeed(result.right)
      : Effect.fail(new PersistenceError({ operation, cause: result.left }))
  })

export const makeMemoryDriver = (): Encoded => {
  const log: Array<EventRow> = []
  const requests = new Map<string, RequestEncoded>()
  const byCall = new Map<string, string>()
  const decisions = new Map<string, DecisionEncoded>()
  const approvals = new Map<string, ApprovalEncoded>()

  /** The numbers `events` will get. */
  const nextSeqs = (events: ReadonlyArray<EventEncoded>) => {
    const seqs: Array<number> = new Array(events.length)
    for (let i = 0; i < events.length; i++) seqs[i] = log.length + 1 + i
    return seqs
  }
  /** Appends `events`, numbered and chained: the rows kept, which reads return as they are. */
  const append = (events: ReadonlyArray<EventEncoded>): ReadonlyArray<EventRow> => {
    const rows: Array<EventRow> = new Array(events.length)
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!
      const prevHash = log[log.length - 1]?.hash
      const hash = link(prevHash, JSON.stringify(event))
      const row = (prevHash === undefined
        ? { seq: log.length + 1, ...event, hash }
        : { seq: log.length + 1, ...event, prevHash, hash }) as EventRow
      log.push(row)
      rows[i] = row
    }
    return rows
  }
  const requestOf = (sessionKey: string, toolCallId: string) => {
    const id = byCall.get(callKey(sessionKey, toolCallId))
    return id === undefined ? undefined : requests.get(id)
  }
  /** The text the SQL driver stores for an event: its encoded form, without its number and links. */
  const textOf = (row: EventRow) => {
    const { hash: _hash, prevHash: _prevHash, seq: _seq, ...event } = row
    return JSON.stringify(event)
  }
  const pending = () => [...requests.values()].filter((r) => r.status === "pending")
  const byExpiry = (a: RequestEncoded, b: RequestEncoded) => a.expiresAt - b.expiresAt

  return {
    append: (events, then) => Effect.sync(() => then(append(events))),
    insertRequest: (request, events, covering) =>
      step<Result<"insertRequest">>("createRequest", () => {
        const call = request.toolCall
        const existing = requestOf(call.sessionKey, call.id)
        if (existing !== undefined) return Either.right({ _tag: "Existing", request: existing } as const)
        const decided = decisions.get(callKey(call.sessionKey, call.id))
        if (decided !== undefined) return Either.right({ _tag: "Decided", decision: decided } as const)
        const tool = call.name.toLowerCase()
        const active = [...approvals.values()].filter((a) =>
          a.sessionKey === call.sessionKey && a.toolName === tool && activeAt(a, request.createdAt)
        )
        return Either.map(covering(active), (i) => {
          if (i >= 0) return { _tag: "Covered", grant: active[i]! } as const
          requests.set(request.requestId, request)
          byCall.set(callKey(call.sessionKey, call.id), request.requestId)
          return { _tag: "Inserted", events: append(events) } as const
        })
      }),
    claimRequest: (operation, requestId, claim, transition) =>
      step<Result<"claimRequest">>(operation, () => {
        const before = requests.get(requestId)
        if (before === undefined || !meets(claim, before)) {
          return Either.right({ _tag: "Refused", current: Option.fromNullable(before) } as const)
        }
        return Either.flatMap(transition(before), ({ events, grant, request }) =>
          Either.map(grant === undefined ? Either.right(undefined) : grant(nextSeqs(events)), (approval) => {
            const rows = append(events)
            requests.set(requestId, request)
            if (approval !== undefined) {
              approvals.set(approval.id, approval)
            }
            return { _tag: "Claimed", request, events: rows } as const
          }))
      }),
    consume: (requestId, at, events) =>
      Effect.sync(() => {
        const request = requests.get(requestId)
        if (request === undefined || request.status !== "approved" || request.consumedAt !== undefined) return undefined
        requests.set(requestId, { ...request, consumedAt: at })
        return append(events)
      }),
    insertDecision: (decision, events, reliedOn) =>
      Effect.sync(() => {
        const requested = requestOf(decision.sessionKey, decision.toolCallId)
        if (requested !== undefined) return { _tag: "Requested", request: requested } as const
        if (reliedOn !== undefined) {
          const grant = approvals.get(reliedOn)
          if (grant === undefined || !activeAt(grant, decision.at)) return { _tag: "GrantInactive" } as const
        }
        const key = callKey(decision.sessionKey, decision.toolCallId)
        const existing = decisions.get(key)
        if (existing !== undefined) return { _tag: "Existing", decision: existing } as const
        decisions.set(key, decision)
        return { _tag: "Inserted", events: append(events) } as const
      }),
    insertApproval: (events, approval) =>
      step("grant", () =>
        Either.map(approval(nextSeqs(events)), (row) => {
          const rows = append(events)
          approvals.set(row.id, row)
          return { approval: row, events: rows }
        })),
    revoke: (which, at, events, rewrite) =>
      step("id" in which ? "revoke" : "revokeWhere", () => {
        const before = "id" in which
          ? [approvals.get(which.id)].filter((a): a is ApprovalEncoded => a !== undefined && activeAt(a, at))
          : [...approvals.values()].filter((a) =>
            a.revokedAt === undefined &&
            (which.sessionKey === undefined || a.sessionKey === which.sessionKey) &&
            (which.toolName === undefined || a.toolName === which.toolName)
          )
        if ("id" in which && before.length === 0) return Either.right({ revoked: [], events: [] })
        return Either.map(rewrite(before, nextSeqs(events)), (revoked) => {
          const rows = append(events)
          for (const row of revoked) approvals.set(row.id, row)
          return { revoked, events: rows }
        })
      }),
    getRequest: (requestId) => Effect.sync(() => Option.fromNullable(requests.get(requestId))),
    findByToolCall: (sessionKey, toolCallId) =>
      Effect.sync(() => Option.fromNullable(requestOf(sessionKey, toolCallId))),
    findRecorded: (sessionKey, toolCallId) =>
      Effect.sync(() => {
        const request = requestOf(sessionKey, toolCallId)
        if (request !== undefined) return Option.some({ _tag: "Request", request } as const)
        const decision = decisions.get(callKey(sessionKey, toolCallId))
        return decision === undefined ? Option.none() : Option.some({ _tag: "Decision", decision } as const)
      }),
    listPending: (options) =>
      Effect.sync(() => {
        const out = pending()
          .filter((r) => options?.sessionKey === undefined || r.toolCall.sessionKey === options.sessionKey)
          .sort((a, b) => a.createdAt - b.createdAt)
        return options?.limit === undefined ? out : out.slice(0, options.limit)
      }),
    countPending: Effect.sync(() => ({ pending: pending().length, seq: log.length })),
    listDue: (at) => Effect.sync(() => pending().filter((r) => r.expiresAt <= at).sort(byExpiry)),
    listToWarn: (at, warnBeforeMs) =>
      Effect.sync(() =>
        pending().filter((r) =>
          r.warnedAt === undefined && r.expiresAt - Math.min(warnBeforeMs, (r.expiresAt - r.createdAt) / 2) <= at
        ).sort(byExpiry)
      ),
    sessionApprovals: (query) =>
      Effect.sync(() =>
        [...approvals.values()]
          .filter((a) =>
            (query?.id === undefined || a.id === query.id) &&
            (query?.sessionKey === undefined || a.sessionKey === query.sessionKey) &&
            (query?.afterSeq === undefined || a.seq > query.afterSeq) &&
            (query?.activeAt === undefined || activeAt(a, query.activeAt))
          )
          .sort((a, b) => a.seq - b.seq)
      ),
    events: (query) =>
      Effect.sync(() => {
        const limit = query.limit ?? Number.POSITIVE_INFINITY
        const found: Array<EventRow> = []
        for (let i = Math.max(0, query.afterSeq ?? 0); i < log.length && found.length < limit; i++) {
          const event = log[i]!
          if (
            (query.sessionKey === undefined || event.sessionKey === query.sessionKey ||
              event.sessionKey === undefined) &&
            (query.toolName === undefined || event.toolName?.toLowerCase() === query.toolName) &&
            (query.outcome === undefined || event.outcome === query.outcome) &&
            (query.since === undefined || event.at >= query.since) &&
            (query.until === undefined || event.at <= query.until)
          ) found.push(event)
        }
        return found
      }),
    lastSeq: Effect.sync(() => log.length),
    chainLinks: (afterSeq, limit) =>
      Effect.sync(() => {
        const from = Math.max(0, afterSeq)
        const to = Math.min(log.length, from + limit)
        const links = []
        for (let i = from; i < to; i++) {
          const row = log[i]!
          links.push({ seq: row.seq, prevHash: row.prevHash, hash: row.hash, text: textOf(row) })
        }
        return links
      }),
    changes: Stream.never,
    returnsWhatItWasGiven: true
  }
}
