/**
 * The gate inside `@effect/workflow` workflows: the real in-memory WorkflowEngine, the gate and
 * checkpoints on a SQLite file or a PostgreSQL schema, answers from a second gate on the same
 * database (as another process would give them).
 */
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { type ApprovalRequest, Checkpoint, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import * as WorkflowGate from "@tool-gate/core/WorkflowGate"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Cause, Effect, Exit, Layer, Option, Redacted, Schema, type Scope } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { describePostgres } from "../../support/postgresSuite.js"
import { pgSchema, tempDir } from "../../support/sqlStores.js"

const policy = Policy.unsafeMake({
  deny: [{ id: "no-drops", tool: "drop_database", reason: "Databases are dropped by a person." }],
  requireApproval: [
    { id: "quick", tool: "deploy", args: { env: "staging" }, ttlMs: 300 },
    { id: "deploys", tool: "deploy" }
  ],
  allow: ["read_file"]
})

const Release = Workflow.make({
  name: "Release",
  payload: { env: Schema.String, drop: Schema.optional(Schema.Boolean) },
  success: Schema.String,
  error: WorkflowGate.GateError,
  idempotencyKey: ({ env }) => env
})

/** Executions that share one session and its call ids (which the gate refuses to mix). */
const Shared = Workflow.make({
  name: "Shared",
  payload: { run: Schema.Number },
  success: Schema.String,
  error: WorkflowGate.GateError,
  idempotencyKey: ({ run }) => String(run)
})

const sessionOf = (executionId: string) => ToolCall.SessionKey.make(`wf-${executionId}`)

type Polled = Workflow.Result<string, WorkflowGate.GateError> | undefined

const pollUntil = (
  executionId: string,
  done: (result: Polled) => boolean,
  workflow: typeof Release | typeof Shared = Release
): Effect.Effect<Polled, never, WorkflowEngine.WorkflowEngine> =>
  Effect.flatMap(
    workflow.poll(executionId),
    (result) =>
      done(result)
        ? Effect.succeed(result)
        : Effect.delay(Effect.suspend(() => pollUntil(executionId, done, workflow)), "10 millis")
  )

/** Opens the gate (and checkpoints) on one fresh database, as often as asked. */
type Database = Effect.Effect<
  (options: ToolGate.Options) => Layer.Layer<ToolGate.ToolGate | Checkpoint.Checkpoints, unknown>,
  never,
  Scope.Scope
>

const sqlite: Database = Effect.map(
  tempDir,
  (dir) => (options) => ToolGateSqlite.layer({ filename: join(dir, "gate.db"), ...options })
)

const postgres = (url: string): Database =>
  Effect.map(pgSchema(url), (schemaUrl) => (options) => ToolGatePg.layer({ url: Redacted.make(schemaUrl), ...options }))

/** The workflow as one copy of the app defines it: `ran` lists every tool run. */
const releaseLive = (ran: Array<string>) => {
  const record = (line: string) => Effect.sync(() => (ran.push(line), line))
  return Release.toLayer(({ drop, env }, executionId) =>
    Effect.gen(function*() {
      const session = { sessionKey: sessionOf(executionId) }
      const notes = yield* WorkflowGate.gate(
        { ...session, id: "read", name: "read_file", args: { path: "CHANGELOG.md" } },
        { success: Schema.String, run: () => record("read CHANGELOG.md") }
      )
      if (drop) {
        yield* WorkflowGate.gate(
          { ...session, id: "drop", name: "drop_database", args: { name: env } },
          { success: Schema.String, run: () => record(`dropped ${env}`) }
        )
      }
      const deployed = yield* WorkflowGate.gate(
        { ...session, id: "deploy", name: "deploy", args: { env } },
        { success: Schema.String, run: (allowed) => record(`deployed to ${allowed.call.args.env}`) }
      )
      return `${notes}; ${deployed}`
    })
  )
}

const sharedLive = (ran: Array<string>) =>
  Shared.toLayer(() =>
    WorkflowGate.gate(
      { sessionKey: "shared", id: "shared-deploy", name: "deploy", args: { env: "shared" } },
      {
        success: Schema.String,
        run: (allowed) =>
          Effect.sync(() => (ran.push(`deployed to ${allowed.call.args.env}`), `deployed to ${allowed.call.args.env}`))
      }
    )
  )

/** One copy of the app on the database `open`: its own engine (and bridge unless `bridge: false`). */
const replica = (
  open: Effect.Effect.Success<Database>,
  ran: Array<string>,
  options: { readonly bridge: boolean }
) =>
  Layer.merge(releaseLive(ran), sharedLive(ran)).pipe(
    Layer.provideMerge(options.bridge ? WorkflowGate.layerBridge({ scanInterval: "50 millis" }) : Layer.empty),
    Layer.provideMerge(WorkflowEngine.layerMemory),
    Layer.provideMerge(open({ policy, sweepInterval: "50 millis" }))
  )

/** A fresh database; `ran` lists every tool run, `bridge: false` leaves the bridge out. */
const world = (database: Database, options: { readonly bridge: boolean }) =>
  Effect.gen(function*() {
    const open = yield* database
    const ran: Array<string> = []
    const Engine = replica(open, ran, options)
    // another process's gate on the same file: the human answers there
    const answer = (requestId: ApprovalRequest.RequestId, response: typeof ApprovalRequest.ApprovalResponse.Encoded) =>
      Effect.flatMap(ToolGate.ToolGate, (gate) => gate.respond(requestId, response)).pipe(
        Effect.provide(open({ policy })),
        Effect.scoped
      )
    return { open, Engine, answer, ran }
  })

type Env = WorkflowEngine.WorkflowEngine | ToolGate.ToolGate | Checkpoint.Checkpoints

/** Starts the workflow and returns once it is suspended, with its pending request. */
const startSuspended = (env: string) =>
  Effect.gen(function*() {
    const executionId = yield* Release.execute({ env }, { discard: true })
    const suspended = yield* pollUntil(executionId, (result) => result !== undefined)
    expect(suspended?._tag).toBe("Suspended")
    const gate = yield* ToolGate.ToolGate
    const [request, ...others] = yield* gate.pending({ sessionKey: sessionOf(executionId) })
    expect(others).toEqual([])
    return { executionId, request: request! }
  })

const finished = (executionId: string) =>
  Effect.map(pollUntil(executionId, (result) => result?._tag === "Complete"), (result) => {
    if (result?._tag !== "Complete") throw new Error("expected a complete workflow")
    return result.exit
  })

const failureOf = (exit: Exit.Exit<string, WorkflowGate.GateError>) => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${exit.value}`)
  return Option.getOrThrow(Cause.failureOption(exit.cause))
}

const suite = (name: string, database: Database) => {
  const inWorld = (
    body: (w: Effect.Effect.Success<ReturnType<typeof world>>) => Effect.Effect<unknown, unknown, Env | Scope.Scope>,
    options: { readonly bridge: boolean } = { bridge: true }
  ) =>
    Effect.gen(function*() {
      const w = yield* world(database, options)
      return yield* Effect.provide(body(w), w.Engine)
    })

  describe(`WorkflowGate on the in-memory WorkflowEngine (${name})`, () => {
    it.live(
      "approved: the workflow suspends, an answer from another gate wakes it, the call runs once with the edit",
      () =>
        inWorld(({ answer, ran }) =>
          Effect.gen(function*() {
            const checkpoints = yield* Checkpoint.Checkpoints
            const { executionId, request } = yield* startSuspended("production")
            expect(request.toolCall).toMatchObject({ name: "deploy", args: { env: "production" } })
            expect((yield* checkpoints.open(yield* WorkflowGate.waitPoint)).map((cp) => cp.requestIds)).toEqual([[
              request.requestId
            ]])
            expect(ran).toEqual(["read CHANGELOG.md"])

            yield* answer(request.requestId, { decision: "approve_once", editedArgs: { env: "production-eu" } })
            const exit = yield* finished(executionId)
            expect(exit).toEqual(Exit.succeed("read CHANGELOG.md; deployed to production-eu"))
            // the workflow ran again from the top after the pause: journaled steps did not run again
            expect(ran).toEqual(["read CHANGELOG.md", "deployed to production-eu"])
            expect(yield* checkpoints.open(yield* WorkflowGate.waitPoint)).toEqual([])
          })
        ),
      30_000
    )

    it.live(
      "denied by a human: the workflow fails with ToolDenied and the reason; the tool never runs",
      () =>
        inWorld(({ answer, ran }) =>
          Effect.gen(function*() {
            const { executionId, request } = yield* startSuspended("production")
            yield* answer(request.requestId, { decision: "deny", reason: "Freeze until Monday.", respondedBy: "ana" })
            const error = failureOf(yield* finished(executionId))
            expect(error).toMatchObject({ _tag: "ToolDenied", outcome: "denied", reason: "Freeze until Monday." })
            expect(ran).toEqual(["read CHANGELOG.md"])
          })
        ),
      30_000
    )

    it.live(
      "nobody answers: the request expires and the workflow fails with ToolDenied (expired)",
      () =>
        inWorld(({ ran }) =>
          Effect.gen(function*() {
            const { executionId } = yield* startSuspended("staging")
            const error = failureOf(yield* finished(executionId))
            expect(error).toMatchObject({ _tag: "ToolDenied", outcome: "expired" })
            expect(ran).toEqual(["read CHANGELOG.md"])
          })
        ),
      30_000
    )

    it.live(
      "denied by policy: the workflow fails at once, without suspending",
      () =>
        inWorld(({ ran }) =>
          Effect.gen(function*() {
            const exit = yield* Effect.exit(Release.execute({ env: "staging", drop: true }))
            expect(exit).toMatchObject({ _tag: "Failure" })
            expect(failureOf(exit as Exit.Exit<string, WorkflowGate.GateError>)).toMatchObject({
              _tag: "ToolDenied",
              outcome: "policy",
              rule: "no-drops"
            })
            expect(ran).toEqual(["read CHANGELOG.md"])
          })
        ),
      30_000
    )

    it.live(
      "an answer given while no bridge ran: a bridge started later finds the open wait point and wakes the workflow",
      () =>
        inWorld(({ answer, ran }) =>
          Effect.gen(function*() {
            const { executionId, request } = yield* startSuspended("production")
            yield* answer(request.requestId, { decision: "approve_once" })
            expect(yield* Release.poll(executionId)).toMatchObject({ _tag: "Suspended" })
            yield* Layer.build(WorkflowGate.layerBridge())
            expect(yield* finished(executionId)).toEqual(Exit.succeed("read CHANGELOG.md; deployed to production"))
            expect(ran).toEqual(["read CHANGELOG.md", "deployed to production"])
          }), { bridge: false }),
      30_000
    )

    it.live(
      "two copies of the app on one store, each with its own engine and bridge: every approved workflow is woken on the copy that runs it",
      () =>
        inWorld(({ answer, open, ran }) =>
          Effect.gen(function*() {
            const ranB: Array<string> = []
            const b = yield* Layer.build(replica(open, ranB, { bridge: true }))
            const envs = Array.from({ length: 8 }, (_, i) => `region-${i}`)
            const started = yield* Effect.forEach(envs, startSuspended)
            const startedOnB = yield* Effect.provide(startSuspended("region-b"), b)
            yield* Effect.forEach(
              [...started, startedOnB],
              ({ request }) => answer(request.requestId, { decision: "approve_once" })
            )
            for (const [i, { executionId }] of started.entries()) {
              const exit = yield* finished(executionId).pipe(Effect.timeout("10 seconds"))
              expect(exit).toEqual(Exit.succeed(`read CHANGELOG.md; deployed to ${envs[i]}`))
            }
            expect(yield* Effect.provide(finished(startedOnB.executionId), b).pipe(Effect.timeout("10 seconds")))
              .toEqual(Exit.succeed("read CHANGELOG.md; deployed to region-b"))
            expect(ran.filter((line) => line.startsWith("deployed")).sort()).toEqual(
              envs.map((env) => `deployed to ${env}`).sort()
            )
            expect(ranB.filter((line) => line.startsWith("deployed"))).toEqual(["deployed to region-b"])
            // a bridge completes a checkpoint after it woke its workflow, which may finish first
            const checkpoints = yield* Checkpoint.Checkpoints
            const stillOpen = checkpoints.open(yield* WorkflowGate.waitPoint)
            let left = yield* stillOpen
            for (let i = 0; i < 250 && left.length > 0; i++) {
              yield* Effect.sleep("20 millis")
              left = yield* stillOpen
            }
            expect(left).toEqual([])
          })
        ),
      30_000
    )

    it.live(
      "a second execution that repeats a session's call id fails with InvalidToolCall; the first still completes",
      () =>
        inWorld(({ answer, ran }) =>
          Effect.gen(function*() {
            const first = yield* Shared.execute({ run: 1 }, { discard: true })
            expect(
              yield* Effect.flatMap(pollUntil(first, (r) => r !== undefined, Shared), (r) => Effect.succeed(r?._tag))
            )
              .toBe("Suspended")
            const second = yield* Shared.execute({ run: 2 }, { discard: true })
            const refused = yield* pollUntil(second, (r) => r?._tag === "Complete", Shared).pipe(
              Effect.timeout("10 seconds")
            )
            if (refused?._tag !== "Complete") throw new Error("expected the second execution to complete")
            expect(failureOf(refused.exit)).toMatchObject({ _tag: "InvalidToolCall" })
            expect(String(failureOf(refused.exit).message)).toContain("shared-deploy")

            const gate = yield* ToolGate.ToolGate
            const [request] = yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("shared") })
            yield* answer(request!.requestId, { decision: "approve_once" })
            const done = yield* pollUntil(first, (r) => r?._tag === "Complete", Shared).pipe(
              Effect.timeout("10 seconds")
            )
            expect(done).toMatchObject({ _tag: "Complete", exit: Exit.succeed("deployed to shared") })
            expect(ran.filter((line) => line === "deployed to shared")).toHaveLength(1)
          })
        ),
      30_000
    )
  })
}

describe("WorkflowGate engine names", () => {
  it.live(
    "an engine named with layerEngineName keeps its wait points under that name; an unnamed one under its instance",
    () =>
      Effect.gen(function*() {
        const open = yield* sqlite
        const named = yield* Layer.build(
          replica(open, [], { bridge: false }).pipe(Layer.provideMerge(WorkflowGate.layerEngineName("orders")))
        )
        const unnamed = yield* Layer.build(replica(open, [], { bridge: false }))
        const namedPoint = yield* Effect.provide(WorkflowGate.waitPoint, named)
        const unnamedPoint = yield* Effect.provide(WorkflowGate.waitPoint, unnamed)
        expect(namedPoint.name).toBe("@tool-gate/core/WorkflowGate/orders")
        expect(unnamedPoint.name).toMatch(/^@tool-gate\/core\/WorkflowGate\/instance-[0-9a-f-]{36}$/)
        expect((yield* Effect.provide(WorkflowGate.waitPoint, unnamed)).name).toBe(unnamedPoint.name)

        const { request } = yield* Effect.provide(startSuspended("production"), named)
        const checkpoints = yield* Effect.provide(Checkpoint.Checkpoints, named)
        expect((yield* checkpoints.open(namedPoint)).map((cp) => cp.requestIds)).toEqual([[request.requestId]])
        expect(yield* checkpoints.open(unnamedPoint)).toEqual([])
      }),
    30_000
  )
})

suite("sqlite", sqlite)
describePostgres("workflow tests", (url) => suite("postgres", postgres(url)))
