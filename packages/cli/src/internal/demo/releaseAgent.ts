/**
 * The release agent of `toolgate demo`, shipped inside the CLI so the published bundle carries it
 * (the process tests run it too): three tools (`read_file` allowed, `deploy` needing approval,
 * `drop_database` denied by policy), the policy, a scripted model (no network) and the layers on
 * one SQLite file.
 */
import { Tool, Toolkit } from "@effect/ai"
import { AgentLoop, GatedToolkit, ScriptedModel } from "@tool-gate/ai"
import { Policy } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer, Schema } from "effect"

const ReleaseTools = Toolkit.make(
  Tool.make("read_file", {
    description: "Read a file of the repository",
    parameters: { path: Schema.String },
    success: Schema.String
  }),
  Tool.make("deploy", {
    description: "Deploy a version to an environment",
    parameters: { version: Schema.String, env: Schema.String },
    success: Schema.String
  }),
  Tool.make("drop_database", {
    description: "Drop a database",
    parameters: { name: Schema.String },
    success: Schema.String
  })
)

const ReleaseToolsLive = ReleaseTools.toLayer({
  read_file: ({ path }) =>
    Effect.succeed(path === "CHANGELOG.md" ? "## 1.2.0 - faster builds, login redirect fixed" : `(no file ${path})`),
  deploy: ({ env, version }) => Effect.succeed(`deployed ${version} to ${env}`),
  drop_database: ({ name }) => Effect.succeed(`dropped ${name}`)
})

const policy = (ttlMs: number) =>
  Policy.unsafeMake({
    ttlMs,
    deny: [{ id: "no-drops", tool: "drop_database", reason: "Databases are dropped by a person, after a backup." }],
    requireApproval: [{ id: "deploys", tool: "deploy", reason: "A deploy changes what users run." }],
    allow: ["read_file"]
  })

export const task = "Ship 1.2.0 to production and clean up the staging database."

const report = (result: { readonly name: string; readonly result: unknown }) => {
  const denial = Schema.decodeUnknownOption(GatedToolkit.Denial)(result.result)
  return denial._tag === "Some"
    ? `${result.name}: not done (${denial.value.outcome}: ${denial.value.reason})`
    : `${result.name}: ${String(result.result)}`
}

// The model calls all three tools in one turn, then reports on what it read back: the denial
// reasons it gets are the ones the policy or the human gave.
const script: ReadonlyArray<ScriptedModel.Step> = [
  {
    text: "I'll read the changelog, deploy 1.2.0 and drop the staging database.",
    toolCalls: [
      { id: "call_read", name: "read_file", params: { path: "CHANGELOG.md" } },
      { id: "call_deploy", name: "deploy", params: { version: "1.2.0", env: "production" } },
      { id: "call_drop", name: "drop_database", params: { name: "staging" } }
    ]
  },
  (prompt) => ({ text: `Release report. ${ScriptedModel.lastToolResults(prompt).map(report).join("; ")}.` })
]

export const agent = (onStep?: (step: AgentLoop.Step) => Effect.Effect<void>) =>
  AgentLoop.make({ toolkit: ReleaseTools, onStep })

/** Everything the agent's process needs: its tools, its model, the gate and checkpoints on `filename`. */
export const layer = (filename: string, ttlMs = 600_000) =>
  Layer.mergeAll(
    ReleaseToolsLive,
    ScriptedModel.layer(script),
    ToolGateSqlite.layer({ filename, policy: policy(ttlMs) })
  )
