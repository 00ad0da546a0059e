/**
 * A user's TypeScript app over every package, compiled by tests/packaging/packaging.test.ts under
 * the strictest settings (NodeNext and Bundler, skipLibCheck off) and run under Node and Bun: the
 * same calls on the memory, SQLite and (with CONSUMER_PG_URL) PostgreSQL gates, one line each;
 * then the MCP gateway's typed failure when its downstream server exits at once.
 */
import { GatedToolkit } from "@tool-gate/ai"
import type { Decision } from "@tool-gate/core"
import { PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { McpGateway } from "@tool-gate/mcp"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import type { Layer } from "effect"
import { Effect, Redacted, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const policy: Policy.Policy = Policy.unsafeMake({
  deny: [{ tool: "bash", args: { command: { shell: "rm -rf*" } }, reason: "never" }],
  requireApproval: ["deploy"],
  allow: ["read_file"]
})

const lines: Array<string> = []

const scenario = (store: string) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const read = yield* gate.evaluate({ id: "c-1", name: "read_file", args: { path: "README.md" }, sessionKey: "s" })
    const denied = yield* gate.evaluate({ id: "c-2", name: "bash", args: { command: "rm -rf /" }, sessionKey: "s" })
    const tags: ReadonlyArray<Decision.Decision["_tag"]> = [read._tag, denied._tag]
    const call = { id: "c-3", name: "deploy", args: { env: "production" }, sessionKey: "s" }
    const first = yield* gate.authorize(call)
    if (!PauseSignal.isPauseSignal(first)) return yield* Effect.die("deploy did not pause")
    const [pending] = yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("s") })
    yield* gate.respond(first.requestId, { decision: "approve_once", respondedBy: "ana" })
    const second = yield* gate.authorize(call)
    lines.push(
      store + ": " + tags.join(" ") + " " + (pending?.requestId === first.requestId ? "pending" : "missing") + " " +
        (PauseSignal.isPauseSignal(second) ? "paused" : "allowed")
    )
  })

const run = <E>(store: string, layer: Layer.Layer<ToolGate.ToolGate, E>) =>
  Effect.runPromise(scenario(store).pipe(Effect.provide(layer)))

const dir = mkdtempSync(join(tmpdir(), "toolgate-consumer-"))
try {
  await run("memory", ToolGate.layerMemory({ policy }))
  await run("sqlite", ToolGateSqlite.layer({ filename: join(dir, "gate.db"), policy }))
  const url = process.env["CONSUMER_PG_URL"]
  if (url !== undefined) await run("postgres", ToolGatePg.layer({ url: Redacted.make(url), policy }))
  const modelCall: GatedToolkit.ModelCall = Schema.decodeUnknownSync(GatedToolkit.ModelCall)({
    id: "m-1",
    name: "deploy",
    params: { env: "staging" }
  })
  lines.push("ai: " + modelCall.name)
  const gone: McpGateway.Options = { downstream: { _tag: "Command", command: process.execPath, args: ["-e", ""] } }
  const failure = await Effect.runPromise(
    McpGateway.serveStdio(gone).pipe(Effect.scoped, Effect.flip, Effect.provide(ToolGate.layerMemory({ policy })))
  )
  lines.push("mcp: " + failure._tag)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
console.log(lines.join("\n"))
