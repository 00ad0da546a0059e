/**
 * The gate between an agent and its tools: decides allow / deny / requireApproval for every tool
 * call, pauses with a `PauseSignal` when a human must answer, takes the answer from any process
 * that shares the store, and streams every decision to auditors.
 *
 * This module is the contract (the service, its tag and layers) and a short assembly. The gate
 * rests on replay by tool-call id: a call is judged once, its judgement is recorded under its id,
 * and asking again for that id answers from the record (`gate` is `authorize`, a wait for the answer,
 * then `authorize` again). The parts live in `internal/gate/`: `decisions` (policy, session
 * approvals, shadow policy, hooks), `replay` (answers from the record), `authorize` (judge, record,
 * `gate`), `requests` (create, expire, extend, sweep), `answers` (`respond`), `grants` (session
 * approvals and their projection), `waiters`, `logTailer` and `auditStreams`.
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
import type * as FileSystem from "@effect/platform/FileSystem"
import { type Config, type ConfigError, Context, Duration, Effect, Layer, type Schema, type Stream } from "effect"
import type * as Scope from "effect/Scope"
import type * as ApprovalRequest from "./ApprovalRequest.js"
import { ApprovalStore, layerMemory as storeMemory } from "./ApprovalStore.js"
import type * as AuditEvent from "./AuditEvent.js"
import type * as Decision from "./Decision.js"
import * as Answers from "./internal/gate/answers.js"
import * as AuditStreams from "./internal/gate/auditStreams.js"
import * as Authorize from "./internal/gate/authorize.js"
import type { Allowed, CallError, Options, RespondError, RevokeOptions } from "./internal/gate/contract.js"
import * as Decisions from "./internal/gate/decisions.js"
import * as Grants from "./internal/gate/grants.js"
import * as LogTailer from "./internal/gate/logTailer.js"
import * as Observe from "./internal/gate/observe.js"
import * as PolicySwitch from "./internal/gate/policySwitch.js"
import * as Replay from "./internal/gate/replay.js"
import * as Requests from "./internal/gate/requests.js"
import * as Waiters from "./internal/gate/waiters.js"
import * as GateConfig from "./internal/gateConfig.js"
import * as Limits from "./Limits.js"
import type * as PauseSignal from "./PauseSignal.js"
import type { Policy } from "./Policy.js"
import type * as SessionApproval from "./SessionApproval.js"
import * as ToolCall from "./ToolCall.js"
import type {
  AlreadyResolved,
  CallAlreadyExecuted,
  InvalidDuration,
  InvalidToolCall,
  PersistenceError,
  PolicyInvalid,
  RequestExpired,
  RequestNotFound,
  RequestPending,
  SessionApprovalNotFound,
  ToolDenied
} from "./ToolGateError.js"

export type { Allowed, CallError, Hooks, Options, RespondError, RevokeOptions } from "./internal/gate/contract.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** the policy in force (with `reload`, the version enforced at the time it is read) */
  readonly policy: Policy
  readonly shadowPolicy: Policy | undefined
  /** The decision for a call (policy, then session approvals). Its only side effect is the audit event. */
  readonly evaluate: (call: ToolCall.ToolCallInput) => Effect.Effect<Decision.Decision, CallError>
  /**
   * `Allowed`, or a `PauseSignal` after durably creating (or finding) the approval request;
   * fails with `ToolDenied` on deny. Asking again for the same call id returns the recorded outcome
   * (replay by call id).
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
    requestId: ApprovalRequest.RequestId,
    response: Schema.Schema.Encoded<typeof ApprovalRequest.ApprovalResponse>
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RespondError>
  /** Waits until the request is answered or expires (timeout means deny), then returns it. */
  readonly awaitDecision: (
    requestId: ApprovalRequest.RequestId
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError>
  /** Reads a resolved request now; fails with `RequestPending` while nobody has answered. */
  readonly resume: (
    requestId: ApprovalRequest.RequestId
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | RequestPending | PersistenceError>
  readonly getRequest: (
    requestId: ApprovalRequest.RequestId
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError>
  /** Pending requests, oldest first, of one session or all (none for a key no call can have). */
  readonly pending: (
    options?: { readonly sessionKey?: ToolCall.SessionKey | undefined }
  ) => Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, PersistenceError>
  /**
   * Moves a pending request's deadline to `ttl` from now, if that is later: extending never
   * shortens, and a deadline already later is kept (no event). `allowShorten` lets `ttl` bring
   * the deadline forward too.
   */
  readonly extend: (
    requestId: ApprovalRequest.RequestId,
    ttl: Duration.DurationInput,
    actor?: string,
    options?: { readonly allowShorten?: boolean | undefined }
  ) => Effect.Effect<
    ApprovalRequest.ApprovalRequest,
    RequestNotFound | RequestExpired | AlreadyResolved | InvalidDuration | PersistenceError
  >
  /** One sweep: expires overdue requests and emits due warnings. Runs in the background too. */
  readonly sweep: Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, PersistenceError>
  /**
   * Whether the session holds a tool-wide approval for the tool (or, given `call`, one covering it).
   * A session whose approvals the gate does not hold yet has them read from the store.
   */
  readonly hasApproval: (
    toolId: string,
    sessionKey: ToolCall.SessionKey,
    call?: { readonly args?: ToolCall.ToolArgs; readonly workingDirectory?: string }
  ) => Effect.Effect<boolean, PersistenceError>
  /** `true` grants the session a tool-wide approval; `false` revokes the session's approvals of the tool. */
  readonly recordApproval: (
    toolId: string,
    sessionKey: ToolCall.SessionKey,
    approved: boolean,
    options?: { readonly grantedBy?: string; readonly ttl?: Duration.DurationInput }
  ) => Effect.Effect<void, InvalidDuration | InvalidToolCall | PersistenceError>
  /** Revokes the session approvals of one session, or of all sessions; returns how many. */
  readonly clearApprovals: (
    sessionKey?: ToolCall.SessionKey,
    actor?: string
  ) => Effect.Effect<number, InvalidToolCall | PersistenceError>
  /** Active session approvals of one session or all. */
  readonly sessionApprovals: (
    sessionKey?: ToolCall.SessionKey
  ) => Effect.Effect<ReadonlyArray<SessionApproval.SessionApproval>, PersistenceError>
  /**
   * Revokes one session approval. Given `sessionKey`, an approval of another session is not found
   * (the guard for callers limited to one session).
   */
  readonly revokeApproval: (
    id: SessionApproval.SessionApprovalId,
    options?: RevokeOptions
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

/**
 * Builds the gate over the `ApprovalStore` in context, from its parts: decisions, replay by
 * tool-call id, requests, answers, session grants, waiters, the log tailer and the audit streams
 * (`internal/gate/`). Background work (the log tailer that wakes waiters and keeps the
 * session-approval projection fresh, and the expiry sweeper) lives in the given scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Service, PersistenceError, ApprovalStore | Scope.Scope> =>
  Effect.gen(function*() {
    const untimed = yield* ApprovalStore
    const store = options.storeMetrics === true ? Observe.timedStore(untimed) : untimed
    const { shadowPolicy } = options
    const policySwitch = PolicySwitch.make(options.policy, store)
    // without reloads the parts hold the policy itself: the hot path reads it with no indirection
    const policy = options.reload === undefined ? options.policy : policySwitch.policy
    const sweepInterval = Duration.decode(options.sweepInterval ?? "1 second")
    const warnBeforeMs = Duration.toMillis(options.warnBefore ?? "1 minute")
    const projection = yield* Grants.makeProjection(store, options.heldSessions)
    const streams = yield* AuditStreams.make(store)
    // limits out of range are a programming error in the gate's options, not a runtime condition
    const limits = yield* Effect.orDie(Limits.callLimits(options.limits))
    const decodeCall = (input: ToolCall.ToolCallInput) => ToolCall.decode(input, limits)
    /** A session key given on its own: refused for writes; reads of a key no call can have find nothing. */
    const sessionKeyOf = (sessionKey: string) => ToolCall.decodeSessionKey(sessionKey, limits)

    const observed: Observe.Observed = { policyVersion: () => policy.version, traceArgs: options.traceArgs ?? false }
    const waiters = yield* Waiters.makeWaiters
    const tailer = LogTailer.make({ store, projection, waiters, publish: streams.publish })
    const grants = Grants.make({ store, projection, sessionKeyOf })
    const requests = Requests.make({ store, sessionKeyOf, warnBeforeMs })
    const decisions = Decisions.make({ store, policy, shadowPolicy, hooks: options.hooks ?? {}, projection })
    const replay = Replay.make({ store, policy, current: requests.current })
    const awaitDecision = Observe.awaitDecision(observed, Waiters.makeAwaitDecision({ waiters, ...requests }))
    const authorization = Authorize.make({
      store,
      policy,
      projection,
      decodeCall,
      ...decisions,
      ...replay,
      awaitDecision,
      watchCall: waiters.watchCall,
      untilWokenOrDue: waiters.untilWokenOrDue,
      logUnreadable: tailer.unreadable,
      observed
    })
    const answers = Answers.make({ store, policy, limits, projection, ...requests, answered: authorization.answered })

    yield* tailer.start
    if (options.reload !== undefined) yield* policySwitch.follow(options.reload)
    yield* Requests.startSweeper(Observe.sweep(requests.sweep, { root: true }), sweepInterval)

    return ToolGate.of({
      policy,
      shadowPolicy,
      evaluate: (input) => Observe.evaluate(observed, input, Effect.flatMap(decodeCall(input), decisions.evaluate)),
      ...authorization,
      respond: (requestId, response) =>
        Observe.request("toolgate.respond", observed, requestId, answers.respond(requestId, response)),
      awaitDecision,
      resume: (requestId) => Observe.request("toolgate.resume", observed, requestId, requests.resume(requestId)),
      getRequest: requests.getRequest,
      pending: requests.pending,
      extend: requests.extend,
      sweep: Observe.sweep(requests.sweep),
      ...grants,
      audit: streams.audit,
      auditLog: streams.auditLog
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

/**
 * What configuration gives a gate: the policy file, whether to follow it, and the durations.
 *
 * @since 0.1.0
 * @category models
 */
export type ConfigInput = GateConfig.ConfigInput

/**
 * The gate's settings under their default keys: `TOOLGATE_POLICY` (the policy file, required),
 * `TOOLGATE_POLICY_WATCH` (`true`: enforce each valid version saved while the gate runs),
 * `TOOLGATE_TTL` (the approval TTL of rules that give none, replacing the file's `ttlMs`),
 * `TOOLGATE_WARN_BEFORE` and `TOOLGATE_SWEEP_INTERVAL` (durations such as `10 minutes`, from 1 ms
 * to a year). A missing or unusable value is a `ConfigError` naming its key.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<ConfigInput> = GateConfig.config

/**
 * The gate's options from configuration (`config`, or any `Config` of the same shape, or a
 * record of one `Config` per field): the policy loaded from its file, followed when
 * `watchPolicy` is set, with the other options in `options`.
 *
 * @since 0.1.0
 * @category config
 */
export const optionsConfig = (
  settings: Config.Config.Wrap<ConfigInput> = config,
  options?: Omit<Options, "policy" | "reload">
): Effect.Effect<Options, ConfigError.ConfigError | PolicyInvalid, FileSystem.FileSystem> =>
  Effect.flatMap(GateConfig.read(settings), (input) => GateConfig.options(input, options))

/**
 * The gate over the `ApprovalStore` in context, configured like the application's other layers:
 * a bad setting fails the layer with a `ConfigError` naming its key, an invalid policy file with
 * `PolicyInvalid`. Reads the policy file through the `FileSystem` in context.
 *
 * @example
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { ApprovalStore, ToolGate } from "@tool-gate/core"
 * import { Config, Layer } from "effect"
 *
 * // TOOLGATE_POLICY, TOOLGATE_TTL, ... from the environment
 * const GateLive = ToolGate.layerConfig().pipe(Layer.provide([ApprovalStore.layerMemory, NodeFileSystem.layer]))
 *
 * // or keys of your own
 * const Custom = ToolGate.layerConfig({ policy: Config.string("POLICY_FILE"), ttl: Config.duration("APPROVAL_TTL") })
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  settings: Config.Config.Wrap<ConfigInput> = config,
  options?: Omit<Options, "policy" | "reload">
): Layer.Layer<
  ToolGate,
  ConfigError.ConfigError | PolicyInvalid | PersistenceError,
  ApprovalStore | FileSystem.FileSystem
> => Layer.unwrapEffect(Effect.map(optionsConfig(settings, options), layer))
