/**
 * A store process for the start-up and sequence tests, run under Node (better-sqlite3). Prints one
 * JSON object per line.
 *
 *   open DB GO_FILE ID   load everything, report "ready", wait until GO_FILE exists, then open the
 *                        gate on DB (a new file for most) and decide one call: report "decided"
 *   hang DB COUNT        open the store, append COUNT events inside a transaction, report
 *                        "inserted" and hold the transaction open until killed
 *
 * DB is a SQLite file path, or a postgres:// URL.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { ApprovalStore, PauseSignal, Policy, SqlApprovalStore, ToolCall, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer, Redacted } from "effect"
import { existsSync } from "node:fs"

const [command, db, ...rest] = process.argv.slice(2) as [string, string, ...Array<string>]
const say = (value: object) => Effect.sync(() => console.log(JSON.stringify({ ...value, at: Date.now() })))
const isPg = db.startsWith("postgres://")

/** Resolves once `file` exists (checked every 2 ms, so all processes start within a few ms). */
const goSignal = (file: string) =>
  Effect.async<void>((resume) => {
    const timer = setInterval(() => {
      if (existsSync(file)) {
        clearInterval(timer)
        resume(Effect.void)
      }
    }, 2)
    return Effect.sync(() => clearInterval(timer))
  })

const open = (goFile: string, id: string) => {
  const options = { policy: Policy.unsafeMake({ allow: ["ls"] }) }
  const gate = isPg
    ? ToolGatePg.layer({ url: Redacted.make(db), ...options })
    : ToolGateSqlite.layer({ filename: db, ...options })
  return Effect.gen(function*() {
    yield* say({ event: "ready" })
    yield* goSignal(goFile)
    const decided = yield* Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(gate)
      return yield* ToolGate.ToolGate.pipe(
        Effect.flatMap((g) => g.authorize({ id, name: "ls", sessionKey: "start", args: { path: id } })),
        Effect.provide(context)
      )
    }))
    yield* say({ event: "decided", paused: PauseSignal.isPauseSignal(decided) })
  })
}

const hang = (count: number) => {
  const client: Layer.Layer<SqlClient.SqlClient> = isPg
    ? PgClient.layer({ url: Redacted.make(db) }).pipe(Layer.orDie)
    : ToolGateSqlite.layerClient(db).pipe(Layer.orDie)
  const store = SqlApprovalStore.layer().pipe(
    Layer.provide(SqlApprovalStore.layerPollingFeed()),
    Layer.provideMerge(client),
    Layer.orDie
  )
  return Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const approvals = yield* ApprovalStore.ApprovalStore
    const events = Array.from({ length: count }, (_, i) => ({
      at: Date.now(),
      type: "decision" as const,
      outcome: "allow" as const,
      sessionKey: ToolCall.SessionKey.make("hang"),
      toolCallId: ToolCall.ToolCallId.make(`hang-${process.pid}-${i}`),
      toolName: "ls",
      policyVersion: "v1",
      via: "policy" as const,
      args: "{}"
    }))
    yield* sql.withTransaction(Effect.gen(function*() {
      const sequenced = yield* approvals.append(events)
      yield* say({ event: "inserted", seqs: sequenced.map((e) => e.seq) })
      return yield* Effect.never
    }))
  }).pipe(Effect.provide(store))
}

const program = command === "open"
  ? open(rest[0]!, rest[1]!)
  : command === "hang"
  ? hang(Number(rest[0]))
  : Effect.dieMessage(`unknown command ${command}`)

Effect.runPromise(program as Effect.Effect<void, unknown>).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
