/**
 * Authorization: a call is judged once and its judgement recorded under its tool-call id (a
 * decision, or the approval request it needs), then answered from the record (replay by call id,
 * `replay.ts`). `gate` waits for a human between two `authorize`s of the same call.
 */
import { Clock, Effect, Exit, Option } from "effect"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type { ApprovalStore, CreateResult, Recorded, RecordResult } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import type * as Decision from "../../Decision.js"
import * as PauseSignal from "../../PauseSignal.js"
import type { Policy } from "../../Policy.js"
import * as ToolCall from "../../ToolCall.js"
import {
  type CallAlreadyExecuted,
  PersistenceError,
  type RequestNotFound,
  type ToolDenied
} from "../../ToolGateError.js"
import * as CallIdentity from "../callIdentity.js"
import { sha256 } from "../canonical.js"
import * as Newest from "../newest.js"
import * as SessionIndex from "../sessionIndex.js"
import type { Allowed, CallError } from "./contract.js"
import { allowedBy, events, type Judgement } from "./decisions.js"
import type { Projection } from "./grants.js"
import * as Observe from "./observe.js"
import { fromDecision, isSameCall, type Replayed } from "./replay.js"
import { newRequest } from "./requests.js"
import { callKey, type Waiters } from "./waiters.js"

/** A store answer that found the call already on record (another writer recorded it first). */
type Found = Extract<CreateResult | RecordResult, { readonly _tag: "Existing" | "Decided" | "Requested" }>

/** The record the store found instead of writing: the call is answered from it (replay by call id). */
const foundRecord = (found: Found): Recorded =>
  "request" in found ? { _tag: "Request", request: found.request } : { _tag: "Decision", decision: found.decision }

// A decision and its record are retried when a session approval it relied on was revoked in
// between; more than a few revocations racing one call is a store that keeps changing under it.
const maxAttempts = 5

// How many of the calls it paused lately a gate remembers (see `asked`).
const askedCalls = 10_000

/** The authorization part of the gate. */
export const make = (options: {
  readonly store: ApprovalStore["Type"]
  readonly policy: Policy
  readonly projection: Projection
  readonly decodeCall: (input: ToolCall.ToolCallInput) => Effect.Effect<ToolCall.ToolCall, CallError>
  readonly judge: (call: ToolCall.ToolCall, now: number) => Effect.Effect<Judgement, PersistenceError>
  /** the judgement at once when it needs no effect (else `undefined`: run `judge`) */
  readonly judgeNow: (call: ToolCall.ToolCall, now: number) => Judgement | undefined
  /** whether hooks see judgements (then a replay, which judges nothing, must not reach them) */
  readonly hooked: boolean
  readonly judgeAgain: (
    call: ToolCall.ToolCall,
    decision: Decision.Decision,
    now: number
  ) => Effect.Effect<Judgement, PersistenceError>
  readonly replay: (call: ToolCall.ToolCall, args: string, record: Recorded, now: number) => Replayed
  readonly refuseReused: (call: ToolCall.ToolCall, args: string, now: number) => Effect.Effect<never, CallError>
  readonly fromRequest: (request: ApprovalRequest.ApprovalRequest, now: number) => Replayed
  readonly awaitDecision: (
    requestId: ApprovalRequest.RequestId
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError>
  /** `gate`'s wake-ups, by call */
  readonly watchCall: Waiters["watchCall"]
  readonly untilWokenOrDue: Waiters["untilWokenOrDue"]
  /** the log tailer's failure while it cannot read the log */
  readonly logUnreadable: () => PersistenceError | undefined
  readonly observed: Observe.Observed
}) => {
  const { decodeCall, fromRequest, judge, judgeAgain, judgeNow, policy, projection, refuseReused, replay, store } =
    options

  // The calls this gate paused lately, oldest first. Asked again, such a call is most often
  // answered by now, so its record is read before anything is written. Any other call that needs a
  // human is written at once: the request's insert finds a record the call has (a call paused by
  // another process, or before a restart, is answered from it all the same, one write later).
  const asked = new Set<string>()
  const keepAsked = Newest.keeper(asked, askedCalls)
  const remember = (call: ToolCall.ToolCall) => {
    const key = callKey(call.sessionKey, call.id)
    asked.delete(key)
    asked.add(key)
    keepAsked()
  }

  // The answers this gate committed, on their own, to calls it paused, until the call is asked
  // again: its record is taken from here instead of read. A resolved request changes no more but for
  // its spend, which `consume` decides in the store, so the replay of it is the replay of the read.
  // (An answer made inside a caller's transaction is not kept: that transaction may still roll back.)
  const answeredHere = new Map<string, ApprovalRequest.ApprovalRequest>()
  const keepAnswered = Newest.keeper(answeredHere, askedCalls)
  const answered = (request: ApprovalRequest.ApprovalRequest) => {
    const key = callKey(request.toolCall.sessionKey, request.toolCall.id)
    // a gate with hooks reads every record first (so that a replay never reaches them)
    if (options.hooked || !asked.has(key)) return
    answeredHere.set(key, request)
    keepAnswered()
  }

  /**
   * `authorize`: judges the call and records the judgement, or replays the record its id has.
   * Written as plain steps, not a generator: this is the path of every call. It runs in the one
   * step `Observe.authorize` takes (the time, the metric labels); an allowed call recorded without
   * a hitch is counted where its record is made, with no continuation of its own.
   */
  const authorize = (input: ToolCall.ToolCallInput, now: number, tally: Observe.Tally): Replayed => {
    const decoded = decodeCall(input)
    // a well-formed call is decoded at once, into an exit: no step to read it
    return Exit.isExit(decoded) && Exit.isSuccess(decoded)
      ? authorizeCall((decoded as Exit.Success<ToolCall.ToolCall, CallError>).value, now, tally)
      : Effect.flatMap(decoded, (call) => authorizeCall(call, now, tally))
  }

  const authorizeCall = (call: ToolCall.ToolCall, now: number, tally: Observe.Tally): Replayed => {
    const args = ToolCall.canonicalArgs(call.args)
    // With hooks the record is read first, so that a replay (which judges nothing) never
    // reaches them. Without, the call is judged first: a decision's or a request's insert finds
    // any record its id has (one store call, not two). A call this gate paused is read first
    // (`asked`): it is most often asked again once answered, and a read is cheaper than a write.
    if (options.hooked) {
      return Observe.countAtEnd(
        tally,
        Effect.flatMap(
          store.findRecorded(call.sessionKey, call.id),
          (found) =>
            Option.isSome(found)
              ? replay(call, args, found.value, now)
              : Effect.flatMap(judge(call, now), (judgement) => settle(call, args, judgement, now, 1, undefined))
        )
      )
    }
    const judgement = judgeNow(call, now)
    if (judgement === undefined) {
      return Observe.countAtEnd(
        tally,
        Effect.flatMap(judge(call, now), (judgement) => judged(call, args, judgement, now))
      )
    }
    // the allow hot path: the decision's record, counted by `settle`
    return judgement.decision._tag !== "RequireApproval"
      ? settle(call, args, judgement, now, 1, tally)
      : Observe.countAtEnd(tally, judged(call, args, judgement, now))
  }

  /**
   * A call judged without hooks: recorded, unless this gate paused it and its id is on record (its
   * answer from this gate, or read).
   */
  const judged = (call: ToolCall.ToolCall, args: string, judgement: Judgement, now: number): Replayed => {
    const key = callKey(call.sessionKey, call.id)
    if (judgement.decision._tag !== "RequireApproval" || !asked.has(key)) {
      return settle(call, args, judgement, now, 1, undefined)
    }
    const answer = answeredHere.get(key)
    if (answer !== undefined) {
      answeredHere.delete(key)
      return replay(call, args, { _tag: "Request", request: answer }, now)
    }
    return Effect.flatMap(
      store.findRecorded(call.sessionKey, call.id),
      (found) =>
        Option.isSome(found)
          ? replay(call, args, found.value, now)
          : settle(call, args, judgement, now, 1, undefined)
    )
  }

  /**
   * Records the decision (or the request it needs) and answers the call from the record. `tally`:
   * counts the answer (a decision recorded here at once, the rest when it ends); `undefined` when
   * the caller counts it.
   */
  const settle = (
    call: ToolCall.ToolCall,
    args: string,
    judgement: Judgement,
    now: number,
    attempt: number,
    tally: Observe.Tally
  ): Replayed => {
    const decision = judgement.decision
    if (attempt > maxAttempts) {
      return Effect.fail(
        new PersistenceError({
          operation: "authorize",
          cause: new Error("session approvals kept changing under the call")
        })
      )
    }
    if (decision._tag === "RequireApproval") {
      return Observe.countAtEnd(tally, request(call, args, decision, judgement.shadow, now, attempt))
    }
    const unreadable = options.logUnreadable()
    if (decision._tag === "Allow" && decision.via === "sessionApproval" && unreadable !== undefined) {
      // the approval may have been revoked in a part of the log this gate cannot read
      return Effect.fail(unreadable)
    }
    const recorded = store.recordDecision({
      sessionKey: call.sessionKey,
      toolCallId: call.id,
      toolName: ToolCall.normalizeName(call.name),
      argsDigest: sha256(args),
      callDigest: CallIdentity.callDigest(call, args),
      at: now,
      decision
    }, events(call, judgement, now, args))
    return Effect.flatMap(recorded, (result): Replayed => {
      switch (result._tag) {
        case "Created":
          Observe.countNow(tally, decision._tag === "Allow" ? "allow" : "deny")
          return fromDecision(call, decision)
        case "Existing":
        case "Requested":
          return Observe.countAtEnd(tally, replay(call, args, foundRecord(result), now))
        case "GrantInactive":
          // revoked (or lapsed on the store's clock) since this gate last read the log: judge the
          // call by the policy alone; the store then finds any other approval that still covers it
          return Effect.zipRight(
            Effect.flatMap(store.sessionApprovals({ id: result.sessionApprovalId }), projection.project),
            Effect.suspend(() =>
              settle(call, args, { decision: policy.evaluate(call), shadow: undefined }, now, attempt + 1, tally)
            )
          )
      }
    })
  }

  const request = (
    call: ToolCall.ToolCall,
    args: string,
    decision: Decision.RequireApproval,
    shadow: Decision.Decision | undefined,
    now: number,
    attempt: number
  ): Replayed => {
    const asked = newRequest(call, decision, now, args)
    // a candidate policy's disagreement commits with the request it belongs to
    const created = store.createRequest(
      asked,
      AuditEvent.approvalRequested(asked, args),
      shadow === undefined ? undefined : AuditEvent.policyShadow(call, decision, shadow, now, args, asked.requestId)
    )
    return Effect.flatMap(created, (result): Replayed => {
      switch (result._tag) {
        case "Created":
          remember(call)
          return fromRequest(result.request, now)
        case "Existing":
          remember(call)
          return replay(call, args, foundRecord(result), now)
        case "Decided":
          return replay(call, args, foundRecord(result), now)
        case "Covered":
          // approved for the session by a process whose answer this gate has not read yet
          return Effect.zipRight(
            projection.project([result.grant]),
            Effect.flatMap(
              judgeAgain(call, allowedBy(decision, result.grant), now),
              (judged) => settle(call, args, judged, now, attempt + 1, undefined)
            )
          )
      }
    })
  }

  /** `authorize` in its span, counted in the gate's metrics. */
  const observedAuthorize = (input: ToolCall.ToolCallInput): Replayed =>
    Observe.authorize(options.observed, input, (now, tally) => authorize(input, now, tally))

  /**
   * `gate`: replay by call id with a wait in between. `authorize` pauses on a new request; once it
   * is answered, `authorize` again replays the answered request for the same id.
   */
  const gate = <A, E, R>(input: ToolCall.ToolCallInput, run: (allowed: Allowed) => Effect.Effect<A, E, R>) =>
    Observe.gate(
      options.observed,
      input,
      Observe.whenTraced(
        () => untilDecidedTraced(input),
        () => Effect.flatMap(decodeCall(input), (call) => untilDecided(input, call))
      ),
      run
    )

  /**
   * Untraced, a call `authorize` pauses waits on its call (session and tool-call id), registered
   * before each later `authorize` of it, so that an answer committed after that `authorize` read
   * the record still wakes it. A wake says only "read again": what the call comes to is what
   * `authorize` then reads from the store, so between the answer's commit and the run there is one
   * read of the record (and the approval's spend), none of the request itself. A call that will
   * likely wait (judged to need a human, and not answered by this gate) registers before its first
   * `authorize`, so the one that pauses it is the only one before the wait; any other call
   * registers only once it paused (an allowed call registers nothing).
   */
  const untilDecided = (
    input: ToolCall.ToolCallInput,
    call: ToolCall.ToolCall
  ): Effect.Effect<Allowed, ToolDenied | CallAlreadyExecuted | CallError> =>
    Effect.flatMap(Clock.currentTimeMillis, (at) =>
      willWait(call, at)
        ? untilWoken(input, call)
        : Effect.flatMap(
          Observe.authorize(options.observed, input, (now, tally) => authorizeCall(call, now, tally)),
          (result) => PauseSignal.isPauseSignal(result) ? untilWoken(input, call) : Effect.succeed(result)
        ))

  /**
   * Whether a call needs a human and this gate has not answered it: judged now, or by the policy
   * alone when that takes an effect (hooks; its session's approvals not read yet).
   */
  const willWait = (call: ToolCall.ToolCall, now: number) =>
    !answeredHere.has(callKey(call.sessionKey, call.id)) &&
    (judgeNow(call, now)?.decision ?? policy.evaluate(call))._tag === "RequireApproval"

  const untilWoken = (
    input: ToolCall.ToolCallInput,
    call: ToolCall.ToolCall
  ): Effect.Effect<Allowed, ToolDenied | CallAlreadyExecuted | CallError> =>
    Effect.flatMap(
      options.watchCall(call.sessionKey, call.id, (woken) =>
        Effect.flatMap(
          Observe.authorize(options.observed, input, (now, tally) => authorizeCall(call, now, tally)),
          (result) =>
            PauseSignal.isPauseSignal(result)
              ? Effect.as(options.untilWokenOrDue(woken, result), undefined)
              : Effect.succeed(result)
        )),
      (allowed) => allowed === undefined ? untilWoken(input, call) : Effect.succeed(allowed)
    )

  /**
   * Traced, the wait is `awaitDecision` in its own span, which names what the request came to: it
   * reads the request before waiting and after the wake.
   */
  const untilDecidedTraced = (
    input: ToolCall.ToolCallInput
  ): Effect.Effect<Allowed, ToolDenied | CallAlreadyExecuted | CallError> =>
    Effect.flatMap(
      observedAuthorize(input),
      (result) =>
        PauseSignal.isPauseSignal(result)
          ? Effect.zipRight(
            // the request was just created or found, so only a store failure can end the wait early
            options.awaitDecision(result.requestId).pipe(Effect.catchTag("RequestNotFound", Effect.die)),
            Effect.suspend(() => untilDecidedTraced(input))
          )
          : Effect.succeed(result)
    )

  /** `createApprovalRequest`: the request a `RequireApproval` decision needs, found or created. */
  const createApprovalRequest = (decision: Decision.Decision, input: ToolCall.ToolCallInput) =>
    Effect.gen(function*() {
      const call = yield* decodeCall(input)
      if (decision._tag !== "RequireApproval") return undefined
      const now = yield* Clock.currentTimeMillis
      if (SessionIndex.lookup(yield* projection.grantsOf(call.sessionKey), call, now) !== undefined) return undefined
      const args = ToolCall.canonicalArgs(call.args)
      const found = (record: Recorded) =>
        !isSameCall(call, record)
          ? refuseReused(call, args, now)
          : Effect.succeed(record._tag === "Request" ? record.request : undefined)
      const recorded = yield* store.findRecorded(call.sessionKey, call.id)
      if (Option.isSome(recorded)) return yield* found(recorded.value)
      const asked = newRequest(call, decision, now, args)
      const result = yield* store.createRequest(asked, AuditEvent.approvalRequested(asked, args))
      switch (result._tag) {
        case "Created":
          return result.request
        case "Existing":
        case "Decided":
          return yield* found(foundRecord(result))
        case "Covered":
          yield* projection.project([result.grant])
          return undefined
      }
    })

  return { authorize: observedAuthorize, gate, createApprovalRequest, answered } as const
}
