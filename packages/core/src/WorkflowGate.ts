/**
 * tool-gate inside `@effect/workflow` workflows. `WorkflowGate.gate(call, { success, run })` is a
 * step of a workflow: an allowed call runs as an activity; a call that needs a human suspends the
 * workflow on a `DurableDeferred` until the request is answered, from any process sharing the
 * store (`ToolGate.respond`, the HTTP API, the CLI), then runs once approved (with the approver's
 * edited arguments); a denial or an expiry fails the step with `ToolDenied`, so it flows into the
 * workflow's result like any other failure.
 *
 * The suspended step is a gate checkpoint (at the wait point `WaitPoint`) holding the deferred's
 * token. `layerBridge`, running beside the `WorkflowEngine`, watches the gate's events and
 * completes the deferred of each request that is answered or expires; it also scans the open wait
 * points, for answers given while it was not running. It claims the checkpoint first, so one
 * process completes each deferred, and one that crashes midway is retried after its lease.
 *
 * This module needs `@effect/workflow` (an optional peer of `@tool-gate/core`); nothing else in
 * the package imports it. Import it on its own path.
 *
 * @example
 * import * as Workflow from "@effect/workflow/Workflow"
 * import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
 * import { Policy } from "@tool-gate/core"
 * import * as WorkflowGate from "@tool-gate/core/WorkflowGate"
 * import { ToolGateSqlite } from "@tool-gate/sqlite"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const Release = Workflow.make({
 *   name: "Release",
 *   payload: { version: Schema.String },
 *   success: Schema.String,
 *   error: WorkflowGate.GateError,
 *   idempotencyKey: ({ version }) => version
 * })
 *
 * const ReleaseLive = Release.toLayer(({ version }, executionId) =>
 *   WorkflowGate.gate(
 *     { id: `deploy-${version}`, name: "deploy", args: { version }, sessionKey: executionId },
 *     { success: Schema.String, run: (allowed) => Effect.succeed(`deployed ${allowed.call.args.version}`) }
 *   )
 * )
 *
 * const Live = ReleaseLive.pipe(
 *   Layer.provideMerge(WorkflowGate.layerBridge()),
 *   Layer.provideMerge(WorkflowEngine.layerMemory),
 *   Layer.provideMerge(ToolGateSqlite.layer({
 *     filename: ".toolgate/workflows.db",
 *     policy: Policy.unsafeMake({ requireApproval: ["deploy"] })
 *   }))
 * )
 *
 * // start it; it suspends at the deploy until someone answers with ToolGate.respond
 * const start = Release.execute({ version: "1.2.0" }, { discard: true })
 * Effect.runFork(Effect.zipRight(start, Effect.never).pipe(Effect.provide(Live)))
 *
 * @since 0.1.0
 */
import * as Activity from "@effect/workflow/Activity"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import type { WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import { Duration, Effect, Exit, Layer, Schedule, Schema, Stream } from "effect"
import * as Checkpoint from "./Checkpoint.js"
import * as PauseSignal from "./PauseSignal.js"
import type * as ToolCall from "./ToolCall.js"
import * as ToolGate from "./ToolGate.js"
import { CallAlreadyExecuted, InvalidToolCall, PersistenceError, ToolDenied } from "./ToolGateError.js"

/**
 * The wait point of a workflow suspended on a tool call: the token of the deferred to complete.
 *
 * @since 0.1.0
 * @category models
 */
export const WaitPoint = Checkpoint.make("@tool-gate/core/WorkflowGate", {
  state: Schema.Struct({ deferredToken: Schema.String })
})

/**
 * How a request ended, as the suspended workflow is woken with it.
 *
 * @since 0.1.0
 * @category models
 */
export const Ended = Schema.Literal("approved", "denied", "expired")

/**
 * The failures of a gated step, as a schema for the workflow's `error` (and the journal):
 * `ToolDenied` (policy, a human, or expiry), `CallAlreadyExecuted`, `InvalidToolCall`,
 * `PersistenceError`.
 *
 * @since 0.1.0
 * @category models
 */
export const GateError = Schema.Union(ToolDenied, CallAlreadyExecuted, InvalidToolCall, PersistenceError)

/**
 * @since 0.1.0
 * @category models
 */
export type GateError = typeof GateError.Type

// `DurableDeferred.done` names the deferred by the token; the definition only encodes the value.
const answerAt = (name: string) => DurableDeferred.make(name, { success: Ended })

/**
 * @since 0.1.0
 * @category models
 */
export interface GateOptions<Success extends Schema.Schema.Any, Error extends Schema.Schema.All, R> {
  /** the schema of `run`'s result: the workflow journals it */
  readonly success: Success
  /** the schema of `run`'s own failures (default: none) */
  readonly error?: Error | undefined
  readonly run: (allowed: ToolGate.Allowed) => Effect.Effect<Success["Type"], Error["Type"], R>
}

/**
 * A gated tool call as a workflow step: runs it when allowed; when a human must answer,
 * suspends the workflow until the answer (or the TTL) and then runs it or fails with
 * `ToolDenied`. Each part is an activity named after the call id, so a replayed workflow never
 * asks twice or runs an approved call twice.
 *
 * @since 0.1.0
 * @category combinators
 */
export const gate = <Success extends Schema.Schema.Any, R, Error extends Schema.Schema.All = typeof Schema.Never>(
  call: ToolCall.ToolCallInput,
  options: GateOptions<Success, Error, R>
): Effect.Effect<
  Success["Type"],
  GateError | Error["Type"],
  | ToolGate.ToolGate
  | Checkpoint.Checkpoints
  | WorkflowEngine
  | WorkflowInstance
  | Exclude<R, WorkflowEngine | WorkflowInstance>
  | Success["Context"]
  | Error["Context"]
> =>
  Effect.gen(function*() {
    // The step's schemas are generic; their contexts are in the signature.
    const success = options.success as unknown as Schema.Schema<Success["Type"], unknown>
    const errors = Schema.Union(
      GateError,
      (options.error ?? Schema.Never) as unknown as Schema.Schema<Error["Type"], unknown>
    )
    const Asked = Schema.Union(
      Schema.TaggedStruct("Ran", { value: success }),
      Schema.TaggedStruct("Waiting", { requestId: Schema.String })
    )
    const authorize = Effect.flatMap(ToolGate.ToolGate, (service) => service.authorize(call))

    const asked = yield* Activity.make({
      name: `tool-gate/${call.id}/ask`,
      success: Asked,
      error: errors,
      execute: Effect.flatMap(authorize, (result): Effect.Effect<typeof Asked.Type, GateError | Error["Type"], R> =>
        PauseSignal.isPauseSignal(result)
          ? Effect.succeed({ _tag: "Waiting", requestId: result.requestId })
          : Effect.map(options.run(result), (value) => ({ _tag: "Ran", value })))
    })
    if (asked._tag === "Ran") {
      return asked.value
    }
    const requestId = asked.requestId

    const answer = answerAt(`tool-gate/${call.id}`)
    const deferredToken = yield* DurableDeferred.token(answer)
    yield* Activity.make({
      name: `tool-gate/${call.id}/wait`,
      error: PersistenceError,
      execute: Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        // saved again by a retried activity: the same requests give the same checkpoint
        const token = yield* checkpoints.save(WaitPoint, [requestId], { deferredToken })
        // An answer given before the checkpoint existed woke nobody; settle it here.
        yield* settle(token)
      }).pipe(
        Effect.catchIf(
          (error): error is Exclude<typeof error, PersistenceError> =>
            error._tag !== "PersistenceError",
          (error) =>
            Effect.die(error)
        )
      )
    })
    yield* DurableDeferred.await(answer)

    return yield* Activity.make({
      name: `tool-gate/${call.id}/run`,
      success,
      error: errors,
      // approved: the approval is spent and the call runs; denied or expired: `ToolDenied`
      execute: Effect.flatMap(authorize, (result): Effect.Effect<Success["Type"], GateError | Error["Type"], R> =>
        PauseSignal.isPauseSignal(result)
          ? Effect.dieMessage(`tool-gate: request ${result.requestId} woke its workflow while still pending`)
          : options.run(result))
    })
  })

/**
 * Completes the deferred of the checkpoint `token` at `WaitPoint` once its request is answered
 * or expired: `true` when this call did it; `false` when the request is still pending, the
 * checkpoint is another wait point's, or another process claimed or completed it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const settle = (
  token: string
): Effect.Effect<boolean, PersistenceError, Checkpoint.Checkpoints | WorkflowEngine> =>
  Effect.gen(function*() {
    const checkpoints = yield* Checkpoint.Checkpoints
    const resumed = yield* checkpoints.resume(WaitPoint, token, { lease: "30 seconds" })
    const [request] = resumed.requests
    yield* DurableDeferred.done(answerAt("tool-gate/answer"), {
      token: resumed.state.deferredToken as DurableDeferred.Token,
      exit: Exit.succeed(request!.status as typeof Ended.Type)
    })
    yield* checkpoints.complete(token, resumed.lease)
    return true
  }).pipe(
    Effect.catchTags({
      RequestPending: () => Effect.succeed(false),
      CheckpointNotFound: () => Effect.succeed(false),
      CheckpointClaimed: () => Effect.succeed(false),
      AlreadyResumed: () => Effect.succeed(false),
      CheckpointInvalid: Effect.die
    })
  )

/**
 * @since 0.1.0
 * @category models
 */
export interface BridgeOptions {
  /** how often open wait points are scanned for answers no event reported (default 5 seconds) */
  readonly scanInterval?: Duration.DurationInput | undefined
}

/**
 * Wakes suspended workflows: on every `approval.resolved` or `approval.expired` event (from any
 * process sharing the store) it settles that request's wait point, and every `scanInterval` (and
 * at start) it settles every open one, so answers given while no bridge ran are not lost.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerBridge = (
  options: BridgeOptions = {}
): Layer.Layer<never, never, ToolGate.ToolGate | Checkpoint.Checkpoints | WorkflowEngine> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const checkpoints = yield* Checkpoint.Checkpoints
    const context = yield* Effect.context<Checkpoint.Checkpoints | WorkflowEngine>()
    const retried = <A>(
      what: string,
      effect: Effect.Effect<A, PersistenceError, Checkpoint.Checkpoints | WorkflowEngine>
    ) =>
      effect.pipe(
        Effect.catchAll((error) => Effect.logWarning(`tool-gate: ${what} failed; the next scan retries`, error)),
        Effect.provide(context)
      )

    yield* gate.audit.pipe(
      Stream.filter((event) => event.type === "approval.resolved" || event.type === "approval.expired"),
      Stream.runForEach((event) =>
        retried(
          "waking a workflow",
          checkpoints.find(event.requestId!).pipe(
            Effect.flatMap(settle),
            Effect.catchTag("CheckpointNotFound", () => Effect.succeed(false))
          )
        )
      ),
      Effect.forkScoped
    )
    yield* retried(
      "scanning suspended workflows",
      Effect.flatMap(checkpoints.open(WaitPoint), (open) => Effect.forEach(open, ({ token }) => settle(token)))
    ).pipe(
      Effect.repeat(Schedule.spaced(options.scanInterval ?? Duration.seconds(5))),
      Effect.forkScoped
    )
  }))
