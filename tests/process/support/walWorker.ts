/**
 * A process on a SQLite gate with WAL checkpoints in the background (`inline` as the third argument: not), run on Node or
 * Bun; argv: mode, database file. Prints JSON lines.
 *
 * - `checkpoints`: the backstop (the connection's own checkpoint) at 800 pages, the worker's at
 *   200. Records allowed decisions, a few at a time with pauses, until the WAL index shows frames
 *   copied back while the log never reached 800 frames (only the worker can have done that);
 *   prints `checkpointed`, then ends without closing the gate's scope: the worker must not hold
 *   the process open. With a third argument `inline`, the same without the worker, for 2 s: no
 *   `checkpointed` then.
 * - `crash`: records decisions as fast as it can, the worker checkpointing every 100 pages, and
 *   prints how many have committed every 100; the test kills it.
 * - `bad-driver`: starts the worker with a driver that does not exist (Node) and prints how that
 *   ended.
 */
import { ApprovalStore } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Exit, Layer, Scope } from "effect"
import * as WalCheckpoints from "../../../packages/sqlite/src/internal/walCheckpoints.js"
import { walIndex } from "../../support/walIndex.js"
import { decision } from "../../unit/core/sql/fixtures.js"

const [mode, filename, checkpoints] = process.argv.slice(2) as [string, string, "inline" | undefined]
const print = (event: string, fields: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ event, at: Date.now(), ...fields }))

/** The store on the file, in a scope never closed; `record(n)` commits one audit event. */
const open = async (pages: number) => {
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(
    Layer.buildWithScope(
      ToolGateSqlite.layerStore({ filename, walAutocheckpointPages: pages, checkpoints: checkpoints ?? "background" }),
      scope
    )
  )
  const store = Effect.runSync(Effect.provide(ApprovalStore.ApprovalStore, context))
  return (n: number) => Effect.runPromise(store.append([decision(n)]))
}

if (mode === "checkpoints") {
  const record = await open(800)
  let most = 0
  let n = 0
  // inline, the same writes for a while: nothing but the backstop may copy frames back
  for (const deadline = Date.now() + (checkpoints === "inline" ? 2_000 : 20_000); Date.now() < deadline;) {
    for (let i = 0; i < 5; i++) await record(n++)
    await new Promise((resolve) => setTimeout(resolve, 5))
    const index = walIndex(filename)
    most = Math.max(most, index.frames)
    if (index.backfilled > 0 && most < 800) {
      print("checkpointed", { ...index, most, decisions: n })
      break
    }
  }
  print("end", { most, decisions: n })
} else if (mode === "crash") {
  const record = await open(400)
  for (let n = 1;; n++) {
    await record(n)
    if (n % 100 === 0) print("committed", { n })
  }
} else if (mode === "bad-driver") {
  // the worker is unreferenced: without this, the process would end while waiting on it
  const alive = setInterval(() => {}, 1000)
  const exit = await Effect.runPromiseExit(Effect.scoped(Effect.flatMap(
    WalCheckpoints.start({
      filename,
      threshold: 10,
      synchronous: "normal",
      busyTimeoutMs: 1000,
      driver: "/nonexistent/better-sqlite3/index.js"
    }),
    (worker) => Effect.zip(Effect.either(worker.ready), worker.exited)
  )))
  clearInterval(alive)
  print("started", {
    exit: exit._tag,
    ready: Exit.isSuccess(exit) ? exit.value[0]._tag : undefined,
    reason: Exit.isSuccess(exit) ? exit.value[1] : undefined
  })
}
