// The README's agent on a real provider (section Agents): OpenAI through @effect/ai-openai, the
// gate configured from the environment (ToolGateSqlite.layerConfig). The test suite type-checks
// it and never runs it (no key). To run it: OPENAI_API_KEY=... TOOLGATE_POLICY=examples/policy.yaml
// bun examples/openai.ts
import { Tool, Toolkit } from "@effect/ai"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import { NodeContext, NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { AgentLoop } from "@tool-gate/ai"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Config, Console, Effect, Layer, Schema } from "effect"

const Tools = Toolkit.make(
  Tool.make("deploy", {
    description: "Deploys a version to an environment",
    parameters: { env: Schema.String, version: Schema.String },
    success: Schema.String
  })
)
const agent = AgentLoop.make({
  toolkit: Tools,
  onTextDelta: ({ delta }) => Effect.sync(() => process.stdout.write(delta)) // the model's text as it streams
})

const program = Effect.gen(function*() {
  const result = yield* agent.run("Ship 1.2.0 to staging", { sessionKey: "release-42", agentId: "release-bot" })
  if (result._tag === "Paused") {
    yield* Console.log(`waiting for ${result.requests.length} approval(s); resume with ${result.token}`)
  } else {
    yield* Console.log(`\n(done in ${result.turns} turns)`) // the text itself was streamed
  }
})

const Model = OpenAiLanguageModel.layer({ model: "gpt-4.1-mini" }).pipe(
  Layer.provide(OpenAiClient.layerConfig({ apiKey: Config.redacted("OPENAI_API_KEY") })),
  Layer.provide(NodeHttpClient.layerUndici)
)

const Live = Layer.mergeAll(
  Tools.toLayer({ deploy: ({ env, version }) => Effect.succeed(`deployed ${version} to ${env}`) }),
  Model,
  ToolGateSqlite.layerConfig() // TOOLGATE_DB, TOOLGATE_POLICY, TOOLGATE_TTL, ...
).pipe(Layer.provide(NodeContext.layer))

NodeRuntime.runMain(program.pipe(Effect.provide(Live)))
