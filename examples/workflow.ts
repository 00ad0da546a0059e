/**
 * tool-gate inside an `@effect/workflow` workflow, on the in-memory `WorkflowEngine` and the
 * embedded SQLite store. A release workflow reads the changelog (allowed), then deploys (needs a
 * human): the workflow suspends on a durable deferred; a human answers through another `ToolGate`
 * on the same database file (as a second process would); the bridge wakes the workflow, which
 * runs the deploy once approved. A denial and an expiry end the workflow with `ToolDenied`.
 *
 *   bun examples/workflow.ts
 */
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { type ApprovalRequest, ApprovalStore, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import * as WorkflowGate from "@tool-gate/core/WorkflowGate"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Cause, Console, Effect, Exit, Layer, Option, Schema } from "effect"
import { rmSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { auditTrail } from "./printAudit.js"

const db = fileURLToPath(new URL("../.toolgate/workflow.db", import.meta.url))

const policy = Policy.unsafeMake({
  requireApproval: [
    { id: "staging-deploys", tool: "deploy", args: { env: "staging" }, ttlMs: 1_000 },
    { id: "deploys", tool: "deploy", reason: "A deploy changes what users run." }
  ],
  allow: ["read_file"]
})

const Release = Workflow.make({
  name: "Release",
  payload: { version: Schema.String, env: Schema.String },
  success: Schema.String,
  error: WorkflowGate.GateError,
  idempotencyKey: ({ env, version }) => `${version}@${env}`
})

const sessionOf = (executionId: string) => ToolCall.SessionKey.make(`release-${executionId.slice(0, 8)}`)

const tool = (line: string, result: string) => Effect.as(Console.log(`  tool   < ${line}`), result)

// Each gated step is journaled: when the workflow runs again after its pause, the changelog is
// not read again and the deploy runs once.
const ReleaseLive = Release.toLayer(({ env, version }, executionId) =>
  Effect.gen(function*() {
    const session = { sessionKey: sessionOf(executionId), agentId: "release-workflow" }
    const notes = yield* WorkflowGate.gate(
      { ...session, id: "read-changelog", name: "read_file", args: { path: "CHANGELOG.md" } },
      { success: Schema.String, run: () => tool("read CHANGELOG.md", `## ${version} - faster builds`) }
    )
    const deployed = yield* WorkflowGate.gate(
      { ...session, id: "deploy", name: "deploy", args: { version, env } },
      {
        success: Schema.String,
        run: (allowed) =>
          tool(`deploy ${JSON.stringify(allowed.call.args)}`, `deployed ${version} to ${allowed.call.args.env}`)
      }
    )
    return `released (${notes}; ${deployed})`
  })
)

const Gate = ToolGateSqlite.layer({ filename: db, policy, sweepInterval: "100 millis" })
const Live = ReleaseLive.pipe(
  Layer.provideMerge(WorkflowGate.layerBridge()),
  Layer.provideMerge(WorkflowEngine.layerMemory),
  Layer.provideMerge(Gate)
)

// The human's side: a gate of its own on the same file, as the CLI or the HTTP server would be.
const answer = (requestId: ApprovalRequest.RequestId, response: typeof ApprovalRequest.ApprovalResponse.Encoded) =>
  Effect.flatMap(ToolGate.ToolGate, (gate) => gate.respond(requestId, response)).pipe(
    Effect.provide(ToolGateSqlite.layer({ filename: db, policy })),
    Effect.scoped
  )

type Polled = Workflow.Result<string, WorkflowGate.GateError> | undefined

/** Polls the engine until the execution's result satisfies `done`. */
const pollUntil = (
  executionId: string,
  done: (result: Polled) => boolean
): Effect.Effect<Polled, never, WorkflowEngine.WorkflowEngine> =>
  Effect.flatMap(
    Release.poll(executionId),
    (result) =>
      done(result)
        ? Effect.succeed(result)
        : Effect.delay(Effect.suspend(() => pollUntil(executionId, done)), "20 millis")
  )

const release = (version: string, env: string, response?: typeof ApprovalRequest.ApprovalResponse.Encoded) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    yield* Console.log(`workflow Release ${version} -> ${env}`)
    const executionId = yield* Release.execute({ version, env }, { discard: true })
    const suspended = yield* pollUntil(executionId, (result) => result !== undefined)
    const [request] = yield* gate.pending({ sessionKey: sessionOf(executionId) })
    yield* Console.log(`  gate   : needs a human: request ${request!.requestId}: ${request!.prompt}`)
    yield* Console.log(`  engine : ${suspended!._tag}`)
    if (response !== undefined) {
      yield* answer(request!.requestId, response)
      yield* Console.log(`  human  : ${response.decision}${response.reason ? ` (${response.reason})` : ""}`)
    } else {
      yield* Console.log(`  human  : (nobody answers within ${request!.expiresAt - request!.createdAt} ms)`)
    }
    const done = yield* pollUntil(executionId, (result) => result?._tag === "Complete")
    if (done?._tag !== "Complete") return
    yield* Console.log(`  engine : Complete, ${
      Exit.match(done.exit, {
        onSuccess: (text) => `success: ${text}`,
        onFailure: (cause) =>
          Option.match(Cause.failureOption(cause), {
            onNone: () => `defect: ${Cause.pretty(cause)}`,
            onSome: (error) =>
              `failure: ${error._tag}${"outcome" in error ? ` (${error.outcome})` : ""}: ${error.message}`
          })
      })
    }`)
  })

const program = Effect.gen(function*() {
  yield* release("1.2.0", "production", { decision: "approve_once", respondedBy: "ana" })
  yield* release("1.2.1", "production", {
    decision: "deny",
    reason: "Release freeze until Monday.",
    respondedBy: "ana"
  })
  yield* release("1.2.2", "staging")
  const store = yield* ApprovalStore.ApprovalStore
  yield* Console.log(auditTrail(yield* store.events()))
})

for (const suffix of ["", "-wal", "-shm"]) rmSync(`${db}${suffix}`, { force: true })

Effect.runPromise(program.pipe(Effect.provide(Live))).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
