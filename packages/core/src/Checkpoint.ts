/**
 * Pause/resume checkpoints. A pipeline that gets a `PauseSignal` saves its own state with the
 * pending request(s) and may stop, even exit the process. Later, any process resumes it with the
 * token: it gets the decoded state and every request's resolution (approved, with the approver's
 * edited arguments if any; denied, with the reason; or expired), exactly once.
 *
 * The shape follows `@effect/workflow`'s `DurableDeferred`: a `Checkpoint` is a named wait point
 * carrying the schema of what is stored at it, and the handle to come back with is a branded
 * string token.
 *
 * @example
 * import { Checkpoint, type PauseSignal } from "@tool-gate/core"
 * import { Effect, Schema } from "effect"
 *
 * const AgentTurn = Checkpoint.make("agent-turn", {
 *   state: Schema.Struct({ messages: Schema.Array(Schema.String) })
 * })
 *
 * const pause = (signal: PauseSignal.PauseSignal, messages: Array<string>) =>
 *   Effect.flatMap(Checkpoint.Checkpoints, (checkpoints) =>
 *     checkpoints.save(AgentTurn, [signal.requestId], { messages })
 *   )
 *
 * const later = (token: Checkpoint.Token) =>
 *   Effect.gen(function*() {
 *     const checkpoints = yield* Checkpoint.Checkpoints
 *     const resumed = yield* checkpoints.resume(AgentTurn, token)
 *     // ... run the approved calls, feed denials back ...
 *     yield* checkpoints.complete(token, resumed.lease)
 *     return resumed.state
 *   })
 *
 * @since 0.1.0
 */
import { Clock, Context, Duration, Effect, Layer, Option, Schema } from "effect"
import { type ApprovalRequest, RequestId } from "./ApprovalRequest.js"
import type { ApprovalStore } from "./ApprovalStore.js"
import * as CheckpointStore from "./CheckpointStore.js"
import { canonicalJson } from "./internal/canonical.js"
import * as ToolGate from "./ToolGate.js"
import type { RequestNotFound, RequestPending } from "./ToolGateError.js"
import {
  AlreadyResumed,
  CheckpointClaimed,
  CheckpointInvalid,
  CheckpointNotFound,
  type PersistenceError,
  problemsOf
} from "./ToolGateError.js"

/**
 * @since 0.1.0
 * @category models
 */
export const Token = Schema.String.pipe(
  Schema.pattern(/^cp_[0-9a-f-]{36}$/),
  Schema.brand("@tool-gate/CheckpointToken")
)

/**
 * The handle a paused pipeline keeps (print it, store it, put it in a URL) to resume later.
 *
 * @since 0.1.0
 * @category models
 */
export type Token = typeof Token.Type

/**
 * A named wait point and the schema of the state stored at it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Checkpoint<State extends Schema.Schema.Any> {
  readonly name: string
  readonly state: State
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = <State extends Schema.Schema.Any>(
  name: string,
  options: { readonly state: State }
): Checkpoint<State> => ({ name, state: options.state })

/**
 * Who is resuming a checkpoint, and until when. The holder runs what the answers allow, renewing
 * the lease before each act (`renew`), then calls `complete`; if it crashes or stalls first, the
 * lease runs out and another owner may claim it, and the old lease is refused from then on.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lease {
  readonly owner: string
  /** epoch milliseconds */
  readonly until: number
  /**
   * The fencing token: which claim of the checkpoint this lease is. A later claim (another owner's
   * after this lease ran out, or this owner's again) supersedes it: every act under it is refused.
   */
  readonly fence: number
}

/**
 * What `resume` hands back: the decoded state, every request of the checkpoint, resolved, in the
 * order they were saved, and the lease the caller now holds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Resumed<A> {
  readonly token: Token
  readonly state: A
  readonly requests: ReadonlyArray<ApprovalRequest>
  readonly lease: Lease
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ResumeOptions {
  /** who claims the checkpoint (default: a fresh id per call); the same owner may claim again while its lease runs, which supersedes its earlier lease */
  readonly owner?: string | undefined
  /** how long the claim holds before another owner may take it over (default 5 minutes) */
  readonly lease?: Duration.DurationInput | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Saves `state` at `checkpoint` with the pending request(s) it waits for (one model turn may
   * pause several tool calls). A request belongs to at most one checkpoint; saving the same
   * requests again (a retried turn) returns the existing token and keeps the first state.
   */
  readonly save: <S extends Schema.Schema.Any>(
    checkpoint: Checkpoint<S>,
    requestIds: ReadonlyArray<RequestId>,
    state: Schema.Schema.Type<S>
  ) => Effect.Effect<Token, RequestNotFound | CheckpointInvalid | PersistenceError, Schema.Schema.Context<S>>
  /** The token of the checkpoint that waits for this request. */
  readonly find: (requestId: RequestId) => Effect.Effect<Token, CheckpointNotFound | PersistenceError>
  /**
   * Once every request is answered or expired: claims the checkpoint with a lease and returns
   * the state and the resolutions. Fails with `RequestPending` while any request is unanswered
   * (partial answers stay), with `CheckpointClaimed` while another owner's lease runs, and with
   * `AlreadyResumed` once it was completed. Call `complete` when the work it resumed is done.
   */
  readonly resume: <S extends Schema.Schema.Any>(
    checkpoint: Checkpoint<S>,
    token: Token,
    options?: ResumeOptions
  ) => Effect.Effect<
    Resumed<Schema.Schema.Type<S>>,
    CheckpointNotFound | RequestPending | CheckpointClaimed | AlreadyResumed | CheckpointInvalid | PersistenceError,
    Schema.Schema.Context<S>
  >
  /**
   * Extends the lease to `length` from now and confirms it is still the latest claim: call it
   * before each act of the resumed work (a model turn, a tool call), so that an owner that stalled
   * past its lease and was taken over stops instead of acting twice. Fails with
   * `CheckpointClaimed` once superseded, `AlreadyResumed` once completed.
   */
  readonly renew: (
    token: Token,
    lease: Lease,
    length: Duration.DurationInput
  ) => Effect.Effect<Lease, CheckpointNotFound | CheckpointClaimed | AlreadyResumed | PersistenceError>
  /**
   * Records progress while holding the lease: the state a retry will resume with if this owner
   * stops before completing (what already ran, so it is not asked for again). Fails like `complete`.
   */
  readonly update: <S extends Schema.Schema.Any>(
    checkpoint: Checkpoint<S>,
    token: Token,
    lease: Lease,
    state: Schema.Schema.Type<S>
  ) => Effect.Effect<
    void,
    CheckpointNotFound | CheckpointClaimed | AlreadyResumed | CheckpointInvalid | PersistenceError,
    Schema.Schema.Context<S>
  >
  /**
   * Marks the resume done, for the lease's owner (again: no-op). Fails with `CheckpointClaimed`
   * when the lease ran out and another owner took it, `AlreadyResumed` when another completed it.
   */
  readonly complete: (
    token: Token,
    lease: Lease
  ) => Effect.Effect<void, CheckpointNotFound | CheckpointClaimed | AlreadyResumed | PersistenceError>
  /** Checkpoints at this wait point not completed yet (pending, answered or claimed), oldest first. */
  readonly open: <S extends Schema.Schema.Any>(
    checkpoint: Checkpoint<S>
  ) => Effect.Effect<
    ReadonlyArray<{ readonly token: Token; readonly requestIds: ReadonlyArray<RequestId> }>,
    PersistenceError
  >
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Checkpoints extends Context.Tag("@tool-gate/core/Checkpoints")<Checkpoints, Service>() {}

const tokenFor = (): Token => Token.make(`cp_${crypto.randomUUID()}`)

/**
 * The ids of a stored checkpoint, typed again: the store keeps them as text, and this module wrote
 * them (a token from `tokenFor`, the ids of requests the gate found), so a failure here is a defect.
 */
const idsOf = (row: CheckpointStore.Row) => ({
  token: Token.make(row.token),
  requestIds: row.requestIds.map((id) => RequestId.make(id))
})

/** Two encoded states say the same (key order aside). */
const sameState = (a: string, b: string): boolean => {
  if (a === b) return true
  try {
    return canonicalJson(JSON.parse(a)) === canonicalJson(JSON.parse(b))
  } catch {
    return false
  }
}

const sameRequests = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) =>
  a.length === b.length && a.every((id) => b.includes(id))

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeService: Effect.Effect<Service, never, CheckpointStore.CheckpointStore | ToolGate.ToolGate> = Effect
  .gen(function*() {
    const store = yield* CheckpointStore.CheckpointStore
    const gate = yield* ToolGate.ToolGate

    const lookup = (token: string, name?: string) =>
      Effect.flatMap(
        store.find({ token }),
        (row) =>
          Option.isSome(row) && (name === undefined || row.value.name === name)
            ? Effect.succeed(row.value)
            : Effect.fail(new CheckpointNotFound({ token }))
      )

    const encode = <S extends Schema.Schema.Any>(checkpoint: Checkpoint<S>, state: Schema.Schema.Type<S>) =>
      Schema.encode(Schema.parseJson(checkpoint.state))(state).pipe(
        Effect.mapError((error) => new CheckpointInvalid({ problems: problemsOf(error) }))
      ) as Effect.Effect<string, CheckpointInvalid, Schema.Schema.Context<S>>

    const save: Service["save"] = (checkpoint, requestIds, state) =>
      Effect.gen(function*() {
        if (requestIds.length === 0) {
          return yield* new CheckpointInvalid({ problems: [{ path: "requestIds", message: "at least one request" }] })
        }
        for (const requestId of requestIds) yield* gate.getRequest(requestId)
        const encoded = yield* encode(checkpoint, state)
        const token = tokenFor()
        const saved = yield* store.save({
          token,
          name: checkpoint.name,
          state: encoded,
          requestIds: [...requestIds],
          createdAt: yield* Clock.currentTimeMillis
        })
        if (saved) return token
        // A retried turn saves the same requests with the same state again: it gets the checkpoint
        // the first try saved. Other state (another conversation that repeated a call id) is refused,
        // never handed someone else's checkpoint.
        const existing = yield* store.find({ requestId: requestIds[0]! })
        if (
          Option.isSome(existing) && existing.value.name === checkpoint.name &&
          sameRequests(existing.value.requestIds, requestIds)
        ) {
          if (sameState(existing.value.state, encoded)) return idsOf(existing.value).token
          return yield* new CheckpointInvalid({
            problems: [{
              path: "requestIds",
              message:
                "these requests already belong to a checkpoint with other state (a tool-call id repeated by another conversation?)"
            }]
          })
        }
        return yield* new CheckpointInvalid({
          problems: [{ path: "requestIds", message: "a request already belongs to another checkpoint" }]
        })
      })

    const find = (requestId: string) =>
      Effect.flatMap(store.find({ requestId }), (row) =>
        Option.isSome(row)
          ? Effect.succeed(idsOf(row.value).token)
          : Effect.fail(new CheckpointNotFound({ token: requestId })))

    const claimedBy = (token: string, row: CheckpointStore.Row) =>
      new CheckpointClaimed({ token, owner: row.claimedBy!, until: row.claimedUntil ?? 0 })

    /** Why `owner` could not claim the checkpoint, read after the conditional update. */
    const claimRefusal = (token: string, owner: string) =>
      Effect.flatMap(
        lookup(token),
        (row): Effect.Effect<never, AlreadyResumed | CheckpointClaimed> =>
          row.completedAt !== undefined
            ? Effect.fail(new AlreadyResumed({ token, resumedAt: row.completedAt }))
            : row.claimedBy !== undefined && row.claimedBy !== owner
            ? Effect.fail(claimedBy(token, row))
            : Effect.dieMessage(`checkpoint ${token}: ${owner} was refused a claim nobody else holds`)
      )

    /** Why the holder of `lease` may not act, read after the conditional update: superseded first. */
    const refusal = (token: string, lease: Lease) =>
      Effect.flatMap(
        lookup(token),
        (row): Effect.Effect<never, AlreadyResumed | CheckpointClaimed> =>
          row.claimedBy !== lease.owner || row.claims !== lease.fence
            ? row.claimedBy === undefined
              ? Effect.dieMessage(`checkpoint ${token}: ${lease.owner} acts on a resume it never claimed`)
              : Effect.fail(claimedBy(token, row))
            : row.completedAt !== undefined
            ? Effect.fail(new AlreadyResumed({ token, resumedAt: row.completedAt }))
            : Effect.dieMessage(
              `checkpoint ${token}: the write of ${lease.owner}'s lease was refused while it holds it`
            )
      )

    const resume: Service["resume"] = (checkpoint, token, options) =>
      Effect.gen(function*() {
        const row = yield* lookup(token, checkpoint.name)
        if (row.completedAt !== undefined) return yield* new AlreadyResumed({ token, resumedAt: row.completedAt })
        const requests = yield* Effect.forEach(idsOf(row).requestIds, (requestId) =>
          gate.resume(requestId).pipe(
            Effect.catchTag("RequestNotFound", () =>
              Effect.die(`checkpoint ${token} names a missing request ${requestId}`))
          ))
        const state = yield* Schema.decodeUnknown(Schema.parseJson(checkpoint.state))(row.state).pipe(
          Effect.mapError((error) =>
            new CheckpointInvalid({ problems: problemsOf(error) })
          )
        )
        const now = yield* Clock.currentTimeMillis
        const owner = options?.owner ?? `own_${crypto.randomUUID()}`
        const until = now + Duration.toMillis(options?.lease ?? "5 minutes")
        const fence = yield* store.claim(token, owner, now, until)
        if (Option.isNone(fence)) return yield* claimRefusal(token, owner)
        return { token, state, requests, lease: { owner, until, fence: fence.value } }
      })

    const renew: Service["renew"] = (token, lease, length) =>
      Effect.gen(function*() {
        const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(length)
        if (!(yield* store.renew(token, lease.owner, lease.fence, until))) return yield* refusal(token, lease)
        return { ...lease, until }
      })

    const update: Service["update"] = (checkpoint, token, lease, state) =>
      Effect.gen(function*() {
        const encoded = yield* encode(checkpoint, state)
        if (!(yield* store.update(token, lease.owner, lease.fence, encoded))) return yield* refusal(token, lease)
      })

    const complete: Service["complete"] = (token, lease) =>
      Effect.gen(function*() {
        if (yield* store.complete(token, lease.owner, lease.fence, yield* Clock.currentTimeMillis)) return
        const row = yield* lookup(token)
        if (row.completedAt !== undefined && row.claimedBy === lease.owner && row.claims === lease.fence) return
        return yield* refusal(token, lease)
      })

    const open: Service["open"] = (checkpoint) =>
      Effect.map(
        store.open(checkpoint.name),
        (rows) => rows.map(idsOf)
      )

    return Checkpoints.of({ save, find, resume, renew, update, complete, open })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Checkpoints, never, CheckpointStore.CheckpointStore | ToolGate.ToolGate> = Layer.effect(
  Checkpoints,
  makeService
)

/**
 * The gate and checkpoints over their stores: what the SQLite and PostgreSQL layers (and tests
 * on any store) provide to a pipeline.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithGate = (
  options: ToolGate.Options
): Layer.Layer<ToolGate.ToolGate | Checkpoints, PersistenceError, ApprovalStore | CheckpointStore.CheckpointStore> =>
  layer.pipe(Layer.provideMerge(ToolGate.layer(options)))
