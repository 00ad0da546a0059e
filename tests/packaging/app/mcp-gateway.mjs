// The @tool-gate/mcp README example as a user's plain ES module (tests/packaging/packaging.test.ts
// runs it under Node from a scratch app), with notes-server.mjs as the downstream server: argv[2]
// is the SQLite file, argv[3] the downstream's log of the calls it ran.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Policy } from "@tool-gate/core"
import { McpGateway } from "@tool-gate/mcp"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Logger } from "effect"

const policy = Policy.unsafeMake({ requireApproval: ["write_file"], allow: ["read_*"], default: "deny" })

const gateway = McpGateway.serveStdio({
  downstream: { _tag: "Command", command: "node", args: ["notes-server.mjs", process.argv[3]] }
})

const main = gateway.pipe(
  Effect.scoped,
  Effect.provide(ToolGateSqlite.layer({ filename: process.argv[2], policy })),
  Effect.tapErrorCause(Effect.logError),
  // stdout carries the MCP messages alone: log to stderr
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true })))
)

NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
