/**
 * W7 route by route: the server process of bench/load.ts (SQLite, no SSE client), each route
 * alone through autocannon, the server's CPU time per request (`/proc/<pid>/stat`, every thread
 * and the main thread). Says what each part of a W7 answer costs: the answer itself, a pending
 * list of one session (about 40 requests) and of every session, the identity (auth and the
 * platform's per-request work, no store), health (no auth), and an event stream's reconnect (one
 * client at a time: it resumes with `Last-Event-ID` three events back, takes the first, and drops
 * the connection, as W7's reconnecting clients do every 100 events).
 *
 *   bun bench/w7Routes.ts      W7R_ANSWERS=3000 W7R_READS=3000 W7R_RECONNECTS=1000 by default
 */
import autocannon from "autocannon"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startServer } from "./load.js"
import { token } from "./loadServer.js"

const ANSWERS = Number(process.env.W7R_ANSWERS ?? 3000)
const READS = Number(process.env.W7R_READS ?? 3000)
const RECONNECTS = Number(process.env.W7R_RECONNECTS ?? 1000)
/** e.g. W7R_ONLY=respond: that route alone (after the warm-up), to profile it */
const ONLY = process.env.W7R_ONLY

const statCpuMs = (path: string) => {
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 1000 / 100
}

const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }

const measure = async (pid: number, label: string, run: () => Promise<number>) => {
  if (ONLY !== undefined && !label.includes(ONLY)) return undefined
  const all = statCpuMs(`/proc/${pid}/stat`)
  const main = statCpuMs(`/proc/${pid}/task/${pid}/stat`)
  const started = performance.now()
  const count = await run()
  const seconds = (performance.now() - started) / 1000
  const per = (ms: number) => Math.round(ms / count * 1000) / 1000
  return {
    route: label,
    requests: count,
    perSec: Math.round(count / seconds),
    serverCpuMs: per(statCpuMs(`/proc/${pid}/stat`) - all),
    mainThreadCpuMs: per(statCpuMs(`/proc/${pid}/task/${pid}/stat`) - main)
  }
}

const hammer = async (url: string, amount: number, request: autocannon.Request) => {
  let bad = 0
  const result = await autocannon({
    url,
    connections: 16,
    amount,
    timeout: 10,
    headers,
    requests: [{
      ...request,
      onResponse: (status) => {
        if (status >= 300) bad++
      }
    }]
  })
  if (bad > 0 || result.errors > 0) throw new Error(`${request.path ?? "setup"}: ${bad} bad statuses`)
  return amount
}

/** `count` reconnects of an event stream, one after another; each resumes `back` events before `seq`. */
const reconnects = async (url: string, count: number, seq: number, back = 3) => {
  const decoder = new TextDecoder()
  for (let i = 0; i < count; i++) {
    const abort = new AbortController()
    const response = await fetch(`${url}/audit/stream`, {
      headers: { ...headers, accept: "text/event-stream", "last-event-id": String(Math.max(0, seq - back)) },
      signal: abort.signal
    })
    if (response.status !== 200 || response.body === null) throw new Error(`/audit/stream: status ${response.status}`)
    const reader = response.body.getReader()
    let text = ""
    while (!text.includes("data:")) {
      const chunk = await reader.read()
      if (chunk.done) throw new Error("/audit/stream ended before its first event")
      text += decoder.decode(chunk.value, { stream: true })
    }
    abort.abort()
  }
  return count
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w7r-"))
  const server = await startServer("sqlite", join(dir, "routes.db"), ANSWERS)
  try {
    const rows = []
    // warm-up: the JIT compiles the hot paths first
    await hammer(server.url, 500, { method: "GET", path: "/me" })
    await hammer(server.url, 200, { method: "GET", path: "/approvals/pending?sessionKey=load-1" })
    rows.push(await measure(server.pid, "GET /health", () => hammer(server.url, READS, { path: "/health" })))
    rows.push(await measure(server.pid, "GET /me", () => hammer(server.url, READS, { path: "/me" })))
    rows.push(
      await measure(
        server.pid,
        "GET /approvals/pending?sessionKey (40)",
        () => hammer(server.url, READS, { path: "/approvals/pending?sessionKey=load-7" })
      )
    )
    rows.push(
      await measure(
        server.pid,
        `GET /approvals/pending (${ANSWERS})`,
        () => hammer(server.url, Math.ceil(READS / 20), { path: "/approvals/pending" })
      )
    )
    await reconnects(server.url, 100, server.afterSeq)
    rows.push(
      await measure(
        server.pid,
        "GET /audit/stream (reconnect)",
        () => reconnects(server.url, RECONNECTS, server.afterSeq)
      )
    )
    let next = 0
    rows.push(
      await measure(server.pid, "POST /approvals/:id/respond", () =>
        hammer(server.url, ANSWERS, {
          method: "POST",
          setupRequest: (request) => ({
            ...request,
            path: `/approvals/${server.requestIds[next++]}/respond`,
            body: JSON.stringify({ decision: "approve_once" })
          })
        }))
    )
    for (const row of rows) if (row !== undefined) console.log(JSON.stringify(row))
  } finally {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}
