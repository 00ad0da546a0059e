/**
 * A gate process for the hash chain tests, run under Bun from the sources: on DB (a SQLite file or
 * a postgres:// URL) it says "ready", waits for a line on stdin, then makes COUNT calls, 16 in
 * flight: allowed ones (merged decisions), and every 8th one that needs approval, answered and run
 * by this process (requests, claims and spends). Ends with "done" and how many calls it made.
 *
 *   bun --conditions=@tool-gate/source chainWorker.ts DB TAG COUNT
 */
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Redacted } from "effect"
import { createInterface } from "node:readline"

const [db, tag, count] = process.argv.slice(2) as [string, string, string]
const policy = Policy.unsafeMake({ allow: ["ls"], requireApproval: ["deploy"] })
const layer = db.startsWith("postgres://")
  ? ToolGatePg.layer({ url: Redacted.make(db), policy })
  : ToolGateSqlite.layer({ filename: db, policy })

const go = Effect.async<void>((resume) => {
  console.log(JSON.stringify({ event: "ready" }))
  createInterface({ input: process.stdin }).once("line", () => resume(Effect.void))
})

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  yield* go
  yield* Effect.forEach(
    Array.from({ length: Number(count) }, (_, i) => i),
    (i) =>
      Effect.gen(function*() {
        const call = { id: `${tag}-${i}`, sessionKey: `${tag}-${i % 4}`, args: { n: i } }
        if (i % 8 !== 0) return yield* gate.authorize({ ...call, name: "ls" })
        const paused = yield* gate.authorize({ ...call, name: "deploy" })
        if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.dieMessage("expected a pause")
        yield* gate.respond(paused.requestId, { decision: "approve_once", respondedBy: tag })
        return yield* gate.authorize({ ...call, name: "deploy" })
      }),
    { concurrency: 16, discard: true }
  )
  console.log(JSON.stringify({ event: "done", calls: Number(count) }))
})

await Effect.runPromise(program.pipe(Effect.provide(layer)))
process.exit(0)
