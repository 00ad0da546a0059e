/**
 * The server process of the HTTP benches (bench/load.ts, bench/w7.ts, bench/w7Routes.ts): the
 * approval server (`Server.layer`) on loopback over a SQLite file or a PostgreSQL URL, with N
 * pending requests created through `ToolGate` over `sessions` sessions; prints a `Ready` line.
 *
 *   bun bench/loadServer.ts sqlite FILE [N]     or  pg URL [N]   (N: LOAD_REQUESTS, 2,000 by default)
 *
 * It imports nothing Bun-only, so `startServer` (bench/load.ts) can also bundle it for Node and run
 * it there (`LOAD_SERVER_RUNTIME=node`): the server on better-sqlite3 and Node's own HTTP server, as
 * `toolgate serve` runs.
 */
import { HttpServer } from "@effect/platform"
import { type ApprovalRequest, ApprovalStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { type Auth, Server } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Context, Effect, Layer, Redacted } from "effect"

export const requests = Number(process.env.LOAD_REQUESTS ?? 2000)
export const sessions = 50

export const policy = Policy.unsafeMake({ requireApproval: ["bash"] })

export const token = "load-approver-token-0123456789"
export const tokens: ReadonlyArray<Auth.TokenConfig> = [{ token, name: "load", role: "approver" }]

/** The session of the `i`th pending request (and of the `i`th read), over `sessions` sessions. */
export const sessionKey = (i: number, sessions: number) => `load-${i % sessions}`

/** Pre-creates `count` pending requests over `sessions` sessions; their ids, in order. */
export const createPending = (gate: ToolGate.Service, count: number, sessions: number) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) =>
      Effect.flatMap(
        gate.authorize({
          id: `load-${i}`,
          name: "bash",
          sessionKey: sessionKey(i, sessions),
          args: { command: `make ${i}` }
        }),
        (result) =>
          PauseSignal.isPauseSignal(result)
            ? Effect.succeed(result.requestId)
            : Effect.die(`expected a pause for load-${i}`)
      ),
    { concurrency: 8 }
  )

/** What the server process prints once it listens and its pending requests exist. */
export interface Ready {
  readonly url: string
  readonly requestIds: ReadonlyArray<ApprovalRequest.RequestId>
  readonly afterSeq: number
}

const serve = (kind: string, target: string, pending: number) =>
  Effect.gen(function*() {
    const gateLayer = kind === "pg"
      ? ToolGatePg.layer({ url: Redacted.make(target), policy })
      : ToolGateSqlite.layer({ filename: target, policy })
    const context = yield* Layer.build(Server.layer({ port: 0, tokens }).pipe(Layer.provideMerge(gateLayer)))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
    const requestIds = yield* createPending(Context.get(context, ToolGate.ToolGate), pending, sessions)
    const afterSeq = yield* Context.get(context, ApprovalStore.ApprovalStore).lastSeq
    const ready: Ready = { url: `http://127.0.0.1:${address.port}`, requestIds, afterSeq }
    console.log(JSON.stringify(ready))
    return yield* Effect.never
  }).pipe(Effect.scoped)

// Bun's build for Node keeps this true in the bundle, whose entry this module is
if (import.meta.main) {
  // a normal exit on kill, so a profiler the server runs under writes its profile
  process.on("SIGTERM", () => process.exit(0))
  await Effect.runPromise(serve(process.argv[2]!, process.argv[3]!, Number(process.argv[4] ?? requests)))
}
