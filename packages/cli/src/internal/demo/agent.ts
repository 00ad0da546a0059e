/**
 * The release agent's process (`toolgate demo agent`). It runs the conversation until the model
 * answers or a tool call needs a human; then it prints the pending request, how to answer it and
 * how to resume, and ends. Resumed with the checkpoint's token (in a new process), it finishes the
 * turn with the human's answer, lets the model answer, and prints the audit trail.
 */
import type { AgentLoop } from "@tool-gate/ai"
import { ApprovalStore, type AuditEvent, type Checkpoint } from "@tool-gate/core"
import { Console, Effect, Option } from "effect"
import { printLines } from "../print.js"
import { agent, layer, task } from "./releaseAgent.js"

const json = (value: unknown) => JSON.stringify(value)

const narrate = (step: AgentLoop.Step): Effect.Effect<void> => {
  if (step._tag === "ModelReplied") return Console.log(`model  : ${step.text}`)
  const call = `agent  > ${step.call.name} ${json(step.call.params)}`
  const outcome = step.outcome
  switch (outcome._tag) {
    case "Ran":
      return printLines([call, `tool   < ${json(outcome.result.result)}`])
    case "Denied":
      return printLines([call, `gate   : ${outcome.denied.message}`])
    case "Pending":
      return printLines([call, `gate   : needs a human: request ${outcome.signal.requestId}`])
  }
}

const paused = (db: string, result: AgentLoop.Paused) =>
  printLines([
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
    `  npx toolgate demo agent --resume ${result.token}`
  ])

// The audit trail: one line per event, in sequence order.
const auditTrail = (events: ReadonlyArray<AuditEvent.AuditEvent>) =>
  printLines([
    "audit trail:",
    ...events.map((e) =>
      `  #${String(e.seq).padStart(2)} ${e.type.padEnd(18)} ${e.outcome.padEnd(8)} ${(e.toolName ?? "").padEnd(26)} ${
        e.rule ? `rule=${e.rule}` : ""
      }${e.via ? ` via=${e.via}` : ""}${e.actor ? ` by=${e.actor}` : ""}`
    )
  ])

/** Runs a new conversation on the SQLite file `db`, or resumes the paused one whose checkpoint `resume` names. */
export const run = (db: string, resume: Option.Option<Checkpoint.Token>) =>
  Effect.gen(function*() {
    const loop = agent(narrate)
    let result: AgentLoop.Result
    if (Option.isSome(resume)) {
      yield* Console.log(`resuming checkpoint ${resume.value}`)
      result = yield* loop.resume(resume.value)
    } else {
      // A fresh session per run: the scripted model's call ids repeat, a real model's would not.
      const sessionKey = `release-${crypto.randomUUID().slice(0, 8)}`
      yield* Console.log(`user   > ${task}`)
      result = yield* loop.run(task, { sessionKey, agentId: "release-bot", intentId: "ship-1.2.0" })
    }
    if (result._tag === "Paused") return yield* paused(db, result)
    yield* printLines(["", `done after ${result.turns} model turns.`, ""])
    const store = yield* ApprovalStore.ApprovalStore
    yield* auditTrail(yield* store.events())
  }).pipe(Effect.provide(layer(db)))
