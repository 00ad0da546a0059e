/**
 * W2 on the Vercel AI SDK: a `bash` tool with `needsApproval: true`. `generateText` (driven by the
 * SDK's own `MockLanguageModelV3`, no network) returns a `tool-approval-request`; the SDK keeps no
 * state, so the conversation is saved in a hand-written SQLite row (pause), the decision is an
 * UPDATE of that row (approve), and the resume loads the messages, appends the
 * `tool-approval-response` and calls `generateText` again: the SDK runs the approved tool and the
 * model answers; the outcome is saved (resume).
 */
import { generateText, jsonSchema, tool } from "ai"
import { MockLanguageModelV3 } from "ai/test"
import { join } from "node:path"
import { openDatabase, report, runW2, tempDir, version } from "./lib.mjs"

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 }
}

// Scripted: a user turn asks for a tool call; a turn after a tool result answers with text.
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    model.doGenerateCalls.length = 0 // the mock records every call; keep memory flat
    const last = prompt[prompt.length - 1]
    if (last.role === "tool") {
      return {
        content: [{ type: "text", text: "done" }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: []
      }
    }
    const id = last.content[0].text
    return {
      content: [{
        type: "tool-call",
        toolCallId: id,
        toolName: "bash",
        input: JSON.stringify({ command: `make ${id}` })
      }],
      finishReason: { unified: "tool-calls", raw: "tool_calls" },
      usage,
      warnings: []
    }
  }
})

let ran = 0
const tools = {
  bash: tool({
    description: "Run a shell command",
    inputSchema: jsonSchema({
      type: "object",
      properties: { command: { type: "string" } },
      required: ["command"]
    }),
    needsApproval: true,
    execute: async ({ command }) => {
      ran++
      return `ran ${command}`
    }
  })
}

const db = openDatabase(join(tempDir(), "vercel-ai.db"))
db.exec(`CREATE TABLE approvals (
  id TEXT PRIMARY KEY,
  approval_id TEXT NOT NULL,
  messages TEXT NOT NULL,
  status TEXT NOT NULL,
  result TEXT
)`)
const insert = db.prepare("INSERT INTO approvals (id, approval_id, messages, status) VALUES (?, ?, ?, 'pending')")
const decide = db.prepare("UPDATE approvals SET status = 'approved' WHERE id = ? AND status = 'pending'")
const load = db.prepare("SELECT approval_id, messages, status FROM approvals WHERE id = ?")
const finish = db.prepare("UPDATE approvals SET status = 'done', result = ? WHERE id = ? AND status = 'approved'")

const pause = async (id) => {
  const messages = [{ role: "user", content: id }]
  const result = await generateText({ model, tools, messages })
  const request = result.content.find((part) => part.type === "tool-approval-request")
  if (!request) throw new Error(`${id}: no approval request`)
  insert.run(id, request.approvalId, JSON.stringify([...messages, ...result.response.messages]))
}

const approve = async (id) => {
  if (decide.run(id).changes !== 1) throw new Error(`${id}: not pending`)
}

const resume = async (id) => {
  const row = load.get(id)
  if (row?.status !== "approved") throw new Error(`${id}: not approved`)
  const before = ran
  const messages = JSON.parse(row.messages)
  messages.push({
    role: "tool",
    content: [{ type: "tool-approval-response", approvalId: row.approval_id, approved: true }]
  })
  const result = await generateText({ model, tools, messages })
  if (ran === before || result.text !== "done") throw new Error(`${id}: the approved tool did not run`)
  finish.run(JSON.stringify(result.response.messages), id)
}

report(
  await runW2({
    peer: "vercel-ai",
    versions: [version("ai"), version("better-sqlite3")],
    notes: "needsApproval + MockLanguageModelV3; messages, decision and outcome in a hand-written SQLite table",
    pause,
    approve,
    resume
  })
)
