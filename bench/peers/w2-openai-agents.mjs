/**
 * W2 on the OpenAI Agents SDK: an agent with a `bash` tool that has `needsApproval: true`, run by
 * a `Runner` on a scripted model provider (no network). The run stops with the tool call among
 * `result.interruptions`; the SDK serialises its `RunState` (`state.toString()`) but stores
 * nothing, so the state is saved in a hand-written SQLite row (pause), the decision is an UPDATE
 * of that row (approve), and the resume restores it with `RunState.fromString`, calls
 * `state.approve` and runs it again: the SDK runs the tool and the model answers; the outcome is
 * saved (resume).
 */
import { Agent, Runner, RunState, setTracingDisabled, tool, Usage } from "@openai/agents-core"
import { join } from "node:path"
import { z } from "zod"
import { openDatabase, report, runW2, tempDir, version } from "./lib.mjs"

setTracingDisabled(true)

const callId = (input) => typeof input === "string" ? input : input.find((item) => item.role === "user").content

// Scripted: a user turn asks for a tool call; a turn after the tool's result answers with text.
const model = {
  getResponse: async ({ input }) => {
    const answered = typeof input !== "string" && input.some((item) => item.type === "function_call_result")
    const output = answered
      ? [{
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "done" }]
      }]
      : [{
        type: "function_call",
        callId: callId(input),
        name: "bash",
        status: "completed",
        arguments: JSON.stringify({ command: `make ${callId(input)}` })
      }]
    return { usage: new Usage(), output }
  },
  getStreamedResponse: () => {
    throw new Error("not used: the bench runs without streaming")
  }
}

let ran = 0
const agent = new Agent({
  name: "w2",
  instructions: "Run what you are asked to.",
  model: "scripted",
  tools: [
    tool({
      name: "bash",
      description: "Run a shell command",
      parameters: z.object({ command: z.string() }),
      needsApproval: true,
      execute: async ({ command }) => {
        ran++
        return `ran ${command}`
      }
    })
  ]
})
const runner = new Runner({ modelProvider: { getModel: () => model }, tracingDisabled: true })

const db = openDatabase(join(tempDir(), "openai-agents.db"))
db.exec(`CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  status TEXT NOT NULL,
  result TEXT
)`)
const insert = db.prepare("INSERT INTO runs (id, state, status) VALUES (?, ?, 'pending')")
const decide = db.prepare("UPDATE runs SET status = 'approved' WHERE id = ? AND status = 'pending'")
const load = db.prepare("SELECT state, status FROM runs WHERE id = ?")
const finish = db.prepare("UPDATE runs SET status = 'done', result = ? WHERE id = ? AND status = 'approved'")

const pause = async (id) => {
  const result = await runner.run(agent, id)
  if (result.interruptions.length !== 1) throw new Error(`${id}: no approval request`)
  insert.run(id, result.state.toString())
}

const approve = async (id) => {
  if (decide.run(id).changes !== 1) throw new Error(`${id}: not pending`)
}

const resume = async (id) => {
  const row = load.get(id)
  if (row?.status !== "approved") throw new Error(`${id}: not approved`)
  const before = ran
  const state = await RunState.fromString(agent, row.state)
  for (const interruption of state.getInterruptions()) state.approve(interruption)
  const result = await runner.run(agent, state)
  if (ran === before || result.finalOutput !== "done") throw new Error(`${id}: the approved tool did not run`)
  finish.run(result.finalOutput, id)
}

report(
  await runW2({
    peer: "openai-agents",
    versions: [version("@openai/agents-core"), version("better-sqlite3")],
    notes:
      "needsApproval + RunState.toString/fromString, scripted model provider; state, decision and outcome in a hand-written SQLite table",
    pause,
    approve,
    resume
  })
)
