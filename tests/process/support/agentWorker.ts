/**
 * The release agent `toolgate demo` runs (packages/cli/src/internal/demo/releaseAgent.ts) as a
 * process for the process tests, under Node (bundled) or Bun. Prints one JSON object per line.
 *
 *   run     DB [TTL_MS]                     start the conversation: "paused" (token, requests, their
 *                                           TTLs and deadlines) or "completed"
 *   answer  DB REQUEST_ID DECISION [REASON]  answer one request as "ops": "answered" or "refused"
 *   resume  DB TOKEN [OWNER]                "completed" (text, turns), "paused", or "refused" (the error's tag)
 *   crash   DB TOKEN OWNER                  resume as OWNER and die (SIGKILL) right after a tool ran ("ran")
 */
import type { AgentLoop } from "@tool-gate/ai"
import { ApprovalRequest, Checkpoint, ToolGate } from "@tool-gate/core"
import { Effect, Either } from "effect"
import { agent, layer, task } from "../../../packages/cli/src/internal/demo/releaseAgent.js"

const [command, filename, ...rest] = process.argv.slice(2)
const say = (value: object) => Effect.sync(() => console.log(JSON.stringify(value)))

const report = (result: AgentLoop.Result) =>
  result._tag === "Paused"
    ? say({
      event: "paused",
      token: result.token,
      requestIds: result.requests.map((signal) => signal.requestId),
      ttlMs: result.requests.map((signal) => signal.ttlMs),
      expiresAt: result.requests.map((signal) => signal.expiresAt)
    })
    : say({ event: "completed", text: result.text, turns: result.turns })

const dieAfterRun = (step: AgentLoop.Step) =>
  step._tag === "CallHandled" && step.outcome._tag === "Ran"
    ? Effect.zipRight(
      say({ event: "ran", tool: step.call.name }),
      Effect.sync(() => process.kill(process.pid, "SIGKILL"))
    )
    : Effect.void

const program = Effect.gen(function*() {
  const loop = agent(command === "crash" ? dieAfterRun : undefined)
  switch (command) {
    case "run":
      return yield* report(yield* loop.run(task, { sessionKey: "release", agentId: "release-bot", intentId: "ship" }))
    case "answer": {
      const [requestId, decision, reason] = rest as [string, "approve_once" | "deny", string | undefined]
      const gate = yield* ToolGate.ToolGate
      const answered = yield* Effect.either(gate.respond(ApprovalRequest.RequestId.make(requestId), {
        decision,
        respondedBy: "ops",
        ...(reason !== undefined ? { reason } : {})
      }))
      return yield* Either.isRight(answered)
        ? say({ event: "answered", status: answered.right.status })
        : say({ event: "refused", error: answered.left._tag })
    }
    case "resume":
    case "crash": {
      const [token, owner] = rest as [string, string | undefined]
      const resumed = yield* Effect.either(loop.resume(Checkpoint.Token.make(token), { owner }))
      return yield* Either.isRight(resumed)
        ? report(resumed.right)
        : say({ event: "refused", error: resumed.left._tag })
    }
    default:
      return yield* Effect.die(`unknown command ${command}`)
  }
})

const ttlMs = command === "run" && rest[0] !== undefined ? Number(rest[0]) : undefined

Effect.runPromise(program.pipe(Effect.provide(layer(filename!, ttlMs)))).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
