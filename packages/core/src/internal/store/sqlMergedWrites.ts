import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Option, type ParseResult } from "effect"
import type {
  ApprovalEncoded,
  Claim,
  DecisionEncoded,
  Encoded,
  EventEncoded,
  EventRow,
  RequestEncoded,
  Transition
} from "../../ApprovalStore.js"
import type * as Batcher from "../sqlBatcher.js"
import type { EntityRows } from "./sqlEntityRows.js"
import { first, fromEither } from "./sqlEntityRows.js"
import type * as Statements from "./sqlStatements.js"

/**
 * The SQL driver's calls merged across a batch (`Batcher.Group`): the calls of one kind in a batch
 * run as one body, with one statement for all of them where each call alone would run its own (a
 * call that runs alone takes the single-row statements). The first call of a batch for one call
 * id or request goes first; the later ones meet what it left, as they would had each run in a
 * transaction of its own after it.
 */

type Failure = SqlError | ParseResult.ParseError

/** Inputs of a batch: the first input for each key, the later ones told apart. */
const firstsOf = <I>(inputs: ReadonlyArray<I>, sessionKey: (input: I) => string, id: (input: I) => string) => {
  const seen = new Map<string, Set<string>>()
  return new Set(inputs.filter((input) => {
    const ids = seen.get(sessionKey(input)) ?? new Set()
    seen.set(sessionKey(input), ids)
    return ids.has(id(input)) ? false : (ids.add(id(input)), true)
  }))
}

export interface CallKey {
  readonly sessionKey: string
  readonly toolCallId: string
}

export interface NewRequest {
  readonly request: RequestEncoded
  readonly events: ReadonlyArray<EventEncoded>
  readonly covering: Parameters<Encoded["insertRequest"]>[2]
  /** the call's `ToolCall.argsDigest` */
  readonly argsDigest: string
}

/** A request written with its events: a new one, or a claimed one rewritten. */
export interface RequestWrite {
  readonly events: ReadonlyArray<EventEncoded>
  readonly request: RequestEncoded
}

type ClaimResult = Effect.Effect.Success<ReturnType<Encoded["claimRequest"]>>

export interface ClaimInput {
  readonly requestId: string
  readonly claim: Claim
  readonly transition: Parameters<Encoded["claimRequest"]>[3]
}

export const make = (options: {
  readonly q: Statements.Statements
  readonly clock: "database" | "caller"
  /** PostgreSQL: the claims of a batch settled before its transaction (`Batcher.Group.ahead`) */
  readonly claimsAhead?:
    | ((kind: Claim["_tag"]) => NonNullable<Batcher.Group<ClaimInput, ClaimResult, Failure>["ahead"]>)
    | undefined
  readonly rows: EntityRows
  readonly appendEvents: (events: ReadonlyArray<EventEncoded>) => Effect.Effect<ReadonlyArray<EventRow>, Failure>
  readonly appendEach: <W extends { readonly events: ReadonlyArray<EventEncoded> }>(
    writes: ReadonlyArray<W>
  ) => Effect.Effect<Map<W, ReadonlyArray<EventRow>>, Failure>
  /** appends the events of claimed requests and rewrites the requests (one statement where it can) */
  readonly appendRewriting: <
    W extends RequestWrite
  >(
    writes: ReadonlyArray<W>
  ) => Effect.Effect<Map<W, ReadonlyArray<EventRow>>, Failure>
  /** inserts new requests with their events; `None` when a request id was taken */
  readonly insertRequests: <
    W extends RequestWrite
  >(
    writes: ReadonlyArray<W>
  ) => Effect.Effect<Option.Option<Map<W, ReadonlyArray<EventRow>>>, Failure>
  /**
   * one new request written in one statement when nothing stands in its way: `None` when nothing
   * was written, `Some(None)` when its request id was taken
   */
  readonly insertRequestIfFree: (
    write: NewRequest
  ) => Effect.Effect<Option.Option<Option.Option<ReadonlyArray<EventRow>>>, Failure>
  /** a claim folded into its write when the request's text is known (`None`: nothing was written) */
  readonly claimKnown: (
    input: ClaimInput
  ) => Effect.Effect<Option.Option<{ readonly claimed: Transition; readonly events: ReadonlyArray<EventRow> }>, Failure>
  readonly numbersOf: (rows: ReadonlyArray<EventRow>) => ReadonlyArray<number>
  /**
   * SQLite: whether the running transaction is one of the batcher's (`BEGIN IMMEDIATE`: it holds
   * the write lock), in which a claim is a read; in a caller's own transaction it stays an update,
   * which takes the lock before the row is read. PostgreSQL: never (an update locks the row).
   */
  readonly holdsWriteLock: Effect.Effect<boolean>
}) => {
  const { appendEach, appendEvents, appendRewriting, insertRequests, numbersOf, q } = options
  const { approvalRow, approvalsOf, decisionsOf, requestsOf } = options.rows

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

  type CallRecord = Effect.Effect.Success<ReturnType<typeof recordedByCall>>

  /** `recordedByCall` for the call ids of a batch's reads, in one statement. */
  const recordedCalls: Batcher.Group<CallKey, CallRecord, Failure> = {
    write: false,
    run: (calls) =>
      calls.length === 1
        ? Effect.map(recordedByCall(calls[0]!.sessionKey, calls[0]!.toolCallId), (found) => [found])
        : Effect.flatMap(q.recordedByCalls(calls), (rows) => {
          const bySession = new Map<unknown, Map<unknown, Array<Record<string, unknown>>>>()
          for (const row of rows) {
            const ids = bySession.get(row.session_key) ?? new Map()
            bySession.set(row.session_key, ids)
            ids.set(row.tool_call_id, [...(ids.get(row.tool_call_id) ?? []), row])
          }
          return Effect.forEach(
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
    run: (inputs): Effect.Effect<ReadonlyArray<DecisionInsert>, Failure> => {
      if (inputs.length === 1) {
        const { events, row } = inputs[0]!
        return Effect.flatMap(q.insertDecisionUnrequested(row), (rows) =>
          rows.length > 0
            ? Effect.map(appendEvents(events), (written) => [{ _tag: "Inserted", events: written }])
            : Effect.map(foundInstead(row.sessionKey, row.toolCallId), (found) => [found]))
      }
      const firsts = firstsOf(inputs, (input) => input.row.sessionKey, (input) => input.row.toolCallId)
      return Effect.flatMap(q.insertDecisionsUnrequested(Array.from(firsts, (input) => input.row)), (rows) => {
        const inserted = new Map<string, Set<unknown>>()
        for (const row of rows) {
          const key = String(row.session_key)
          inserted.set(key, (inserted.get(key) ?? new Set()).add(row.tool_call_id))
        }
        const made = inputs.filter((input) =>
          firsts.has(input) && inserted.get(input.row.sessionKey)?.has(input.row.toolCallId) === true
        )
        return Effect.flatMap(appendEach(made), (rowsOf) =>
          Effect.forEach(inputs, (input) => {
            const events = rowsOf.get(input)
            return events === undefined
              ? foundInstead(input.row.sessionKey, input.row.toolCallId)
              : Effect.succeed<DecisionInsert>({ _tag: "Inserted", events })
          }))
      })
    }
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
    // spends made `single` append no events: merged, they are `consumeMany` alone
    single: true,
    run: (inputs): Effect.Effect<ReadonlyArray<ReadonlyArray<EventRow> | undefined>, Failure> => {
      if (inputs.length === 1) {
        const { at, events, requestId } = inputs[0]!
        return Effect.flatMap(
          q.consume({ requestId, at }),
          (rows): Effect.Effect<ReadonlyArray<ReadonlyArray<EventRow> | undefined>, Failure> =>
            rows.length === 0 ? Effect.succeed([undefined]) : Effect.map(appendEvents(events), (written) => [written])
        )
      }
      const firsts = firstsOf(inputs, () => "", (input) => input.requestId)
      return Effect.flatMap(q.consumeMany(Array.from(firsts)), (rows) => {
        const spent = new Set(rows.map((row) => row.request_id))
        return Effect.map(
          appendEach(inputs.filter((input) => firsts.has(input) && spent.has(input.requestId))),
          (rowsOf) => inputs.map((input) => rowsOf.get(input))
        )
      })
    }
  }

  type RequestInsert = Effect.Effect.Success<ReturnType<Encoded["insertRequest"]>>
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
    run: (inputs) => inputs.length === 1 ? newRequest(inputs[0]!) : newRequestsMany(inputs)
  }

  /** A batch's one new request: in one statement when nothing stands in its way, else after its reads. */
  const newRequest = (input: NewRequest): Effect.Effect<ReadonlyArray<RequestInsert>, Failure> =>
    Effect.flatMap(options.insertRequestIfFree(input), (free) => {
      if (Option.isSome(free)) {
        return Option.isNone(free.value)
          ? reuseOf(input.request.requestId)
          : Effect.succeed([{ _tag: "Inserted", events: free.value.value }])
      }
      const call = input.request.toolCall
      const read = q.recordedOrCovering({
        sessionKey: call.sessionKey,
        toolCallId: call.id,
        toolName: call.name.toLowerCase(),
        at: input.request.createdAt
      })
      return Effect.flatMap(
        Effect.flatMap(read, (rows) => foundIn(rows, input.covering)),
        (found) => found !== undefined ? Effect.succeed([found]) : insertOne(input)
      )
    })

  /** What stands in a request's way in one read of its call id's records and its session's approvals. */
  const foundIn = (rows: ReadonlyArray<Record<string, unknown>>, covering: NewRequest["covering"]) =>
    Effect.flatMap(
      recordOf(rows.filter((row) => row.approval === null)),
      (recorded) =>
        Effect.flatMap(
          Option.isSome(recorded) ? Effect.succeed([]) : approvalsOf(rows.filter((row) => row.approval !== null)),
          (active) => foundFor(recorded, active, covering)
        )
    )

  /** One new request inserted (its id already taken: a defect). */
  const insertOne = (input: NewRequest): Effect.Effect<ReadonlyArray<RequestInsert>, Failure> =>
    Effect.flatMap(insertRequests([input]), (inserted) =>
      Option.isNone(inserted)
        ? reuseOf(input.request.requestId)
        : Effect.succeed([{ _tag: "Inserted", events: inserted.value.get(input)! }]))

  /**
   * A batch's new requests: one read of their call ids' records, one of the session approvals that
   * may cover them, one insert for the events of those still to be made, one for the requests.
   */
  const newRequestsMany = (inputs: ReadonlyArray<NewRequest>): Effect.Effect<ReadonlyArray<RequestInsert>, Failure> => {
    const callOf = (input: NewRequest) => input.request.toolCall
    const firsts = firstsOf(inputs, (input) => callOf(input).sessionKey, (input) => callOf(input).id)
    const recordedAll = recordedCalls.run(
      inputs.map((input) => ({ sessionKey: callOf(input).sessionKey, toolCallId: callOf(input).id }))
    )
    const earliest = Math.min(...inputs.map((input) => input.request.createdAt))
    const grantsAll = q.activeGrantsOf(inputs.map((input) => ({
      sessionKey: callOf(input).sessionKey,
      toolName: callOf(input).name.toLowerCase(),
      at: earliest
    })))
    /** What stands in the way of the `i`th input's request (a first of its call id): `undefined` when nothing. */
    const foundOf = (
      recorded: ReadonlyArray<CallRecord>,
      grantRows: Effect.Effect.Success<ReturnType<typeof q.activeGrantsOf>>,
      input: NewRequest,
      i: number
    ) => {
      const call = callOf(input)
      // active at the request's own time (one read served the batch from its earliest)
      const rows = grantRows.filter((row) =>
        row.session_key === call.sessionKey && row.tool_name === call.name.toLowerCase() &&
        (options.clock === "database" || row.expires_at === null ||
          Number(row.expires_at) > input.request.createdAt)
      )
      return Effect.flatMap(approvalsOf(rows), (active) => foundFor(recorded[i]!, active, input.covering))
    }
    return Effect.flatMap(recordedAll, (recorded) =>
      Effect.flatMap(grantsAll, (grantRows) => {
        const firstIndices = inputs.flatMap((input, i) => firsts.has(input) ? [i] : [])
        return Effect.flatMap(
          Effect.forEach(firstIndices, (i) => foundOf(recorded, grantRows, inputs[i]!, i)),
          (founds) => {
            const results = new Map<NewRequest, RequestInsert>()
            const toMake: Array<NewRequest> = []
            founds.forEach((found, k) => {
              const input = inputs[firstIndices[k]!]!
              if (found === undefined) toMake.push(input)
              else results.set(input, found)
            })
            return Effect.flatMap(insertRequests(toMake), (inserted) => {
              // writers are serialized and the batch's call ids were read above: only a request id
              // already taken is left (the batch then runs call by call, and that call alone dies)
              if (Option.isNone(inserted)) return reuseOf("of this batch")
              for (const [input, events] of inserted.value) results.set(input, { _tag: "Inserted", events })
              return Effect.forEach(inputs, (input) => {
                const result = results.get(input)
                return result !== undefined ? Effect.succeed(result) : Effect.flatMap(
                  recordedByCall(callOf(input).sessionKey, callOf(input).id),
                  (found) => Effect.map(foundFor(found, [], () => Either.right(-1)), (met) => met!)
                )
              })
            })
          }
        )
      }))
  }

  const refused = (requestId: string) =>
    Effect.map(
      Effect.flatMap(q.requestById({ requestId }), requestsOf),
      (rows): ClaimResult => ({ _tag: "Refused", current: first(rows) })
    )

  /**
   * Transitions of pending requests under one kind of claim, merged across a batch: one statement
   * claims them all (each at its own time; the first claim of a request in the batch goes first,
   * the others then find it as that one left it; on SQLite a read, the batch holding the write
   * lock), one insert for their events, one update for the rewritten rows, one insert for the
   * session approvals they grant.
   */
  const claimsOf = (kind: Claim["_tag"]): Batcher.Group<ClaimInput, ClaimResult, Failure> => ({
    write: true,
    ahead: options.claimsAhead?.(kind),
    run: (inputs) => inputs.length === 1 ? claimOne(inputs[0]!) : claimMany(kind, inputs)
  })
  const claims = {
    Unwarned: claimsOf("Unwarned"),
    BeforeDeadline: claimsOf("BeforeDeadline"),
    PastDeadline: claimsOf("PastDeadline")
  }

  /** A batch's one claim: folded into its write when this process knows the row, else on its own statement. */
  const claimOne = (input: ClaimInput): Effect.Effect<ReadonlyArray<ClaimResult>, Failure> =>
    Effect.flatMap(
      options.claimKnown(input),
      (known) =>
        Effect.flatMap(Option.isSome(known) ? Effect.succeed(known.value) : claimAlone(input), (made) => {
          if (made === undefined) return Effect.map(refused(input.requestId), (result) => [result])
          const { claimed, events: rows } = made
          const results: ReadonlyArray<ClaimResult> = [{ _tag: "Claimed", request: claimed.request, events: rows }]
          return claimed.grant === undefined ? Effect.succeed(results) : Effect.as(
            Effect.flatMap(fromEither(claimed.grant(numbersOf(rows))), (grant) => q.insertApproval(approvalRow(grant))),
            results
          )
        })
    )

  /** A batch's claims of one kind in one statement, their events in one insert, their grants in another. */
  const claimMany = (
    kind: Claim["_tag"],
    inputs: ReadonlyArray<ClaimInput>
  ): Effect.Effect<ReadonlyArray<ClaimResult>, Failure> => {
    const firsts = firstsOf(inputs, () => "", (input) => input.requestId)
    const claimedRows = q.claimMany[kind](
      Array.from(firsts, (input) => ({ requestId: input.requestId, at: "at" in input.claim ? input.claim.at : 0 }))
    )
    return Effect.flatMap(claimedRows, (rows) =>
      Effect.flatMap(requestsOf(rows), (befores) => {
        const beforeOf = new Map(rows.map((row, i) => [row.request_id, befores[i]!]))
        const claimed: Array<Transition & { readonly input: ClaimInput }> = []
        for (const input of inputs) {
          const before = firsts.has(input) ? beforeOf.get(input.requestId) : undefined
          if (before === undefined) continue
          const transition = input.transition(before)
          if (Either.isLeft(transition)) return Effect.fail(transition.left)
          claimed.push({ input, ...transition.right })
        }
        return Effect.flatMap(appendRewriting(claimed), (rowsOf) => {
          const afters = new Map<ClaimInput, ClaimResult>()
          const grants: Array<ApprovalEncoded> = []
          for (const [{ grant, input, request }, events] of rowsOf) {
            afters.set(input, { _tag: "Claimed", request, events })
            if (grant === undefined) continue
            const encoded = grant(numbersOf(events))
            if (Either.isLeft(encoded)) return Effect.fail(encoded.left)
            grants.push(encoded.right)
          }
          const results = Effect.forEach(inputs, (input) => {
            const after = afters.get(input)
            return after === undefined ? refused(input.requestId) : Effect.succeed(after)
          })
          return grants.length === 0 ? results : Effect.zipRight(q.insertApprovals(grants.map(approvalRow)), results)
        })
      }))
  }

  /** One claim on its own statement, then its transition written; `undefined` when refused. */
  const claimAlone = ({ claim, requestId, transition }: ClaimInput) =>
    Effect.flatMap(Effect.flatMap(claimOf(requestId, claim), requestsOf), ([before]) => {
      if (before === undefined) return Effect.succeed(undefined)
      return Effect.flatMap(
        fromEither(transition(before)),
        (claimed) => Effect.map(appendRewriting([claimed]), (rowsOf) => ({ claimed, events: rowsOf.get(claimed)! }))
      )
    })

  const claimOf = (requestId: string, claim: Claim) =>
    Effect.flatMap(
      options.holdsWriteLock,
      (held) =>
        held
          ? q.claimMany[claim._tag]([{ requestId, at: "at" in claim ? claim.at : 0 }])
          : claimByUpdate(requestId, claim)
    )

  const claimByUpdate = (requestId: string, claim: Claim) => {
    switch (claim._tag) {
      case "Unwarned":
        return q.claimUnwarned({ requestId })
      case "BeforeDeadline":
        return q.claimBeforeDeadline({ requestId, at: claim.at })
      case "PastDeadline":
        return q.claimPastDeadline({ requestId, at: claim.at })
    }
  }

  return { claims, newRequests, recordedByCall, recordedCalls, spends, unrequestedDecisions }
}
