/**
 * tool-gate inside `@effect/workflow` workflows. `WorkflowGate.gate(call, { success, run })` is a
 * step of a workflow: an allowed call runs as an activity; a call that needs a human suspends the
 * workflow on a `DurableDeferred` until the request is answered, from any process sharing the
 * store (`ToolGate.respond`, the HTTP API, the CLI), then runs once approved (with the approver's
 * edited arguments); a denial or an expiry fails the step with `ToolDenied`, so it flows into the
 * workflow's result like any other failure.
 *
 * The suspended step is a gate checkpoint holding the deferred's token, saved at the wait point of
 * the engine that runs the workflow (`waitPoint`). `layerBridge`, running beside the
 * `WorkflowEngine`, watches the gate's events and completes the deferred of each request that is
 * answered or expires; it also scans its engine's open wait points, for answers given while it was
 * not running. It claims the checkpoint first, so one process completes each deferred, and one
 * that crashes midway is retried after its lease.
 *
 * Several copies of an app on one store: a bridge settles only the wait points of its own engine,
 * because completing a deferred on an engine that does not run the execution wakes nobody (the
 * in-memory engine accepts it silently). By default an engine is known by its instance, so with
 * `WorkflowEngine.layerMemory` each copy wakes the workflows it runs (and those are lost with the
 * process, as the memory engine's are). Copies that share a durable engine, where any copy can
 * wake any execution, give it one name with `layerEngineName`, so that any copy's bridge settles
 * any wait point and a copy that stops leaves none behind.
 *
 * A tool-call id names one call in its session (see `ToolGate`): a second execution that reaches
 * a step with a call id another execution of the session is waiting on fails with
 * `InvalidToolCall` instead of sharing, or taking, the other's answer.
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
import { WorkflowEngine, type WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import { Context, Duration, Effect, Exit, Layer, Schedule, Schema, Stream } from "effect"
import { RequestId } from "./ApprovalRequest.js"
import * as Checkpoint from "./Checkpoint.js"
import * as PauseSignal from "./PauseSignal.js"
import type * as ToolCall from "./ToolCall.js"
import * as ToolGate from "./ToolGate.js"
import { CallAlreadyExecuted, InvalidToolCall, PersistenceError, ToolDenied } from "./ToolGateError.js"

/**
 * The name under which an engine's wait points are saved and settled. Unset (the default), each
 * engine instance has a name of its own; set it (`layerEngineName`) when the copies of an app share
 * a durable engine that can wake any execution from any copy.
 *
 * @since 0.1.0
 * @category context
 */
export class EngineName extends Context.Reference<EngineName>()("@tool-gate/core/WorkflowGate/EngineName", {
  defaultValue: (): string | undefined => undefined
}) {}

/**
 * Names the engine of this copy of the app, for wait points and bridges (see `EngineName`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerEngineName = (name: string): Layer.Layer<EngineName> => Layer.succeed(EngineName, name)

const instanceNames = new WeakMap<WorkflowEngine["Type"], string>()

const engineName: Effect.Effect<string, never, WorkflowEngine> = Effect.gen(function*() {
  const named = yield* EngineName
  if (named !== undefined) return named
  const engine = yield* WorkflowEngine
  const known = instanceNames.get(engine)
  if (known !== undefined) return known
  const name = `instance-${crypto.randomUUID()}`
  instanceNames.set(engine, name)
  return name
})

const WaitState = Schema.Struct({ deferredToken: DurableDeferred.Token })

/**
 * The wait point of the engine in context: where its workflows suspended on a tool call keep the
 * token of the deferred to complete, and what its bridge settles.
 *
 * @since 0.1.0
 * @category models
 */
export const waitPoint: Effect.Effect<Checkpoint.Checkpoint<typeof WaitState>, never, WorkflowEngine> = Effect.map(
  engineName,
  (name) => Checkpoint.make(`@tool-gate/core/WorkflowGate/${name}`, { state: WaitState })
)

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
      Schema.TaggedStruct("Waiting", { requestId: RequestId })
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
      error: Schema.Union(PersistenceError, InvalidToolCall),
      execute: Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        // saved again by a retried activity: the same request and deferred give the same checkpoint
        const token = yield* checkpoints.save(yield* waitPoint, [requestId], { deferredToken })
        // An answer given before the checkpoint existed woke nobody; settle it here.
        yield* settle(token)
      }).pipe(
        Effect.catchTags({
          // another execution (or another engine's) waits on this request: the call id was reused
          CheckpointInvalid: () =>
            new InvalidToolCall({
              problems: [{
                path: "id",
                message:
                  `call id ${call.id} of session ${call.sessionKey} is already awaited by another workflow execution: call ids must be unique per session`
              }]
            }),
          RequestNotFound: Effect.die
        })
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
 * Completes the deferred of the checkpoint `token` at the engine's `waitPoint` once its request is
 * answered or expired: `true` when this call did it; `false` when the request is still pending, the
 * checkpoint is another engine's wait point, or another process claimed or completed it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const settle = (
  token: Checkpoint.Token
): Effect.Effect<boolean, PersistenceError, Checkpoint.Checkpoints | WorkflowEngine> =>
  Effect.gen(function*() {
    const checkpoints = yield* Checkpoint.Checkpoints
    const resumed = yield* checkpoints.resume(yield* waitPoint, token, { lease: "30 seconds" })
    const [request] = resumed.requests
    yield* DurableDeferred.done(answerAt("tool-gate/answer"), {
      token: resumed.state.deferredToken,
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
          // the log names requests as text; the gate wrote this id
          checkpoints.find(RequestId.make(event.requestId!)).pipe(
            Effect.flatMap(settle),
            Effect.catchTag("CheckpointNotFound", () => Effect.succeed(false))
          )
        )
      ),
      Effect.forkScoped
    )
    yield* retried(
      "scanning suspended workflows",
      Effect.flatMap(
        Effect.flatMap(waitPoint, checkpoints.open),
        (open) => Effect.forEach(open, ({ token }) => settle(token))
      )
    ).pipe(
      Effect.repeat(Schedule.spaced(options.scanInterval ?? Duration.seconds(5))),
      Effect.forkScoped
    )
  }))
