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
 * import { Checkpoint, PauseSignal, ToolGate } from "@tool-gate/core"
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
 * const later = (token: string) =>
 *   Effect.flatMap(Checkpoint.Checkpoints, (checkpoints) => checkpoints.resume(AgentTurn, token))
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import type { ApprovalRequest, RequestId } from "./ApprovalRequest.js"
import { CheckpointStore } from "./CheckpointStore.js"
import { ToolGate } from "./ToolGate.js"
import {
  AlreadyResumed,
  CheckpointInvalid,
  CheckpointNotFound,
  type PersistenceError,
  problemsOf,
  RequestNotFound,
  RequestPending
} from "./ToolGateError.js"

/**
 * @since 0.1.0
 * @category models
 */
export const Token = Schema.String.pipe(Schema.pattern(/^cp_[0-9a-f-]{36}$/), Schema.brand("@tool-gate/CheckpointToken"))

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
 * What `resume` hands back: the decoded state and every request of the checkpoint, resolved, in
 * the order they were saved.
 *
 * @since 0.1.0
 * @category models
 */
export interface Resumed<A> {
  readonly token: Token
  readonly state: A
  readonly requests: ReadonlyArray<ApprovalRequest>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Saves `state` at `checkpoint` with the pending request(s) it waits for (one model turn may
   * pause several tool calls). A request belongs to at most one checkpoint.
   */
  readonly save: <S extends Schema.Schema.Any>(
    checkpoint: Checkpoint<S>,
    requestIds: ReadonlyArray<RequestId | string>,
    state: Schema.Schema.Type<S>
  ) => Effect.Effect<Token, RequestNotFound | CheckpointInvalid | PersistenceError, Schema.Schema.Context<S>>
  /** The token of the checkpoint that waits for this request. */
  readonly find: (requestId: string) => Effect.Effect<Token, CheckpointNotFound | PersistenceError>
  /**
   * Once every request is answered or expired: the state and the resolutions. Fails with
   * `RequestPending` while any request is unanswered (partial answers stay), and with
   * `AlreadyResumed` the second time.
   */
  readonly resume: <S extends Schema.Schema.Any>(
    checkpoint: Checkpoint<S>,
    token: string
  ) => Effect.Effect<
    Resumed<Schema.Schema.Type<S>>,
    CheckpointNotFound | RequestPending | AlreadyResumed | CheckpointInvalid | PersistenceError,
    Schema.Schema.Context<S>
  >
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Checkpoints extends Context.Tag("@tool-gate/core/Checkpoints")<Checkpoints, Service>() {}

const tokenFor = (): Token => `cp_${crypto.randomUUID()}` as Token

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeService: Effect.Effect<Service, never, CheckpointStore | ToolGate> = Effect.gen(function*() {
  const store = yield* CheckpointStore
  const gate = yield* ToolGate

  const lookup = (token: string, name?: string) =>
    Effect.flatMap(store.find({ token }), (row) =>
      Option.isSome(row) && (name === undefined || row.value.name === name)
        ? Effect.succeed(row.value)
        : Effect.fail(new CheckpointNotFound({ token })))

  const save: Service["save"] = (checkpoint, requestIds, state) =>
    Effect.gen(function*() {
      if (requestIds.length === 0) {
        return yield* new CheckpointInvalid({ problems: [{ path: "requestIds", message: "at least one request" }] })
      }
      for (const requestId of requestIds) yield* gate.getRequest(requestId)
      const encoded = yield* Schema.encode(Schema.parseJson(checkpoint.state))(state).pipe(
        Effect.mapError((error) => new CheckpointInvalid({ problems: problemsOf(error) }))
      )
      const token = tokenFor()
      const saved = yield* store.save({
        token,
        name: checkpoint.name,
        state: encoded,
        requestIds: [...requestIds],
        createdAt: yield* Clock.currentTimeMillis
      })
      if (!saved) {
        return yield* new CheckpointInvalid({
          problems: [{ path: "requestIds", message: "a request already belongs to another checkpoint" }]
        })
      }
      return token
    })

  const find = (requestId: string) =>
    Effect.flatMap(store.find({ requestId }), (row) =>
      Option.isSome(row)
        ? Effect.succeed(row.value.token as Token)
        : Effect.fail(new CheckpointNotFound({ token: requestId })))

  const resume: Service["resume"] = (checkpoint, token) =>
    Effect.gen(function*() {
      const row = yield* lookup(token, checkpoint.name)
      if (row.resumedAt !== undefined) return yield* new AlreadyResumed({ token, resumedAt: row.resumedAt })
      const requests = yield* Effect.forEach(row.requestIds, (requestId) =>
        gate.resume(requestId).pipe(
          Effect.catchTag("RequestNotFound", () => Effect.die(`checkpoint ${token} names a missing request ${requestId}`))
        ))
      const state = yield* Schema.decodeUnknown(Schema.parseJson(checkpoint.state))(row.state).pipe(
        Effect.mapError((error) => new CheckpointInvalid({ problems: problemsOf(error) }))
      )
      const now = yield* Clock.currentTimeMillis
      if (!(yield* store.markResumed(token, now))) {
        const again = yield* lookup(token)
        return yield* new AlreadyResumed({ token, resumedAt: again.resumedAt ?? now })
      }
      return { token: token as Token, state, requests }
    })

  return Checkpoints.of({ save, find, resume })
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Checkpoints, never, CheckpointStore | ToolGate> = Layer.effect(Checkpoints, makeService)
