/**
 * The `toolgate` command line as a pure `Command` value: serve the approval API, list and answer
 * pending approvals, extend them, manage session approvals, read or follow the audit log, check
 * policies and run the demo. Every command that reads or answers works on the SQLite file
 * (`--db`) or against a server (`--server` with `--token`), through the `Backend` service.
 *
 * Failures print one line on stderr and end with a distinct exit code (`ExitCode`). Everything
 * printed passes one output boundary (`internal/terminal.ts`): a control character that a model,
 * an approver or a server put in a value is shown escaped, never sent to the terminal.
 *
 * The command tree is here; its parts are internal: the shared options (`internal/options.ts`),
 * the backend they select (`internal/target.ts`), the exit codes (`internal/exit.ts`) and one
 * module per command group (`internal/command/*.ts`).
 *
 * @example
 * import { NodeContext, NodeRuntime } from "@effect/platform-node"
 * import { Cli } from "@tool-gate/cli"
 * import { Effect } from "effect"
 *
 * NodeRuntime.runMain(Cli.run(process.argv).pipe(Effect.provide(NodeContext.layer)), {
 *   disableErrorReporting: true,
 *   teardown: (exit) => process.exit(Cli.exitCode(exit))
 * })
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import { Effect } from "effect"
import { approvals } from "./internal/command/approvals.js"
import { audit } from "./internal/command/audit.js"
import { auditVerify } from "./internal/command/auditVerify.js"
import { demo } from "./internal/command/demo.js"
import { mcp } from "./internal/command/mcp.js"
import { policy } from "./internal/command/policy.js"
import { approve, deny, extend, pending } from "./internal/command/requests.js"
import { serve } from "./internal/command/serve.js"
import { InvalidInput } from "./internal/errors.js"
import { report } from "./internal/exit.js"
import * as Terminal from "./internal/terminal.js"

/**
 * `ExitCode`, the process exit codes, one per kind of failure a script handles differently, and
 * `exitCode`, the one for how the program ended (0 on success or when stopped by a signal).
 *
 * @since 0.1.0
 * @category models
 */
export { ExitCode, exitCode } from "./internal/exit.js"

/**
 * Ends the command with `code` after the command itself reported why.
 *
 * @since 0.1.0
 * @category errors
 */
export { Failed } from "./internal/errors.js"

/**
 * `parseArgs` (`--args`: a JSON object of arguments) and `parseDuration` (`--ttl`, `--session-ttl`).
 *
 * @since 0.1.0
 * @category utils
 */
export { parseArgs, parseDuration } from "./internal/options.js"

const toolgate = Command.make(
  "toolgate",
  {},
  () => Effect.fail(new InvalidInput({ message: "missing command; see toolgate --help" }))
).pipe(
  Command.withDescription("Gate AI-agent tool calls: answer approvals, read the audit log, check policies"),
  Command.withSubcommands([
    serve,
    pending,
    approve,
    deny,
    extend,
    approvals,
    audit.pipe(Command.withSubcommands([auditVerify])),
    policy,
    mcp,
    demo
  ]),
  // every command prints through the output boundary (internal/terminal.ts)
  Command.transformHandler(Terminal.withConsole(Terminal.lines))
)

/**
 * The whole command line.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = toolgate

const cli = Command.run(toolgate, { name: "toolgate", version: "0.1.0" })

/**
 * Runs the command line on `argv` (as `process.argv`: runtime and script first), reporting a
 * failure as one line on stderr; the exit code is `exitCode` of the result.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (argv: ReadonlyArray<string>) =>
  cli(argv).pipe(
    Effect.tapErrorCause((cause) => Terminal.withConsole(Terminal.lines)(report(cause))),
    // @effect/cli's own help and usage errors
    Terminal.withConsole(Terminal.docs)
  )
