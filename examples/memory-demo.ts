/**
 * The gate's tour in one process, on the in-memory store: an agent's tool calls go through the
 * gate. Allowed calls run, denied calls come back with the reason, calls that need a human pause
 * until one answers (here a scripted operator, answering from another fiber as a person would
 * from the CLI or the console), and a call nobody answers times out as a deny. The audit trail is
 * printed at the end.
 *
 * Run: npm run demo:memory (the agent demo, across processes on SQLite, is `npm run demo`)
 */
import { NodeFileSystem } from "@effect/platform-node"
import { ApprovalRequest, ApprovalStore, PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { Console, Effect, Fiber, Layer, Stream } from "effect"
import { auditTrail } from "./printAudit.js"

const sessionKey = ToolCall.SessionKey.make("demo-session")

const tools: Record<string, (args: Record<string, unknown>) => string> = {
  read_file: (args) => `<contents of ${String(args.path)}>`,
  bash: (args) => `$ ${String(args.command)}\nok`,
  mcp__github__create_issue: (args) => `created issue "${String(args.title)}"`,
  deploy: (args) => `deployed to ${String(args.env)}`
}

/**
 * The agent's side: ask the gate; on a pause, wait for the human (any process could answer),
 * then ask again with the same call id, which returns the recorded answer, never a new prompt.
 */
const agentCall = (gate: ToolGate.Service, id: string, name: string, args: Record<string, unknown>) =>
  Effect.gen(function*() {
    const call = { id, name, args, sessionKey, agentId: "coder" }
    yield* Console.log(`\nagent  > ${name} ${JSON.stringify(args)}`)
    let result = yield* gate.authorize(call)
    if (PauseSignal.isPauseSignal(result)) {
      yield* Console.log(`gate   : paused, request ${result.requestId} (answer within ${result.ttlMs / 1000} s)`)
      yield* Console.log(`         ${result.prompt}`)
      yield* gate.awaitDecision(result.requestId)
      result = yield* gate.authorize(call)
    }
    if (PauseSignal.isPauseSignal(result)) return "still pending"
    return tools[name]!(result.call.args)
  }).pipe(
    Effect.tap((output) => Console.log(`tool   < ${output.replace(/\n/g, "\n         ")}`)),
    Effect.catchTag(
      "ToolDenied",
      (denied) =>
        Console.log(`gate   : ${denied.outcome === "expired" ? "timed out, denied" : "denied"}: ${denied.reason}`)
    )
  )

/** The operator's side: watch the pending list and answer each request as it appears. */
const operator = (gate: ToolGate.Service) =>
  gate.audit.pipe(
    Stream.filter((event) => event.type === "approval.requested"),
    Stream.mapEffect((event) =>
      Effect.gen(function*() {
        const pending = yield* gate.pending({ sessionKey })
        yield* Console.log(
          `human  : ${pending.length} pending in ${sessionKey}: ${pending.map((r) => r.toolCall.name).join(", ")}`
        )
        yield* Effect.sleep("200 millis")
        switch (event.toolName) {
          case "bash":
            yield* Console.log("human  : approve bash for this session (same command only)")
            return yield* gate.respond(ApprovalRequest.RequestId.make(event.requestId!), {
              decision: "approve_session",
              respondedBy: "ana"
            })
          case "mcp__github__create_issue":
            yield* Console.log("human  : deny, with a reason for the model")
            return yield* gate.respond(ApprovalRequest.RequestId.make(event.requestId!), {
              decision: "deny",
              reason: "File it in the tracker's triage board instead.",
              respondedBy: "ana"
            })
          default:
            return yield* Console.log(`human  : (looks away; ${event.toolName} will time out)`)
        }
      })
    ),
    Stream.runDrain
  )

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const store = yield* ApprovalStore.ApprovalStore
  yield* Console.log(
    `policy ${
      gate.policy.version.slice(0, 12)
    } loaded: ${gate.policy.rules.length} rules, default ${gate.policy.default}`
  )
  for (const warning of gate.policy.warnings) yield* Console.log(`  lint: ${warning.path}: ${warning.message}`)

  const human = yield* Effect.fork(operator(gate))
  yield* Effect.yieldNow()
  yield* agentCall(gate, "call-1", "read_file", { path: "src/index.ts" })
  yield* agentCall(gate, "call-2", "read_file", { path: "config/prod.env" })
  yield* agentCall(gate, "call-3", "bash", { command: "npm test" })
  yield* agentCall(gate, "call-4", "bash", { command: "npm test" })
  yield* agentCall(gate, "call-5", "bash", { command: "git push origin main --force" })
  yield* agentCall(gate, "call-6", "mcp__github__create_issue", { title: "Flaky test" })
  yield* agentCall(gate, "call-7", "deploy", { env: "production" })
  yield* Fiber.interrupt(human)

  yield* Console.log(`\n${auditTrail(yield* store.events())}`)
})

const main = Effect.gen(function*() {
  const loaded = yield* Policy.load(new URL("./policy.yaml", import.meta.url).pathname)
  // The demo shortens the default TTL so the unanswered call times out in seconds, not minutes.
  const policy = yield* Policy.make({ ...loaded.input, ttlMs: 1500 })
  const store = ApprovalStore.layerMemory
  // A sweep every 100 ms always lands in the warning window (the last half of the TTL), so the
  // trail shows the warning before the expiry on every run.
  const gate = ToolGate.layer({ policy, sweepInterval: "100 millis" }).pipe(Layer.provide(store))
  yield* program.pipe(Effect.provide(Layer.merge(gate, store)))
})

Effect.runPromise(main.pipe(Effect.provide(NodeFileSystem.layer))).catch((error) => {
  console.error(String(error))
  process.exit(1)
})
