/**
 * A test world for the agent integration: a toolkit whose handlers record every run, a scripted
 * model whose last step reports the tool results it read back, and the gate with checkpoints on
 * a fresh SQLite file.
 */
import { type Prompt, Tool, Toolkit } from "@effect/ai"
import { ScriptedModel } from "@tool-gate/ai"
import { Policy } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer, Schema } from "effect"
import { join } from "node:path"
import { tempDir } from "../../support/sqlStores.js"

export const Tools = Toolkit.make(
  Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String }),
  Tool.make("deploy", { parameters: { env: Schema.String, version: Schema.String }, success: Schema.String }),
  Tool.make("drop_database", { parameters: { name: Schema.String }, success: Schema.String })
)

export const policy = Policy.unsafeMake({
  ttlMs: 90_000,
  deny: [{ id: "no-drops", tool: "drop_database", reason: "Databases are dropped by a person." }],
  requireApproval: [{ id: "deploys", tool: "deploy" }],
  allow: ["read_file"]
})

export const call = (id: string, name: string, params: Record<string, unknown>): ScriptedModel.ScriptedCall => ({
  id,
  name,
  params
})

export const deploy = (id: string, env: string) => call(id, "deploy", { env, version: "1.2.0" })

/** The text of the conversation's first user message. */
export const userText = (prompt: Prompt.Prompt): string => {
  const first = prompt.content.find((message) => message.role === "user")
  return first?.role === "user" ? first.content.map((part) => part.type === "text" ? part.text : "").join("") : ""
}

/** A final step whose text is the JSON of the tool results the model read back. */
export const reportSeen = (prompt: Prompt.Prompt): ScriptedModel.Reply => ({
  text: JSON.stringify(
    ScriptedModel.lastToolResults(prompt).map((part) => ({
      id: part.id,
      name: part.name,
      isFailure: part.isFailure,
      result: part.result
    }))
  )
})

export interface Seen {
  readonly id: string
  readonly name: string
  readonly isFailure: boolean
  readonly result: any
}

export const seen = (text: string): Array<Seen> => JSON.parse(text)

/** The world: `ran` lists every handler run, in order, with the parameters it got. */
export const world = (
  script: ReadonlyArray<ScriptedModel.Step>,
  options: { readonly deployTakes?: Effect.Effect<void> } = {}
) => {
  const ran: Array<{ readonly tool: string; readonly params: unknown }> = []
  const record = <P, A>(tool: string, result: (params: P) => A) => (params: P) =>
    Effect.sync(() => {
      ran.push({ tool, params })
      return result(params)
    })
  const layer = Layer.mergeAll(
    Tools.toLayer({
      read_file: record("read_file", ({ path }) => `contents of ${path}`),
      deploy: (params) =>
        Effect.zipRight(
          options.deployTakes ?? Effect.void,
          record("deploy", ({ env, version }: typeof params) => `deployed ${version} to ${env}`)(params)
        ),
      drop_database: record("drop_database", ({ name }) => `dropped ${name}`)
    }),
    ScriptedModel.layer(script),
    Layer.unwrapScoped(
      Effect.map(
        tempDir,
        (dir) =>
          ToolGateSqlite.layer({ filename: join(dir, "gate.db"), policy, sweepInterval: "30 seconds", clock: "caller" })
      )
    )
  )
  return { ran, layer }
}
