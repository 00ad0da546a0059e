// The README's quick start, kept runnable: `bun examples/quickstart.ts`.
import { Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { Effect, Fiber } from "effect"

const policy = Policy.unsafeMake({
  deny: [{ tool: "bash", args: { command: { shell: "rm -rf*" } }, reason: "never" }],
  requireApproval: ["bash", { tool: "mcp__github__*", sessionScope: "tool" }],
  allow: ["read_file"]
})

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const sessionKey = ToolCall.SessionKey.make("s-1")
  const call = { id: "call-1", name: "bash", args: { command: "npm test" }, sessionKey }

  // The agent's side: gate() runs the tool once allowed, waiting for a human if needed.
  const agent = yield* Effect.fork(
    gate.gate(call, (allowed) => Effect.succeed(`ran ${allowed.call.args.command}`))
  )

  // The human's side (any process sharing the store could do this).
  const [request] = yield* Effect.repeat(gate.pending({ sessionKey }), {
    until: (pending) => pending.length > 0
  })
  yield* gate.respond(request!.requestId, { decision: "approve_session", respondedBy: "ana" })

  console.log(yield* Fiber.join(agent)) // ran npm test
  console.log((yield* gate.evaluate({ ...call, id: "call-2" }))._tag) // Allow (session approval)
})

Effect.runPromise(program.pipe(Effect.provide(ToolGate.layerMemory({ policy }))))
