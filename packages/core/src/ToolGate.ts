/**
 * The gate between an agent and its tools: decides allow / deny / requireApproval for every tool
 * call, pauses with a `PauseSignal` when a human must answer, takes the answer from any process
 * that shares the store, and streams every decision to auditors.
 *
 * @example
 * import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
 * import { Effect, Layer } from "effect"
 *
 * const policy = Policy.unsafeMake({ deny: ["rm"], requireApproval: ["bash"] })
 * const GateLive = ToolGate.layer({ policy }).pipe(Layer.provide(ApprovalStore.layerMemory))
 *
 * const program = Effect.gen(function*() {
 *   const gate = yield* ToolGate.ToolGate
 *   return yield* gate.evaluate({ id: "c1", name: "ls", sessionKey: "s1" })
 * })
 *
 * Effect.runPromise(program.pipe(Effect.provide(GateLive)))
 *
 * @since 0.1.0
 */
import {
  Chunk,
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  Either,
  Layer,
  Option,
  PubSub,
  Queue,
  Ref,
  Schedule,
  Schema,
  Stream
} from "effect"
import type * as Scope from "effect/Scope"
import * as ApprovalRequest from "./ApprovalRequest.js"
import { ApprovalStore, layerMemory as storeMemory, type NewSessionApproval, type Recorded } from "./ApprovalStore.js"
import * as AuditEvent from "./AuditEvent.js"
import * as Decision from "./Decision.js"
import * as CallIdentity from "./internal/callIdentity.js"
import { sha256 } from "./internal/canonical.js"
import type { Allowed, CallError, Options, RespondError } from "./internal/gate/contract.js"
import * as SessionIndex from "./internal/sessionIndex.js"
import * as Limits from "./Limits.js"
import * as PauseSignal from "./PauseSignal.js"
import type { Policy } from "./Policy.js"
import * as SessionApproval from "./SessionApproval.js"
import * as ToolCall from "./ToolCall.js"
import {
  AlreadyResolved,
  CallAlreadyExecuted,
  type InvalidDuration,
  InvalidResponse,
  InvalidToolCall,
  PersistenceError,
  problemsOf,
  RequestExpired,
  RequestNotFound,
  RequestPending,
  SessionApprovalNotFound,
  ToolDenied
} from "./ToolGateError.js"

export type { Allowed, CallError, Hooks, Options, RespondError } from "./internal/gate/contract.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly policy: Policy
  readonly shadowPolicy: Policy | undefined
  /** The decision for a call (policy, then session approvals). Its only side effect is the audit event. */
  readonly evaluate: (call: ToolCall.ToolCallInput) => Effect.Effect<Decision.Decision, CallError>
  /**
   * `Allowed`, or a `PauseSignal` after durably creating (or finding) the approval request;
   * fails with `ToolDenied` on deny. Asking again for the same call id returns the recorded outcome.
   */
  readonly authorize: (
    call: ToolCall.ToolCallInput
  ) => Effect.Effect<Allowed | PauseSignal.PauseSignal, ToolDenied | CallAlreadyExecuted | CallError>
  /** Runs `run` once allowed, waiting (up to the TTL) for a human when approval is needed. */
  readonly gate: <A, E, R>(
    call: ToolCall.ToolCallInput,
    run: (allowed: Allowed) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | ToolDenied | CallAlreadyExecuted | CallError, R>
  /** Answers a request exactly once; the same answer again returns the first resolution. */
  readonly respond: (
    requestId: string,
    response: Schema.Schema.Encoded<typeof ApprovalRequest.ApprovalResponse>
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RespondError>
  /** Waits until the request is answered or expires (timeout means deny), then returns it. */
  readonly awaitDecision: (
    requestId: string
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError>
  /** Reads a resolved request now; fails with `RequestPending` while nobody has answered. */
  readonly resume: (
    requestId: string
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | RequestPending | PersistenceError>
  readonly getRequest: (
    requestId: string
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError>
  /** Pending requests, oldest first, of one session or all (none for a key no call can have). */
  readonly pending: (
    options?: { readonly sessionKey?: string | undefined }
  ) => Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, PersistenceError>
  /** Gives a pending request `ttl` more time from now. */
  readonly extend: (
    requestId: string,
    ttl: Duration.DurationInput,
    actor?: string
  ) => Effect.Effect<
    ApprovalRequest.ApprovalRequest,
    RequestNotFound | RequestExpired | AlreadyResolved | InvalidDuration | PersistenceError
  >
  /** One sweep: expires overdue requests and emits due warnings. Runs in the background too. */
  readonly sweep: Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, PersistenceError>
  /** Whether the session holds a tool-wide approval for the tool (or, given `call`, one covering it). */
  readonly hasApproval: (
    toolId: string,
    sessionKey: string,
    call?: { readonly args?: ToolCall.ToolArgs; readonly workingDirectory?: string }
  ) => Effect.Effect<boolean>
  /** `true` grants the session a tool-wide approval; `false` revokes the session's approvals of the tool. */
  readonly recordApproval: (
    toolId: string,
    sessionKey: string,
    approved: boolean,
    options?: { readonly grantedBy?: string; readonly ttl?: Duration.DurationInput }
  ) => Effect.Effect<void, InvalidDuration | InvalidToolCall | PersistenceError>
  /** Revokes the session approvals of one session, or of all sessions; returns how many. */
  readonly clearApprovals: (
    sessionKey?: string,
    actor?: string
  ) => Effect.Effect<number, InvalidToolCall | PersistenceError>
  /** Active session approvals of one session or all. */
  readonly sessionApprovals: (
    sessionKey?: string
  ) => Effect.Effect<ReadonlyArray<SessionApproval.SessionApproval>, PersistenceError>
  readonly revokeApproval: (
    id: string,
    actor?: string
  ) => Effect.Effect<SessionApproval.SessionApproval, SessionApprovalNotFound | PersistenceError>
  /**
   * The request for a `RequireApproval` decision (created, or found for the same call id);
   * `undefined` when the decision needs no approval or a session approval already covers the call.
   */
  readonly createApprovalRequest: (
    decision: Decision.Decision,
    call: ToolCall.ToolCallInput
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest | undefined, CallError>
  /** Live events, in sequence order, from the moment the stream is run. */
  readonly audit: Stream.Stream<AuditEvent.AuditEvent>
  /** Durable replay of the log from `afterSeq`, then the live tail: nothing missed, nothing twice. */
  readonly auditLog: (query?: AuditEvent.AuditQuery) => Stream.Stream<AuditEvent.AuditEvent, PersistenceError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class ToolGate extends Context.Tag("@tool-gate/core/ToolGate")<ToolGate, Service>() {}

const decodeResponse = Schema.decodeUnknownEither(ApprovalRequest.ApprovalResponse, { errors: "all" })

const newId = (prefix: string): string => `${prefix}_${crypto.randomUUID()}`

// Events after which a waiter must look again: its request was answered, expired or extended.
const WAKING_EVENTS: ReadonlySet<AuditEvent.EventType> = new Set([
  "approval.resolved",
  "approval.expired",
  "approval.extended"
])

const PROJECTION_EVENTS: ReadonlySet<AuditEvent.EventType> = new Set([
  "approval.resolved",
  "session.granted",
  "session.revoked",
  "approvals.cleared"
])

const deniedError = (request: ApprovalRequest.ApprovalRequest): ToolDenied =>
  new ToolDenied({
    toolCallId: request.toolCall.id,
    toolName: request.toolCall.name,
    sessionKey: request.toolCall.sessionKey,
    outcome: request.status === "expired" ? "expired" : "denied",
    reason: request.resolution?.reason ?? (request.status === "expired" ? "approval timed out" : "denied"),
    rule: request.rule.id,
    requestId: request.requestId
  })

/** A requireApproval decision turned into an allow by a session approval that covers the call. */
const allowedBy = (decision: Decision.RequireApproval, grant: SessionApproval.SessionApproval): Decision.Allow => ({
  _tag: "Allow",
  via: "sessionApproval",
  rule: decision.rule,
  sessionApprovalId: grant.id,
  policyVersion: decision.policyVersion
})

// A prompt is read by people: it quotes this much of the arguments (the request keeps them whole).
const promptArgsLength = 500

const quoted = (args: string): string =>
  args.length <= promptArgsLength
    ? args
    : `${args.slice(0, promptArgsLength)}… (${args.length - promptArgsLength} more characters)`

/**
 * Builds the gate over the `ApprovalStore` in context. Background work (the log tailer that wakes
 * waiters and keeps the session-approval projection fresh, and the expiry sweeper) lives in the
 * given scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Service, PersistenceError, ApprovalStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* ApprovalStore
    const policy = options.policy
    const shadowPolicy = options.shadowPolicy
    const hooks = options.hooks ?? {}
    const sweepInterval = Duration.decode(options.sweepInterval ?? "1 second")
    const warnBeforeMs = Duration.toMillis(options.warnBefore ?? "1 minute")

    // Projection of session approvals: loaded from the store, written through, caught up from the log.
    const startSeq = yield* store.lastSeq
    const initial = yield* store.sessionApprovals({ activeAt: yield* Clock.currentTimeMillis })
    const index = yield* Ref.make(SessionIndex.apply({ seq: startSeq, sessions: new Map() }, initial))
    const project = (rows: ReadonlyArray<SessionApproval.SessionApproval>) =>
      Ref.update(index, (current) => SessionIndex.apply(current, rows))

    const hub = yield* PubSub.unbounded<AuditEvent.AuditEvent>()
    const waiters = new Map<string, Set<Deferred.Deferred<void>>>()

    // limits out of range are a programming error in the gate's options, not a runtime condition
    const limits = yield* Effect.orDie(Limits.callLimits(options.limits))
    const decodeCall = (input: ToolCall.ToolCallInput) => ToolCall.decode(input, limits)
    /** A session key given on its own: refused for writes; reads of a key no call can have find nothing. */
    const sessionKeyOf = (sessionKey: string) => ToolCall.decodeSessionKey(sessionKey, limits)

    // --- decisions ------------------------------------------------------------------------------

    // Set while the log tailer cannot read the log: session approvals may have been revoked since.
    let logUnreadable: PersistenceError | undefined

    const decideWith = (
      projection: SessionIndex.SessionIndex,
      call: ToolCall.ToolCall,
      now: number,
      judge: Policy = policy
    ): Decision.Decision => {
      const decision = judge.evaluate(call)
      if (decision._tag !== "RequireApproval") return decision
      const grant = SessionIndex.lookup(projection, call, now)
      return grant === undefined ? decision : allowedBy(decision, grant)
    }

    /** The decision, and the `policy.shadow` event when a candidate policy disagrees with it. */
    const decide = (
      projection: SessionIndex.SessionIndex,
      call: ToolCall.ToolCall,
      now: number,
      args: string
    ): readonly [Decision.Decision, AuditEvent.UnsequencedEvent | undefined] => {
      const decision = decideWith(projection, call, now)
      return [decision, shadowOf(projection, call, decision, now, args)]
    }

    const shadowOf = (
      projection: SessionIndex.SessionIndex,
      call: ToolCall.ToolCall,
      decision: Decision.Decision,
      now: number,
      args: string
    ) =>
      shadowPolicy === undefined
        ? undefined
        : disagreement(call, decision, decideWith(projection, call, now, shadowPolicy), now, args)

    /** The `policy.shadow` event when the candidate decision's outcome differs from the enforced one. */
    const disagreement = (
      call: ToolCall.ToolCall,
      enforced: Decision.Decision,
      candidate: Decision.Decision,
      now: number,
      args: string
    ) =>
      Decision.outcome(candidate) === Decision.outcome(enforced)
        ? undefined
        : AuditEvent.policyShadow(call, enforced, candidate, now, args)

    /** The decision event, and the shadow event when there is one. */
    const decisionEvents = (
      call: ToolCall.ToolCall,
      decision: Decision.Decision,
      shadow: AuditEvent.UnsequencedEvent | undefined,
      now: number,
      args: string
    ) =>
      shadow === undefined
        ? [AuditEvent.decision(call, decision, now, args)]
        : [AuditEvent.decision(call, decision, now, args), shadow]

    const withHooks = (
      call: ToolCall.ToolCall,
      body: Effect.Effect<Decision.Decision, PersistenceError>
    ): Effect.Effect<Decision.Decision, PersistenceError> => {
      const before = hooks.beforePolicyDecision
      const after = hooks.afterPolicyDecision
      const withBefore = before ? Effect.zipRight(before(call), body) : body
      return after ? Effect.tap(withBefore, (decision) => after(call, decision)) : withBefore
    }

    const evaluateDecoded = (call: ToolCall.ToolCall) =>
      withHooks(
        call,
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.flatMap(Ref.get(index), (projection) => {
            const args = ToolCall.canonicalArgs(call.args)
            const [decision, shadow] = decide(projection, call, now, args)
            return Effect.as(store.append(decisionEvents(call, decision, shadow, now, args)), decision)
          }))
      )

    const evaluate = (input: ToolCall.ToolCallInput) => Effect.flatMap(decodeCall(input), evaluateDecoded)

    // --- requests -------------------------------------------------------------------------------

    const getRequest = (requestId: string) =>
      Effect.flatMap(
        store.getRequest(requestId as ApprovalRequest.RequestId),
        Option.match({
          onNone: () => Effect.fail(new RequestNotFound({ requestId })),
          onSome: Effect.succeed
        })
      )

    /**
     * Expires an overdue request. The store judges the deadline (on the database's clock, for SQL
     * stores that keep time there): a request not yet due there comes back still pending.
     */
    const expire = (request: ApprovalRequest.ApprovalRequest, now: number) =>
      Effect.map(
        store.resolve(
          request.requestId,
          {
            status: "expired",
            reason: `approval timed out after ${request.expiresAt - request.createdAt} ms`,
            resolvedAt: now
          },
          AuditEvent.approvalExpired(request, now)
        ),
        (result) => result._tag === "NotFound" ? request : result.request
      )

    /** Settles a request that may be overdue: expired requests are resolved as such first. */
    const current = (request: ApprovalRequest.ApprovalRequest, now: number) =>
      request.status === "pending" && request.expiresAt <= now ? expire(request, now) : Effect.succeed(request)

    const newRequest = (
      call: ToolCall.ToolCall,
      decision: Decision.RequireApproval,
      now: number,
      args: string
    ): ApprovalRequest.ApprovalRequest => {
      const reason = decision.reason ?? `${call.name} requires approval (rule ${decision.rule.id})`
      return {
        requestId: newId("req") as ApprovalRequest.RequestId,
        toolCall: call,
        argsDigest: sha256(args),
        rule: decision.rule,
        policyVersion: decision.policyVersion,
        sessionScope: decision.sessionScope,
        reason,
        // the request keeps the arguments whole; the prompt quotes a bounded part of them
        prompt: `Allow ${call.name} ${quoted(args)} in session ${call.sessionKey}? ${reason}`,
        createdAt: now,
        expiresAt: now + decision.ttlMs,
        status: "pending"
      }
    }

    // --- replay by tool-call id -------------------------------------------------------------------
    // A tool-call id names one call in its session. Asking again for an id returns what is on record
    // for it (a decision or a request), never a second judgement, and only to the very same call
    // (tool, canonical arguments, agent, intent, working directory): another call under a known id
    // is refused and audited, wherever the record is found (before judging, or when the store
    // finds it while writing, because a racing caller recorded it first).

    const isSameCall = (call: ToolCall.ToolCall, record: Recorded): boolean =>
      record._tag === "Request"
        ? CallIdentity.sameCall(record.request.toolCall, call)
        : record.decision.callDigest === CallIdentity.callDigest(call, ToolCall.canonicalArgs(call.args))

    const refuseReused = (call: ToolCall.ToolCall, args: string, now: number) =>
      Effect.zipRight(
        store.append([
          AuditEvent.callRefused(
            call,
            now,
            args,
            `tool call id ${call.id} was already used in this session for another call`
          )
        ]),
        Effect.fail(
          new InvalidToolCall({
            problems: [{
              path: "id",
              message:
                `tool call id ${call.id} was already used in this session for another call (tool, arguments, agent, intent or working directory differ)`
            }]
          })
        )
      )

    /** The record's answer for the call, or a refusal when the record is another call's. */
    const replay = (
      call: ToolCall.ToolCall,
      args: string,
      record: Recorded,
      now: number
    ): Effect.Effect<Allowed | PauseSignal.PauseSignal, ToolDenied | CallAlreadyExecuted | CallError> =>
      !isSameCall(call, record)
        ? refuseReused(call, args, now)
        : record._tag === "Request"
        ? fromRecorded(record.request, now)
        : fromDecision(call, record.decision.decision)

    /**
     * An approved request runs once, and only if the policy of this process does not deny what will
     * run (the approver's edit, or the call as asked): an approver elsewhere may hold another policy.
     */
    const fromApproved = (
      request: ApprovalRequest.ApprovalRequest,
      now: number
    ): Effect.Effect<Allowed, ToolDenied | CallAlreadyExecuted | PersistenceError> => {
      const runs: ToolCall.ToolCall = { ...request.toolCall, args: ApprovalRequest.effectiveArgs(request) }
      const verdict = policy.evaluate(runs)
      if (verdict._tag === "Deny") {
        const denied = new ToolDenied({
          toolCallId: runs.id,
          toolName: runs.name,
          sessionKey: runs.sessionKey,
          outcome: "policy",
          reason: verdict.reason,
          rule: verdict.rule.id,
          requestId: request.requestId
        })
        // spent, so that it can never run later, and audited in the same transaction, once
        return Effect.zipRight(
          store.consume(
            request.requestId,
            now,
            AuditEvent.decision(runs, verdict, now, ToolCall.canonicalArgs(request.toolCall.args), request)
          ),
          Effect.fail(denied)
        )
      }
      return Effect.flatMap(store.consume(request.requestId, now), (spent) =>
        spent
          ? Effect.succeed<Allowed>({ _tag: "Allowed", call: runs, decision: undefined, request })
          : Effect.fail(new CallAlreadyExecuted({ toolCallId: runs.id, requestId: request.requestId })))
    }

    const fromRecorded = (
      request: ApprovalRequest.ApprovalRequest,
      now: number
    ): Effect.Effect<Allowed | PauseSignal.PauseSignal, ToolDenied | CallAlreadyExecuted | PersistenceError> =>
      Effect.flatMap(current(request, now), (settled): Effect.Effect<
        Allowed | PauseSignal.PauseSignal,
        ToolDenied | CallAlreadyExecuted | PersistenceError
      > => {
        switch (settled.status) {
          case "pending":
            return Effect.succeed(PauseSignal.fromRequest(settled))
          case "approved":
            return fromApproved(settled, now)
          default:
            return Effect.fail(deniedError(settled))
        }
      })

    const fromDecision = (
      call: ToolCall.ToolCall,
      decision: Decision.Allow | Decision.Deny
    ): Effect.Effect<Allowed, ToolDenied> =>
      decision._tag === "Allow"
        ? Effect.succeed({ _tag: "Allowed", call, decision, request: undefined })
        : Effect.fail(
          new ToolDenied({
            toolCallId: call.id,
            toolName: call.name,
            sessionKey: call.sessionKey,
            outcome: "policy",
            reason: decision.reason,
            rule: decision.rule.id
          })
        )

    // --- authorize --------------------------------------------------------------------------------

    type Authorized = Effect.Effect<Allowed | PauseSignal.PauseSignal, ToolDenied | CallAlreadyExecuted | CallError>

    // A decision and its record are retried when a session approval it relied on was revoked in
    // between; more than a few revocations racing one call is a store that keeps changing under it.
    const maxAttempts = 5

    const authorize = (input: ToolCall.ToolCallInput): Authorized =>
      Effect.gen(function*() {
        const call = yield* decodeCall(input)
        const now = yield* Clock.currentTimeMillis
        const args = ToolCall.canonicalArgs(call.args)
        const recorded = yield* store.findRecorded(call.sessionKey, call.id)
        if (Option.isSome(recorded)) return yield* replay(call, args, recorded.value, now)
        let shadow: AuditEvent.UnsequencedEvent | undefined
        const decision = yield* withHooks(
          call,
          Effect.map(Ref.get(index), (projection) => {
            const [decision, disagreement] = decide(projection, call, now, args)
            shadow = disagreement
            return decision
          })
        )
        return yield* settle(call, args, decision, shadow, now, 1)
      })

    /** Records the decision (or the request it needs) and answers the call from the record. */
    const settle = (
      call: ToolCall.ToolCall,
      args: string,
      decision: Decision.Decision,
      shadow: AuditEvent.UnsequencedEvent | undefined,
      now: number,
      attempt: number
    ): Authorized => {
      if (attempt > maxAttempts) {
        return Effect.fail(
          new PersistenceError({
            operation: "authorize",
            cause: new Error("session approvals kept changing under the call")
          })
        )
      }
      if (decision._tag === "RequireApproval") return request(call, args, decision, shadow, now, attempt)
      if (decision._tag === "Allow" && decision.via === "sessionApproval" && logUnreadable !== undefined) {
        // the approval may have been revoked in a part of the log this gate cannot read
        return Effect.fail(logUnreadable)
      }
      const recorded = store.recordDecision({
        sessionKey: call.sessionKey,
        toolCallId: call.id,
        toolName: ToolCall.normalizeName(call.name),
        argsDigest: sha256(args),
        callDigest: CallIdentity.callDigest(call, args),
        at: now,
        decision
      }, decisionEvents(call, decision, shadow, now, args))
      return Effect.flatMap(recorded, (result): Authorized => {
        switch (result._tag) {
          case "Created":
            return fromDecision(call, decision)
          case "Existing":
            return replay(call, args, { _tag: "Decision", decision: result.decision }, now)
          case "Requested":
            return replay(call, args, { _tag: "Request", request: result.request }, now)
          case "GrantInactive":
            // revoked (or lapsed on the store's clock) since this gate last read the log: judge the
            // call by the policy alone; the store then finds any other approval that still covers it
            return Effect.zipRight(
              Effect.flatMap(store.sessionApprovals({ id: result.sessionApprovalId }), project),
              Effect.suspend(() => settle(call, args, policy.evaluate(call), undefined, now, attempt + 1))
            )
        }
      })
    }

    const request = (
      call: ToolCall.ToolCall,
      args: string,
      decision: Decision.RequireApproval,
      shadow: AuditEvent.UnsequencedEvent | undefined,
      now: number,
      attempt: number
    ): Authorized => {
      const asked = newRequest(call, decision, now, args)
      return Effect.flatMap(
        store.createRequest(asked, AuditEvent.approvalRequested(asked, args)),
        (result): Authorized => {
          switch (result._tag) {
            case "Created":
              return Effect.zipRight(
                shadow === undefined
                  ? Effect.void
                  : Effect.asVoid(store.append([{ ...shadow, requestId: result.request.requestId }])),
                fromRecorded(result.request, now)
              )
            case "Existing":
              return replay(call, args, { _tag: "Request", request: result.request }, now)
            case "Decided":
              return replay(call, args, { _tag: "Decision", decision: result.decision }, now)
            case "Covered": {
              // approved for the session by a process whose answer this gate has not read yet
              const allowed = allowedBy(decision, result.grant)
              return Effect.zipRight(
                project([result.grant]),
                Effect.flatMap(
                  Ref.get(index),
                  (projection) =>
                    settle(call, args, allowed, shadowOf(projection, call, allowed, now, args), now, attempt + 1)
                )
              )
            }
          }
        }
      )
    }

    // --- waiting ---------------------------------------------------------------------------------

    const wake = (requestId: string) => {
      const set = waiters.get(requestId)
      if (set === undefined) return Effect.void
      waiters.delete(requestId)
      return Effect.forEach(set, (deferred) => Deferred.succeed(deferred, undefined), { discard: true })
    }

    const register = (requestId: string) =>
      Effect.acquireRelease(
        Effect.flatMap(Deferred.make<void>(), (deferred) =>
          Effect.sync(() => {
            const set = waiters.get(requestId) ?? new Set()
            set.add(deferred)
            waiters.set(requestId, set)
            return deferred
          })),
        (deferred) => Effect.sync(() => waiters.get(requestId)?.delete(deferred))
      )

    const awaitDecision = (requestId: string) =>
      Effect.scoped(Effect.gen(function*() {
        while (true) {
          // Register before reading, so an answer committed in between still wakes us.
          const wakeUp = yield* register(requestId)
          const request = yield* getRequest(requestId)
          const now = yield* Clock.currentTimeMillis
          const settled = yield* current(request, now)
          if (settled.status !== "pending") return settled
          // past the deadline here but not yet on the store's clock: look again shortly
          const wait = Math.max(settled.expiresAt - now, settled.expiresAt <= now ? 10 : 0)
          yield* Effect.raceFirst(Deferred.await(wakeUp), Effect.sleep(Duration.millis(wait)))
        }
      }))

    const gate = <A, E, R>(input: ToolCall.ToolCallInput, run: (allowed: Allowed) => Effect.Effect<A, E, R>) => {
      const untilDecided: Effect.Effect<Allowed, ToolDenied | CallAlreadyExecuted | CallError> = Effect.flatMap(
        authorize(input),
        (result) =>
          PauseSignal.isPauseSignal(result)
            ? Effect.zipRight(
              // the request was just created or found, so only a store failure can end the wait early
              awaitDecision(result.requestId).pipe(Effect.catchTag("RequestNotFound", Effect.die)),
              Effect.suspend(() => untilDecided)
            )
            : Effect.succeed(result)
      )
      return Effect.flatMap(untilDecided, run)
    }

    const invalidResponse = (path: string, message: string) => new InvalidResponse({ problems: [{ path, message }] })

    // --- answers --------------------------------------------------------------------------------

    const settleRepeat = (
      request: ApprovalRequest.ApprovalRequest,
      response: ApprovalRequest.ApprovalResponse
    ): Effect.Effect<ApprovalRequest.ApprovalRequest, AlreadyResolved | RequestExpired> => {
      if (request.status === "expired") {
        return Effect.fail(new RequestExpired({ requestId: request.requestId, expiresAt: request.expiresAt }))
      }
      if (ApprovalRequest.sameAnswer(request, response)) return Effect.succeed(request)
      return Effect.fail(
        new AlreadyResolved({
          requestId: request.requestId,
          status: request.status as "approved" | "denied",
          ...(request.resolution?.respondedBy !== undefined ? { respondedBy: request.resolution.respondedBy } : {})
        })
      )
    }

    const resolutionFor = (
      request: ApprovalRequest.ApprovalRequest,
      response: ApprovalRequest.ApprovalResponse,
      now: number
    ): { resolution: ApprovalRequest.Resolution; grant: NewSessionApproval | undefined } => {
      const base = {
        decision: response.decision,
        resolvedAt: now,
        ...(response.respondedBy !== undefined ? { respondedBy: response.respondedBy } : {}),
        ...(response.editedArgs !== undefined ? { editedArgs: response.editedArgs } : {})
      }
      if (response.decision === "deny") {
        return {
          resolution: { ...base, status: "denied", reason: response.reason ?? "denied by a human" },
          grant: undefined
        }
      }
      const call = { ...request.toolCall, args: response.editedArgs ?? request.toolCall.args }
      if (response.editedArgs !== undefined) {
        // An edit never inherits the approval blindly: the policy judges the edited call again.
        const verdict = policy.evaluate(call)
        if (verdict._tag === "Deny") {
          return {
            resolution: {
              ...base,
              status: "denied",
              deniedBy: "policy",
              reason: `edited arguments are denied by policy rule ${verdict.rule.id}: ${verdict.reason}`
            },
            grant: undefined
          }
        }
      }
      const reason = response.reason !== undefined ? { reason: response.reason } : {}
      if (response.decision === "approve_once") {
        return { resolution: { ...base, ...reason, status: "approved" }, grant: undefined }
      }
      const scope = response.scope ?? request.sessionScope
      const lifetime = response.sessionTtlMs !== undefined ? { sessionTtlMs: response.sessionTtlMs } : {}
      const grant: NewSessionApproval = {
        id: newId("sa") as SessionApproval.SessionApprovalId,
        sessionKey: call.sessionKey,
        toolName: ToolCall.normalizeName(call.name),
        scope,
        ...(scope === "exact"
          ? {
            argsDigest: ToolCall.argsDigest(call.args),
            args: ToolCall.canonicalArgs(call.args),
            ...(call.workingDirectory !== undefined ? { workingDirectory: call.workingDirectory } : {})
          }
          : {}),
        ...(response.respondedBy !== undefined ? { grantedBy: response.respondedBy } : {}),
        requestId: request.requestId,
        createdAt: now,
        ...(response.sessionTtlMs !== undefined ? { expiresAt: now + response.sessionTtlMs } : {})
      }
      return {
        resolution: { ...base, ...reason, status: "approved", scope, ...lifetime, sessionApprovalId: grant.id },
        grant
      }
    }

    /** A request the store found overdue on its clock is expired there, then refused as such. */
    const refuseOverdue = (request: ApprovalRequest.ApprovalRequest, now: number) =>
      Effect.flatMap(
        expire(request, now),
        (settled) => Effect.fail(new RequestExpired({ requestId: settled.requestId, expiresAt: settled.expiresAt }))
      )

    const respond = (requestId: string, input: unknown) =>
      Effect.gen(function*() {
        const decoded = decodeResponse(input)
        if (decoded._tag === "Left") {
          return yield* new InvalidResponse({ problems: problemsOf(decoded.left) })
        }
        const response = decoded.right
        if (response.editedArgs !== undefined) {
          const edited = ToolCall.decodeArgs(response.editedArgs, { limits, path: "editedArgs" })
          if (Either.isLeft(edited)) return yield* new InvalidResponse({ problems: edited.left })
        }
        if (response.scope !== undefined && response.decision !== "approve_session") {
          return yield* invalidResponse("scope", "scope applies only to approve_session")
        }
        if (response.sessionTtlMs !== undefined && response.decision !== "approve_session") {
          return yield* invalidResponse("sessionTtlMs", "sessionTtlMs applies only to approve_session")
        }
        if (response.editedArgs !== undefined && response.decision === "deny") {
          return yield* invalidResponse("editedArgs", "edited arguments apply only to an approval")
        }
        const request = yield* getRequest(requestId)
        const now = yield* Clock.currentTimeMillis
        const settled = yield* current(request, now)
        if (settled.status !== "pending") return yield* settleRepeat(settled, response)
        const { grant, resolution } = resolutionFor(settled, response, now)
        const result = yield* store.resolve(
          settled.requestId,
          resolution,
          AuditEvent.approvalResolved(settled, resolution),
          grant
        )
        switch (result._tag) {
          case "NotFound":
            return yield* new RequestNotFound({ requestId })
          case "NotPending":
            return yield* settleRepeat(result.request, response)
          case "Overdue":
          case "NotDue":
            return yield* refuseOverdue(result.request, now)
          case "Resolved":
            if (grant !== undefined) yield* project([{ ...grant, seq: result.event.seq }])
            return result.request
        }
      })

    const resume = (requestId: string) =>
      Effect.gen(function*() {
        const request = yield* getRequest(requestId)
        const settled = yield* current(request, yield* Clock.currentTimeMillis)
        if (settled.status === "pending") {
          return yield* new RequestPending({ requestId, expiresAt: settled.expiresAt })
        }
        return settled
      })

    const extend = (requestId: string, ttl: Duration.DurationInput, actor?: string) =>
      Effect.gen(function*() {
        const ttlMs = yield* Limits.ttlMillis("ttl", ttl)
        const request = yield* getRequest(requestId)
        const now = yield* Clock.currentTimeMillis
        const settled = yield* current(request, now)
        const expiresAt = now + ttlMs
        const refused = (r: ApprovalRequest.ApprovalRequest) =>
          r.status === "expired"
            ? new RequestExpired({ requestId, expiresAt: r.expiresAt })
            : new AlreadyResolved({ requestId, status: r.status as "approved" | "denied" })
        if (settled.status !== "pending") return yield* refused(settled)
        const result = yield* store.extend(
          settled.requestId,
          expiresAt,
          AuditEvent.approvalExtended(settled, now, expiresAt, actor)
        )
        switch (result._tag) {
          case "NotFound":
            return yield* new RequestNotFound({ requestId })
          case "NotPending":
            return yield* refused(result.request)
          case "Overdue":
          case "NotDue":
            return yield* refuseOverdue(result.request, now)
          case "Resolved":
            return result.request
        }
      })

    const sweep = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const due = yield* store.listDue(now)
      const expired = yield* Effect.forEach(due, (request) => expire(request, now))
      const toWarn = yield* store.listToWarn(now, warnBeforeMs)
      yield* Effect.forEach(
        toWarn,
        (request) => store.markWarned(request.requestId, AuditEvent.approvalExpiring(request, now)),
        { discard: true }
      )
      return expired.filter((request) => request.status === "expired")
    })

    const hasApproval = (
      toolId: string,
      sessionKey: string,
      call?: { readonly args?: ToolCall.ToolArgs; readonly workingDirectory?: string }
    ) =>
      Effect.gen(function*() {
        if (Either.isLeft(sessionKeyOf(sessionKey))) return false
        const now = yield* Clock.currentTimeMillis
        const projection = yield* Ref.get(index)
        if (call === undefined) {
          const grants = projection.sessions.get(sessionKey)?.get(ToolCall.normalizeName(toolId)) ?? []
          return grants.some((grant) => grant.scope === "tool" && SessionApproval.isActive(grant, now))
        }
        const probe = {
          id: "probe",
          name: toolId,
          args: call.args ?? {},
          sessionKey,
          ...(call.workingDirectory !== undefined ? { workingDirectory: call.workingDirectory } : {})
        } as ToolCall.ToolCall
        return SessionIndex.lookup(projection, probe, now) !== undefined
      })

    // --- session approvals ------------------------------------------------------------------------

    const recordApproval = (
      toolId: string,
      sessionKey: string,
      approved: boolean,
      recordOptions?: { readonly grantedBy?: string; readonly ttl?: Duration.DurationInput }
    ) =>
      Effect.gen(function*() {
        yield* sessionKeyOf(sessionKey)
        const ttlMs = recordOptions?.ttl !== undefined ? yield* Limits.ttlMillis("ttl", recordOptions.ttl) : undefined
        const now = yield* Clock.currentTimeMillis
        const toolName = ToolCall.normalizeName(toolId)
        if (approved) {
          const granted = yield* store.grant(
            {
              id: newId("sa") as SessionApproval.SessionApprovalId,
              sessionKey: sessionKey as ToolCall.SessionKey,
              toolName,
              scope: "tool",
              ...(recordOptions?.grantedBy !== undefined ? { grantedBy: recordOptions.grantedBy } : {}),
              createdAt: now,
              ...(ttlMs !== undefined ? { expiresAt: now + ttlMs } : {})
            },
            AuditEvent.sessionGranted(sessionKey, toolName, now, recordOptions?.grantedBy)
          )
          yield* project([granted])
        } else {
          const revoked = yield* store.revokeWhere(
            { sessionKey, toolName },
            now,
            AuditEvent.sessionToolRevoked(sessionKey, toolName, now, recordOptions?.grantedBy)
          )
          yield* project(revoked)
        }
      })

    const clearApprovals = (sessionKey?: string, actor?: string) =>
      Effect.gen(function*() {
        if (sessionKey !== undefined) yield* sessionKeyOf(sessionKey)
        const now = yield* Clock.currentTimeMillis
        const revoked = yield* store.revokeWhere(
          { sessionKey },
          now,
          AuditEvent.approvalsCleared(sessionKey, now, actor)
        )
        yield* project(revoked)
        return revoked.length
      })

    const revokeApproval = (id: string, actor?: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const [held] = yield* store.sessionApprovals({ id })
        const revoked = yield* store.revoke(
          id as SessionApproval.SessionApprovalId,
          now,
          AuditEvent.sessionApprovalRevoked(id, held, now, actor)
        )
        if (Option.isNone(revoked)) return yield* new SessionApprovalNotFound({ sessionApprovalId: id })
        yield* project([revoked.value])
        return revoked.value
      })

    const createApprovalRequest = (decision: Decision.Decision, input: ToolCall.ToolCallInput) =>
      Effect.gen(function*() {
        const call = yield* decodeCall(input)
        if (decision._tag !== "RequireApproval") return undefined
        const now = yield* Clock.currentTimeMillis
        if (SessionIndex.lookup(yield* Ref.get(index), call, now) !== undefined) return undefined
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
            return yield* found({ _tag: "Request", request: result.request })
          case "Decided":
            return yield* found({ _tag: "Decision", decision: result.decision })
          case "Covered":
            yield* project([result.grant])
            return undefined
        }
      })

    const auditLog = (query: AuditEvent.AuditQuery = {}): Stream.Stream<AuditEvent.AuditEvent, PersistenceError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        // Subscribe before replaying, so events committed during the replay arrive live.
        const live = yield* PubSub.subscribe(hub)
        const keep = AuditEvent.matches({ ...query, afterSeq: undefined })
        let last = query.afterSeq ?? 0
        const replay = Stream.paginateChunkEffect(
          last,
          (after) =>
            Effect.map(store.events({ ...query, afterSeq: after, limit: 500 }), (page) =>
              [
                Chunk.fromIterable(page),
                page.length < 500 ? Option.none<number>() : Option.some(page[page.length - 1]!.seq)
              ] as const)
        )
        const tail = Stream.fromQueue(live).pipe(Stream.filter((event) => event.seq > last && keep(event)))
        return Stream.concat(replay, tail).pipe(Stream.tap((event) =>
          Effect.sync(() => {
            last = event.seq
          })
        ))
      }))

    // The tailer: one reader of the log per gate, waking local waiters, feeding the live audit
    // stream and catching the projection up with changes committed by any process.
    const hints = yield* store.subscribe
    const tailerState = { seq: startSeq }
    const catchUp = Effect.gen(function*() {
      let changedProjection = false
      while (true) {
        const events = yield* store.events({ afterSeq: tailerState.seq, limit: 1000 })
        if (events.length === 0) break
        for (const event of events) {
          if (event.requestId !== undefined && WAKING_EVENTS.has(event.type) && waiters.has(event.requestId)) {
            yield* wake(event.requestId)
          }
          if (PROJECTION_EVENTS.has(event.type)) changedProjection = true
        }
        yield* PubSub.publishAll(hub, events)
        tailerState.seq = events[events.length - 1]!.seq
      }
      if (changedProjection) {
        const projectionSeq = (yield* Ref.get(index)).seq
        yield* project(yield* store.sessionApprovals({ afterSeq: projectionSeq }))
      }
    })
    yield* Queue.take(hints).pipe(
      Effect.zipRight(Queue.takeAll(hints)),
      Effect.zipRight(catchUp),
      Effect.zipRight(Effect.sync(() => {
        logUnreadable = undefined
      })),
      Effect.catchAll((error) =>
        Effect.zipRight(
          Effect.sync(() => {
            logUnreadable = error
          }),
          Effect.logError(
            "tool-gate: reading the audit log failed; calls that rely on session approvals fail until it can be read",
            error
          )
        )
      ),
      Effect.forever,
      Effect.forkScoped,
      Effect.interruptible
    )

    // Requests that expired while no process ran are settled now; then the sweeper keeps at it.
    yield* sweep
    yield* sweep.pipe(
      Effect.catchAll((error) => Effect.logWarning("tool-gate: expiry sweep failed; retrying", error)),
      Effect.repeat(Schedule.spaced(sweepInterval)),
      Effect.delay(sweepInterval),
      Effect.forkScoped,
      Effect.interruptible
    )

    return ToolGate.of({
      policy,
      shadowPolicy,
      evaluate,
      authorize,
      gate,
      respond,
      awaitDecision,
      resume,
      getRequest,
      pending: (pendingOptions) =>
        pendingOptions?.sessionKey !== undefined && Either.isLeft(sessionKeyOf(pendingOptions.sessionKey))
          ? Effect.succeed([])
          : store.listPending(pendingOptions),
      extend,
      sweep,
      hasApproval,
      recordApproval,
      clearApprovals,
      sessionApprovals: (sessionKey) =>
        sessionKey !== undefined && Either.isLeft(sessionKeyOf(sessionKey))
          ? Effect.succeed([])
          : Effect.flatMap(Clock.currentTimeMillis, (now) => store.sessionApprovals({ sessionKey, activeAt: now })),
      revokeApproval,
      createApprovalRequest,
      audit: Stream.fromPubSub(hub),
      auditLog
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<ToolGate, PersistenceError, ApprovalStore> =>
  Layer.scoped(ToolGate, make(options))

/**
 * The gate over an in-memory store: for tests and quick starts. Nothing survives the process.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (options: Options): Layer.Layer<ToolGate, PersistenceError> =>
  layer(options).pipe(Layer.provide(storeMemory))
