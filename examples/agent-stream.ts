// The README's streaming agent (section Agents), kept runnable: `bun examples/agent-stream.ts`.
// The scripted model streams its text as a provider would (one piece per turn here).
import { Tool, Toolkit } from "@effect/ai"
import { AgentLoop, ScriptedModel } from "@tool-gate/ai"
import { Checkpoint, CheckpointStore, Policy } from "@tool-gate/core"
import { ApprovalStore } from "@tool-gate/core"
import { Console, Effect, Layer, Schema } from "effect"

const Tools = Toolkit.make(Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String }))

const agent = AgentLoop.make({
  toolkit: Tools,
  onTextDelta: ({ delta }) => Console.log(`model > ${delta}`) // each piece as it arrives
})

const Live = Layer.mergeAll(
  Tools.toLayer({ read_file: ({ path }) => Effect.succeed(`contents of ${path}`) }),
  ScriptedModel.layer([
    {
      text: "Reading the changelog.",
      toolCalls: [{ id: "call-1", name: "read_file", params: { path: "CHANGELOG.md" } }]
    },
    { text: "The changelog is read." }
  ]),
  Checkpoint.layerWithGate({ policy: Policy.unsafeMake({ allow: ["read_file"] }) }).pipe(
    Layer.provide(Layer.merge(ApprovalStore.layerMemory, CheckpointStore.layerMemory))
  )
)

Effect.runPromise(agent.run("Read the changelog", { sessionKey: "s-1" }).pipe(Effect.provide(Live)))
  .then((result) => console.log(result._tag)) // Completed
