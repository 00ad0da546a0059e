/**
 * W7's routes in Effect steps (bench/effectSteps.ts): the approval server (`Server.layer`) in this
 * process on a SQLite file, with every fiber it starts counted, and requests made one after another
 * by `fetch` (which runs no Effect): an answer, a pending list of one session, the identity. Each
 * route's steps per request, the server's background fibers (log tailer, change feed) included.
 * A count no busy machine moves, so a change that saves work shows in one run.
 *
 *   bun bench/w7Steps.ts      W7S_REQUESTS=400 by default (after as many unmeasured)
 */
import { HttpServer } from "@effect/platform"
import { ToolGate } from "@tool-gate/core"
import { Server } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { counted, StepCounter, stepsPer } from "./effectSteps.js"
import { createPending, policy, sessionKey, sessions, token, tokens } from "./loadServer.js"

const REQUESTS = Number(process.env.W7S_REQUESTS ?? 400)

const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }

/** `times` requests made one after another by `request(i)`, each read to its end. */
const oneByOne = (times: number, request: (i: number) => Promise<Response>) =>
  Effect.promise(async () => {
    for (let i = 0; i < times; i++) {
      const response = await request(i)
      await response.text()
      if (!response.ok) throw new Error(`status ${response.status}`)
    }
  })

export const runW7Steps = (filename: string) => {
  const counter = new StepCounter()
  return counted(
    Effect.gen(function*() {
      const context = yield* Layer.build(
        Server.layer({ port: 0, tokens }).pipe(Layer.provideMerge(ToolGateSqlite.layer({ filename, policy })))
      )
      const address = Context.get(context, HttpServer.HttpServer).address
      if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
      const url = `http://127.0.0.1:${address.port}`
      const ids = yield* createPending(Context.get(context, ToolGate.ToolGate), 2 * REQUESTS, sessions)
      const answer = (i: number) =>
        fetch(`${url}/approvals/${ids[i]}/respond`, {
          method: "POST",
          headers,
          body: JSON.stringify({ decision: "approve_once" })
        })
      const list = (i: number) => fetch(`${url}/approvals/pending?sessionKey=${sessionKey(i, sessions)}`, { headers })
      const me = () => fetch(`${url}/me`, { headers })
      yield* oneByOne(REQUESTS, answer)
      yield* oneByOne(REQUESTS, list)
      yield* oneByOne(REQUESTS, me)
      return {
        requests: REQUESTS,
        answerEffectSteps: yield* stepsPer(counter, REQUESTS, oneByOne(REQUESTS, (i) => answer(REQUESTS + i))),
        pendingListEffectSteps: yield* stepsPer(counter, REQUESTS, oneByOne(REQUESTS, list)),
        meEffectSteps: yield* stepsPer(counter, REQUESTS, oneByOne(REQUESTS, me))
      }
    }).pipe(Effect.scoped),
    counter
  )
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w7steps-"))
  try {
    console.log(
      JSON.stringify({ workload: "W7 steps SQLite", ...(await Effect.runPromise(runW7Steps(join(dir, "w7.db")))) })
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  process.exit(0)
}
