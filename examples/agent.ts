// The README's agent (section Agents), kept runnable: `bun examples/agent.ts` in an empty folder
// (the SQLite file goes to .toolgate/agent.db there). The scripted model stands in for a
// provider's: examples/openai.ts is the same agent on OpenAI.
import { Tool, Toolkit } from "@effect/ai"
import { AgentLoop, ScriptedModel } from "@tool-gate/ai"
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer, Schema } from "effect"

const Tools = Toolkit.make(
  Tool.make("deploy", { parameters: { env: Schema.String, version: Schema.String }, success: Schema.String })
)
const agent = AgentLoop.make({ toolkit: Tools })

const program = Effect.gen(function*() {
  const result = yield* agent.run("Ship 1.2.0", { sessionKey: "s-1", agentId: "release-bot" })
  if (result._tag === "Completed") return result.text
  // Paused: result.token can be saved and the process may exit. A human answers each request
  // (CLI, HTTP, console, or here), then any process sharing the store resumes the turn.
  const gate = yield* ToolGate.ToolGate
  for (const signal of result.requests) {
    yield* gate.respond(signal.requestId, { decision: "approve_once", respondedBy: "ana" })
  }
  const resumed = yield* agent.resume(result.token) // Completed | Paused (another turn waits)
  return resumed._tag === "Completed" ? resumed.text : "waiting again"
})

const Live = Layer.mergeAll(
  Tools.toLayer({ deploy: ({ env, version }) => Effect.succeed(`deployed ${version} to ${env}`) }),
  ScriptedModel.layer([
    { toolCalls: [{ id: "call-1", name: "deploy", params: { env: "production", version: "1.2.0" } }] },
    { text: "Shipped 1.2.0." }
  ]),
  ToolGateSqlite.layer({
    filename: ".toolgate/agent.db",
    policy: Policy.unsafeMake({ requireApproval: ["deploy"] })
  })
)

Effect.runPromise(program.pipe(Effect.provide(Live))).then(console.log) // Shipped 1.2.0.
