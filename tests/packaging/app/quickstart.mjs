// The README quick start as a user's plain ES module (tests/packaging/packaging.test.ts runs it under
// Node from a scratch app); then the same gate on a SQLite file (argv[2]), where a call that needs a
// human pauses and its request waits for the CLI's `pending --db`.
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Fiber } from "effect"

const policy = Policy.unsafeMake({
  deny: [{ tool: "bash", args: { command: { shell: "rm -rf*" } }, reason: "never" }],
  requireApproval: ["bash", "deploy", { tool: "mcp__github__*", sessionScope: "tool" }],
  allow: ["read_file"]
})

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const call = { id: "call-1", name: "bash", args: { command: "npm test" }, sessionKey: "s-1" }

  const agent = yield* Effect.fork(
    gate.gate(call, (allowed) => Effect.succeed(`ran ${allowed.call.args.command}`))
  )
  const [request] = yield* Effect.repeat(gate.pending({ sessionKey: "s-1" }), {
    until: (pending) => pending.length > 0
  })
  yield* gate.respond(request.requestId, { decision: "approve_session", respondedBy: "ana" })

  console.log(yield* Fiber.join(agent))
  console.log((yield* gate.evaluate({ ...call, id: "call-2" }))._tag)
  console.log((yield* gate.evaluate({ ...call, id: "call-3", args: { command: "rm -rf /" } }))._tag)
})

await Effect.runPromise(program.pipe(Effect.provide(ToolGate.layerMemory({ policy }))))

// The same gate on a SQLite file: a call that needs a human pauses, and the request waits there.
const durable = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const outcome = yield* gate.authorize({
    id: "call-9",
    name: "deploy",
    args: { env: "production" },
    sessionKey: "s-2"
  })
  console.log(outcome.__pause === true ? "paused " + outcome.requestId : "not paused")
})
await Effect.runPromise(durable.pipe(Effect.provide(ToolGateSqlite.layer({ filename: process.argv[2], policy }))))
