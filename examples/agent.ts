/**
 * The release agent's process. It runs the conversation until the model answers or a tool call
 * needs a human; then it prints the pending request, how to answer it and how to resume, and
 * exits. Resumed with the checkpoint's token (in a new process), it finishes the turn with the
 * human's answer, lets the model answer, and prints the audit trail.
 *
 *   bun examples/agent.ts                 start a new conversation
 *   bun examples/agent.ts resume TOKEN    continue a paused one
 */
import type { AgentLoop } from "@tool-gate/ai"
import { ApprovalStore } from "@tool-gate/core"
import { Console, Effect } from "effect"
import { relative } from "node:path"
import { auditTrail } from "./printAudit.js"
import { agent, demoDb, layer, task } from "./release-agent.js"

const json = (value: unknown) => JSON.stringify(value)
const db = relative(process.cwd(), demoDb)

const narrate = (step: AgentLoop.Step): Effect.Effect<void> => {
  if (step._tag === "ModelReplied") return Console.log(`model  : ${step.text}`)
  const call = `agent  > ${step.call.name} ${json(step.call.params)}`
  const outcome = step.outcome
  switch (outcome._tag) {
    case "Ran":
      return Console.log(`${call}\ntool   < ${json(outcome.result.result)}`)
    case "Denied":
      return Console.log(`${call}\ngate   : ${outcome.denied.message}`)
    case "Pending":
      return Console.log(`${call}\ngate   : needs a human: request ${outcome.signal.requestId}`)
  }
}

const paused = (result: AgentLoop.Paused) =>
  Console.log(
    [
      "",
      `paused: ${result.requests.length} request(s) wait for a human; the checkpoint is saved and this process exits.`,
      ...result.requests.flatMap((signal) => [
        `  ${signal.requestId}  (session ${signal.metadata.sessionKey}, agent ${signal.metadata.agentId}, rule ${signal.metadata.rule})`,
        `    ${signal.prompt}`,
        `    no answer by ${new Date(signal.expiresAt).toISOString()} (${signal.ttlMs / 1000} s) means deny`
      ]),
      "answer from any process:",
      ...result.requests.map((signal) =>
        `  npx toolgate approve ${signal.requestId} --db ${db}    (or: npx toolgate deny ${signal.requestId} --reason "why" --db ${db})`
      ),
      "then resume the agent:",
      `  bun examples/agent.ts resume ${result.token}`
    ].join("\n")
  )

const program = Effect.gen(function*() {
  const [command, token] = process.argv.slice(2)
  const loop = agent(narrate)
  let result: AgentLoop.Result
  if (command === "resume" && token !== undefined) {
    yield* Console.log(`resuming checkpoint ${token}`)
    result = yield* loop.resume(token)
  } else {
    // A fresh session per run: the scripted model's call ids repeat, a real model's would not.
    const sessionKey = `release-${crypto.randomUUID().slice(0, 8)}`
    yield* Console.log(`user   > ${task}`)
    result = yield* loop.run(task, { sessionKey, agentId: "release-bot", intentId: "ship-1.2.0" })
  }
  if (result._tag === "Paused") return yield* paused(result)
  yield* Console.log(`\ndone after ${result.turns} model turns.\n`)
  const store = yield* ApprovalStore.ApprovalStore
  yield* Console.log(auditTrail(yield* store.events()))
})

Effect.runPromise(program.pipe(Effect.provide(layer(demoDb)))).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
