/**
 * Opens a gate on the SQLite file given as argv[2] and prints how that ended, as one JSON line:
 * bundled and run where the driver for its runtime cannot be found.
 */
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Cause, Effect, Exit, Option } from "effect"

const filename = process.argv[2]!
const program = Effect.flatMap(ToolGate.ToolGate, (gate) => gate.pending()).pipe(
  Effect.provide(ToolGateSqlite.layer({ filename, policy: Policy.unsafeMake({ requireApproval: ["bash"] }) }))
)

const exit = await Effect.runPromiseExit(program)
const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
console.log(JSON.stringify({
  exit: exit._tag,
  defect: Exit.isFailure(exit) && Cause.isDie(exit.cause),
  tag: Option.match(failure, { onNone: () => undefined, onSome: (error) => error._tag }),
  message: Option.match(failure, { onNone: () => undefined, onSome: (error) => error.message })
}))
