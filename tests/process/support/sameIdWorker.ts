/**
 * One side of the same-call-id race, run under Node (better-sqlite3) or against PostgreSQL:
 *
 *   race DB SESSION COMMAND COUNT GO_FILE
 *
 * Opens the gate (policy: deny bash `rm *`, allow bash), prints `ready`, waits until GO_FILE
 * exists, then calls `gate.gate({ id: "id-<i>", name: "bash", args: { command: COMMAND } })` for
 * i in 0..COUNT-1 and prints `done` with, per id, what happened and the command the tool got.
 * Two processes with other commands run the same ids at the same time.
 *
 * DB is a SQLite file path, or a postgres:// URL.
 */
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Either, Redacted } from "effect"
import { existsSync } from "node:fs"

const [command, db, sessionKey, shell, count, goFile] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string
]

const policy = Policy.unsafeMake({ deny: [{ tool: "bash", args: { command: "rm *" } }], allow: ["bash"] })

const say = (value: object) => Effect.sync(() => console.log(JSON.stringify({ ...value, at: Date.now() })))

const tagOf = (error: unknown): string => {
  const tag = (error as { _tag?: string })._tag ?? String(error)
  const problems = (error as { problems?: ReadonlyArray<{ path: string }> }).problems
  return tag === "InvalidToolCall" && problems?.some((p) => p.path === "id") ? "InvalidToolCall:id" : tag
}

const program = Effect.gen(function*() {
  if (command !== "race") return yield* Effect.die(`unknown command ${command}`)
  const gate = yield* ToolGate.ToolGate
  yield* say({ event: "ready" })
  while (!existsSync(goFile)) yield* Effect.sleep("1 millis")
  const results: Array<{ id: string; result: string; ran?: unknown }> = []
  for (let i = 0; i < Number(count); i++) {
    const id = `id-${i}`
    let ran: unknown
    const outcome = yield* Effect.either(
      gate.gate({ id, name: "bash", sessionKey, args: { command: shell } }, (allowed) =>
        Effect.sync(() => {
          ran = allowed.call.args.command
        }))
    )
    results.push({
      id,
      result: Either.isRight(outcome) ? "ran" : tagOf(outcome.left),
      ...(ran !== undefined ? { ran } : {})
    })
  }
  return yield* say({ event: "done", results })
})

const options: ToolGate.Options = { policy, sweepInterval: "1 second" }
const layer = db.startsWith("postgres://")
  ? ToolGatePg.layer({ url: Redacted.make(db), ...options })
  : ToolGateSqlite.layer({ filename: db, ...options })

Effect.runPromise(program.pipe(Effect.provide(layer))).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
