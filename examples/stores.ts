// The README's durable stores (section Durable stores): `bun examples/stores.ts` in an empty
// folder opens the SQLite store there; the PostgreSQL layer is only built into a value (nothing
// connects until a program uses it).
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg" // scale-out: PostgreSQL, many hosts
import { ToolGateSqlite } from "@tool-gate/sqlite" // embedded default: one SQLite file (WAL)
import { Effect, Redacted } from "effect"

const policy = Policy.unsafeMake({ requireApproval: ["deploy"] })

export const Local = ToolGateSqlite.layer({ filename: ".toolgate/toolgate.db", policy })
export const Shared = ToolGatePg.layer({ url: Redacted.make(process.env.DATABASE_URL ?? ""), policy })
// each gives ToolGate, Checkpoints, ApprovalStore and CheckpointStore

const program = Effect.flatMap(ToolGate.ToolGate, (gate) => gate.pending())
Effect.runPromise(program.pipe(Effect.provide(Local))).then((pending) => console.log(`${pending.length} pending`))
