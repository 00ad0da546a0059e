// WAL checkpoints in the background (`checkpoints: "background"`) from the installed @tool-gate/sqlite (its built dist, its
// worker's inline code): argv[2] is the SQLite file. The store's own checkpoint (the backstop) is
// at 400 pages, the worker's at 100; allowed calls are recorded a few at a time with pauses until
// the WAL index (the `-shm` file's header: mxFrame at byte 16, nBackfill at 96) shows frames copied
// back while the log never reached 400 frames, which only the worker can have done. Prints
// "checkpointed" or "not checkpointed". Run by tests/packaging/packaging.test.ts under Node and Bun.
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { endianness } from "node:os"

const filename = process.argv[2]

const index = () => {
  const header = readFileSync(`${filename}-shm`).subarray(0, 100)
  const u32 = (at) => endianness() === "LE" ? header.readUInt32LE(at) : header.readUInt32BE(at)
  return { frames: u32(16), backfilled: u32(96) }
}

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  let most = 0
  for (let n = 0, deadline = Date.now() + 20_000; Date.now() < deadline;) {
    for (let i = 0; i < 5; i++, n++) yield* gate.authorize({ id: `c${n}`, name: "ls", sessionKey: "s", args: { n } })
    yield* Effect.sleep("5 millis")
    const { backfilled, frames } = index()
    most = Math.max(most, frames)
    if (most >= 400) break
    if (backfilled > 0) return "checkpointed"
  }
  return "not checkpointed"
})

console.log(
  await Effect.runPromise(program.pipe(
    Effect.provide(
      ToolGateSqlite.layer({
        filename,
        policy: Policy.allowAll,
        walAutocheckpointPages: 400,
        checkpoints: "background"
      })
    )
  ))
)
