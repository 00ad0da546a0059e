/**
 * W7's answer in one process, without sockets: what an answer costs in the gate alone
 * (`gate.respond`, 16 at a time, with the server's audit fan-out following the log as it does in
 * the server) and through the approval API's handler (`HttpApiBuilder.toWebHandler`, requests
 * built in memory), plus a pending list of one session and `/me`. CPU µs per operation from
 * `process.cpuUsage`, so the difference between the rows is what the HTTP layer adds.
 *
 *   bun bench/w7InProcess.ts     W7P_ANSWERS=3000 by default; W7P_ONLY=gate for gate.respond alone;
 *                                with `--preload bench/sqliteSpy.ts`, the statements per operation
 */
import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { type ApprovalRequest, type ApprovalStore, ToolGate } from "@tool-gate/core"
import { Auth, Http } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createPending, policy, token, tokens } from "./loadServer.js"

const ANSWERS = Number(process.env.W7P_ANSWERS ?? 3000)
const CONCURRENCY = 16

/** Runs `count` operations, `CONCURRENCY` at a time; CPU µs and wall µs per operation. */
const timed = async (label: string, count: number, op: (i: number) => Promise<unknown>) => {
  const cpu = process.cpuUsage()
  const started = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < count) await op(next++)
  }))
  const used = process.cpuUsage(cpu)
  const wallMs = performance.now() - started
  return {
    op: label,
    count,
    perSec: Math.round(count / wallMs * 1000),
    cpuUsPerOp: Math.round((used.user + used.system) / count)
  }
}

/** The API as a web handler over the gate's context, with the lean routes or without. */
const handlerOf = (context: Context.Context<ToolGate.ToolGate | ApprovalStore.ApprovalStore>, lean: boolean) =>
  HttpApiBuilder.toWebHandler(
    Layer.mergeAll(
      Http.layer,
      lean ? Http.layerBodyLimitWithLeanRoutes(64 * 1024) : Http.layerBodyLimit(64 * 1024),
      HttpServer.layerContext
    ).pipe(Layer.provide(Auth.layer(tokens)), Layer.provide(Layer.succeedContext(context)))
  ).handler

const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }

const ok = async (response: Response) => {
  const text = await response.text()
  if (response.status !== 200) throw new Error(`status ${response.status} ${text}`)
  return text
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w7p-"))
  const scope = Effect.runSync(Scope.make())
  try {
    const gateLayer = ToolGateSqlite.layer({ filename: join(dir, "inprocess.db"), policy })
    const context = await Effect.runPromise(Layer.buildWithScope(gateLayer, scope))
    const gate = Context.get(context, ToolGate.ToolGate)
    const handlers = { full: handlerOf(context, false), lean: handlerOf(context, true) }
    const rounds = 3
    const ids: ReadonlyArray<ApprovalRequest.RequestId> = await Effect.runPromise(
      createPending(gate, (3 * rounds + 1) * ANSWERS, 50)
    )
    let nextId = 0
    const get = (kind: keyof typeof handlers, path: string) =>
      handlers[kind](new Request(`http://local${path}`, { headers })).then(ok)
    const respond = (kind: keyof typeof handlers) =>
      handlers[kind](
        new Request(`http://local/approvals/${ids[nextId++]}/respond`, {
          method: "POST",
          headers,
          body: JSON.stringify({ decision: "approve_once" })
        })
      ).then(ok)
    const gateRespond = () =>
      Effect.runPromise(gate.respond(ids[nextId++]!, { decision: "approve_once", respondedBy: "load" }))
    // warm-up: every path once
    await timed("warm-up", ANSWERS / 3, () => gateRespond())
    await timed("warm-up", ANSWERS / 3, () => respond("full"))
    await timed("warm-up", ANSWERS / 3, () => respond("lean"))
    globalThis.sqliteSpy?.reset()
    const rows: Array<Awaited<ReturnType<typeof timed>>> = []
    // W7P_ONLY=gate: gate.respond alone (with bench/sqliteSpy.ts preloaded: its statements)
    const gateOnly = process.env.W7P_ONLY === "gate"
    for (let round = 0; round < rounds; round++) {
      if (gateOnly) {
        rows.push(await timed("gate.respond", ANSWERS, () => gateRespond()))
        continue
      }
      rows.push(await timed("GET /me", ANSWERS, () => get("full", "/me")))
      for (const kind of ["full", "lean"] as const) {
        rows.push(
          await timed(
            `GET pending?sessionKey ${kind}`,
            ANSWERS / 3,
            () => get(kind, "/approvals/pending?sessionKey=load-3")
          )
        )
      }
      rows.push(await timed("gate.respond", ANSWERS, () => gateRespond()))
      rows.push(await timed("POST respond full", ANSWERS, () => respond("full")))
      rows.push(await timed("POST respond lean", ANSWERS, () => respond("lean")))
    }
    for (const row of rows) console.log(JSON.stringify(row))
    const spy = globalThis.sqliteSpy
    if (spy !== undefined) {
      const operations = rows.reduce((n, row) => n + row.count, 0)
      for (const [statement, { ns, runs }] of [...spy.stats].sort((a, b) => b[1].ns - a[1].ns).slice(0, 12)) {
        const perOp = Math.round(ns / 1000 / operations)
        console.log(JSON.stringify({ statement: statement.slice(0, 160), runs, perOpUs: perOp }))
      }
    }
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    rmSync(dir, { recursive: true, force: true })
  }
  process.exit(0)
}
