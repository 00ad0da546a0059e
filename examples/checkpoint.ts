// The README's checkpoint without the loop (section Agents), kept runnable:
// `bun examples/checkpoint.ts` in an empty folder (the SQLite file goes to .toolgate/ there).
import { Checkpoint, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Schema } from "effect"

const Turn = Checkpoint.make("my-turn", { state: Schema.Struct({ step: Schema.Number }) })

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const checkpoints = yield* Checkpoint.Checkpoints
  const signal = yield* gate.authorize({ id: "call-1", name: "deploy", sessionKey: "s-1" })
  if (!PauseSignal.isPauseSignal(signal)) return "allowed at once"
  const token = yield* checkpoints.save(Turn, [signal.requestId], { step: 3 }) // same requests and state again: same token
  // the process may exit here; a human answers (here, for the example), then any process:
  yield* gate.respond(signal.requestId, { decision: "approve_once", respondedBy: "ana" })
  const { lease, requests, state } = yield* checkpoints.resume(Turn, token, { owner: "worker-1", lease: "1 minute" })
  // ... act on requests[i].status / resolution; optionally checkpoints.update(Turn, token, lease, newState) ...
  yield* checkpoints.complete(token, lease)
  return `step ${state.step}: ${requests.map((request) => request.status).join(", ")}`
})

const policy = Policy.unsafeMake({ requireApproval: ["deploy"] })
Effect.runPromise(program.pipe(Effect.provide(ToolGateSqlite.layer({ filename: ".toolgate/checkpoint.db", policy }))))
  .then(console.log) // step 3: approved
