/**
 * A human's answer, from its own process (the `toolgate approve` / `toolgate deny` commands will
 * do this once the CLI exists):
 *
 *   bun examples/answer.ts REQUEST_ID approve|deny [reason]
 */
import { ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Console, Effect } from "effect"
import { demoDb, policy } from "./release-agent.js"

const [requestId, answer, reason] = process.argv.slice(2)

const program = Effect.gen(function*() {
  if (requestId === undefined || (answer !== "approve" && answer !== "deny")) {
    return yield* Effect.fail("usage: bun examples/answer.ts REQUEST_ID approve|deny [reason]")
  }
  const gate = yield* ToolGate.ToolGate
  const request = yield* gate.respond(requestId, {
    decision: answer === "approve" ? "approve_once" : "deny",
    respondedBy: "demo-operator",
    ...(reason !== undefined ? { reason } : {})
  })
  yield* Console.log(
    `${request.status} ${request.requestId} (${request.toolCall.name} ${JSON.stringify(request.toolCall.args)}) as demo-operator${
      request.resolution?.reason !== undefined ? `: ${request.resolution.reason}` : ""
    }`
  )
})

Effect.runPromise(program.pipe(Effect.provide(ToolGateSqlite.layer({ filename: demoDb, policy: policy(600_000) })))).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
