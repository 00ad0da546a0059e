/**
 * A gate process for the temporary files test, run under Bun from the sources: on the SQLite file
 * DB it pauses COUNT calls with large arguments, each in a session of its own, then answers them
 * all at once (one batch, one transaction: its statements rewrite many pages each) and says "done".
 * SQLite puts its temporary files where TMPDIR (or SQLITE_TMPDIR) says, read once at start.
 *
 *   bun --conditions=@tool-gate/source tempFilesWorker.ts DB COUNT
 */
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect } from "effect"

const [db, count] = process.argv.slice(2) as [string, string]
const policy = Policy.unsafeMake({ requireApproval: ["deploy"] })
const calls = Array.from({ length: Number(count) }, (_, i) => ({
  id: `call-${i}`,
  sessionKey: `session-${i}`,
  name: "deploy",
  // a few pages of text per request, so that the answers' statements rewrite dozens of pages
  args: { manifest: `${i}:`.padEnd(6_000, "x") }
}))

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const paused = yield* Effect.forEach(calls, (call) => gate.authorize(call))
  yield* Effect.forEach(
    paused,
    (pause) =>
      PauseSignal.isPauseSignal(pause)
        ? gate.respond(pause.requestId, { decision: "approve_session", respondedBy: "ana" })
        : Effect.dieMessage("expected a pause"),
    { concurrency: "unbounded", discard: true }
  )
  console.log(JSON.stringify({ event: "done", answered: paused.length }))
})

await Effect.runPromise(program.pipe(Effect.provide(ToolGateSqlite.layer({ filename: db, policy }))))
process.exit(0)
