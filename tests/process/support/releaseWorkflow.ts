/**
 * One copy of a workflow app for the process tests: a release workflow that deploys (needs a
 * human) on the in-memory engine, with its own bridge, on a SQLite file shared with other copies.
 */
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { Policy, ToolCall } from "@tool-gate/core"
import * as WorkflowGate from "@tool-gate/core/WorkflowGate"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer, Schema } from "effect"

export const policy = Policy.unsafeMake({ requireApproval: ["deploy"] })

export const Release = Workflow.make({
  name: "Release",
  payload: { env: Schema.String },
  success: Schema.String,
  error: WorkflowGate.GateError,
  idempotencyKey: ({ env }) => env
})

export const sessionOf = (executionId: string) => ToolCall.SessionKey.make(`wf-${executionId}`)

/** The app on `filename`: `ran` lists the deploys this copy ran. */
export const replica = (filename: string, ran: Array<string>) =>
  Release.toLayer(({ env }, executionId) =>
    WorkflowGate.gate(
      { sessionKey: sessionOf(executionId), id: "deploy", name: "deploy", args: { env } },
      { success: Schema.String, run: () => Effect.sync(() => (ran.push(env), `deployed to ${env}`)) }
    )
  ).pipe(
    Layer.provideMerge(WorkflowGate.layerBridge({ scanInterval: "50 millis" })),
    Layer.provideMerge(WorkflowEngine.layerMemory),
    Layer.provideMerge(ToolGateSqlite.layer({ filename, policy, sweepInterval: "50 millis" }))
  )
