/**
 * W7 HTTP approvals (docs/benchmarks.md): the approval server on loopback, in a process of its
 * own, answering pending requests over 16 connections while 8 SSE clients follow the audit stream
 * (bench/load.ts: half replay from the start, half reconnect with Last-Event-ID every 100 events),
 * as the workload is defined; then again with 4 more connections reading pending lists, round the
 * sessions, beside the answers ("pending lists read beside": more than the workload asks, each read
 * a list of about 80 requests); then as defined again on a server that has answered 20,000 before
 * ("after 20000 answers": its JIT has compiled what the answers run). Figures: answers per second, answer p50/p99, events
 * lost / repeated / out of order (must be 0), the server's CPU ms per answer (from
 * /proc/<pid>/stat, so a figure taken on a busy machine still says how much work an answer is:
 * every thread, and the main thread alone, which runs the JavaScript; the rest is mostly the JIT
 * compiling a fresh process's code) and the clients' (this process: autocannon and the SSE
 * readers, on the same cores; the checks after the run left out), on SQLite and, when
 * TOOLGATE_PG_URL is set, on PostgreSQL, with the database server's CPU per answer too (every local
 * `postgres` process: run one server at a time).
 *
 * Then memory at scale, on SQLite: the server's RSS (/proc/<pid>/status VmRSS) with W7_PENDING
 * pending requests, after one client listed them all, and with W7_SSE_CLIENTS event streams open;
 * W7_SSE_ANSWERS answers are then given and every stream must receive every event they make.
 *
 *   bun bench/w7.ts        W7_PENDING=10000 W7_SSE_CLIENTS=1000 W7_SSE_ANSWERS=100 by default; W7_STORES=pg
 *                          (or sqlite) for one store; W7_MEMORY=0 without the memory run; W7_WARMUP=2000
 *                          answers under the same load before the 4,000 measured ones (the JIT's first
 *                          compiles done); LOAD_READ_CONNECTIONS=N readers in the second run (0: no
 *                          second run); W7_SETTLED_WARMUP=20000 answers before the last run's (0: no
 *                          last run);
 *                          the load itself as bench/load.ts (LOAD_REQUESTS=4000 ...; LOAD_SERVER_RUNTIME=node:
 *                          the server on Node, as `toolgate serve` runs; its JSON lines say `server`)
 */
import { ApprovalStore } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, type Layer, Redacted } from "effect"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pgSchema } from "../tests/support/sqlStores.js"
import { runLoad, serverRuntime, startServer } from "./load.js"
import { token } from "./loadServer.js"

const PENDING = Number(process.env.W7_PENDING ?? 10_000)
const SSE_CLIENTS = Number(process.env.W7_SSE_CLIENTS ?? 1000)
const SSE_ANSWERS = Number(process.env.W7_SSE_ANSWERS ?? 100)
const DEADLINE_MS = Number(process.env.LOAD_DEADLINE_S ?? 120) * 1000
const REQUESTS = Number(process.env.LOAD_REQUESTS ?? 4000)
/**
 * answers given under the same load before the measured ones, so the server's JIT has settled (a
 * server runs for long; a fresh process compiles its code as it goes)
 */
const WARMUP = Number(process.env.W7_WARMUP ?? 2000)
/**
 * The last run's warm-up: a server that has answered this many, under the same load, before the
 * 4,000 measured (0: no such run). After 2,000 the JIT's thread still compiles about 0.2 ms of CPU
 * per answer, as functions reach its top tier one after another; a server that runs for long has
 * compiled them all.
 */
const SETTLED_WARMUP = Number(process.env.W7_SETTLED_WARMUP ?? 20_000)
/** the second run's connections reading pending lists beside the answers (the workload has none) */
const READ_CONNECTIONS = Number(process.env.LOAD_READ_CONNECTIONS ?? 4)

/** The process's resident set, in MB. */
const rssMb = (pid: number) => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))!
  return Math.round(Number(line.split(/\s+/)[1]) / 1024)
}

/** CPU time (user + system) in ms, from a `stat` file of /proc. */
const statCpuMs = (path: string) => {
  // the fields after the command (which may hold spaces), from `state`: utime and stime are 12th and 13th
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 1000 / 100
}

/** The process's CPU time, every thread (JIT, GC, file watching), in ms. */
const cpuMs = (pid: number) => statCpuMs(`/proc/${pid}/stat`)

/** The CPU time of the process's main thread, the one that runs its JavaScript, in ms. */
const mainThreadCpuMs = (pid: number) => statCpuMs(`/proc/${pid}/task/${pid}/stat`)

/** CPU time in ms of each of the process's threads, summed by thread name (`comm`). */
const threadCpuMs = (pid: number): Record<string, number> => {
  const byName: Record<string, number> = {}
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8")
      const name = task === String(pid) ? "main" : stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
      byName[name] = (byName[name] ?? 0) + statCpuMs(`/proc/${pid}/task/${task}/stat`)
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return byName
}

/** The load of bench/load.ts against a server process, with the server's CPU time per answer. */
const load = async <E>(
  kind: "sqlite" | "pg",
  target: string,
  storeLayer: Layer.Layer<ApprovalStore.ApprovalStore, E>,
  readConnections: number,
  warmup = WARMUP
) => {
  const server = await startServer(kind, target, warmup + REQUESTS)
  try {
    const options = {
      ...server,
      token,
      sessions: 50,
      sseClients: Number(process.env.LOAD_SSE_CLIENTS ?? 8),
      readConnections
    }
    let afterSeq = server.afterSeq
    if (warmup > 0) {
      const warmed = await Effect.runPromise(
        runLoad({ ...options, requestIds: server.requestIds.slice(0, warmup) }).pipe(Effect.provide(storeLayer))
      )
      if (!warmed.answeredExactlyOnce || warmed.lostEvents + warmed.duplicateEvents + warmed.errors > 0) {
        throw new Error(`the warm-up went wrong: ${JSON.stringify(warmed)}`)
      }
      afterSeq = await Effect.runPromise(
        Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.lastSeq).pipe(Effect.provide(storeLayer))
      )
    }
    const before = cpuMs(server.pid)
    const mainBefore = mainThreadCpuMs(server.pid)
    const threadsBefore = threadCpuMs(server.pid)
    const figures = await Effect.runPromise(
      runLoad({
        ...options,
        requestIds: server.requestIds.slice(warmup),
        afterSeq,
        // the replaying clients replay as many events as without a warm-up: the measured requests' creation
        replayAfterSeq: Math.max(0, afterSeq - Math.round(server.afterSeq * REQUESTS / (warmup + REQUESTS)))
      }).pipe(
        Effect.provide(storeLayer)
      )
    )
    // a server that died under the load (its crash report is above) has no /proc entry to read
    if (!existsSync(`/proc/${server.pid}`)) throw new Error(`the ${kind} server process ended during the run`)
    const perAnswer = (ms: number) => Math.round(ms / figures.requests * 100) / 100
    const serverCpuMsPerAnswer = perAnswer(cpuMs(server.pid) - before)
    // the rest is mostly the JIT compiling a fresh process's code while it runs
    const serverMainThreadCpuMsPerAnswer = perAnswer(mainThreadCpuMs(server.pid) - mainBefore)
    const clientCpuMsPerAnswer = perAnswer(figures.clientCpuMs)
    const databaseCpuMsPerAnswer = kind === "pg" && figures.databaseCpuMs !== undefined
      ? perAnswer(figures.databaseCpuMs)
      : undefined
    // which threads the rest is (JavaScriptCore's GC helpers, its JIT, the file watcher...)
    const serverThreadCpuMsPerAnswer = Object.fromEntries(
      Object.entries(threadCpuMs(server.pid))
        .map(([name, ms]) => [name, perAnswer(ms - (threadsBefore[name] ?? 0))] as const)
        .filter(([, ms]) => ms > 0)
    )
    return {
      answersPerSec: figures.answeredPerSec,
      answerP50ms: figures.answerP50ms,
      answerP99ms: figures.answerP99ms,
      serverCpuMsPerAnswer,
      serverMainThreadCpuMsPerAnswer,
      serverThreadCpuMsPerAnswer,
      clientCpuMsPerAnswer,
      ...(databaseCpuMsPerAnswer !== undefined ? { databaseCpuMsPerAnswer } : {}),
      serverRssMb: rssMb(server.pid),
      requests: figures.requests,
      sseClients: figures.sseClients,
      sseReconnects: figures.sseReconnects,
      reads: figures.reads,
      readsAll: figures.readsAll,
      readP50ms: figures.readP50ms,
      readP99ms: figures.readP99ms,
      errors: figures.errors,
      lostEvents: figures.lostEvents,
      duplicateEvents: figures.duplicateEvents,
      outOfOrderEvents: figures.outOfOrderEvents,
      answeredExactlyOnce: figures.answeredExactlyOnce
    }
  } finally {
    await server.stop()
  }
}

/**
 * A bare SSE client on a socket of its own (fetch shares a few connections): decodes the chunked
 * response, counting the chunks (each one write of the server's) and the events they carry.
 */
interface RawStream {
  readonly socket: Socket
  readonly started: Promise<void>
  readonly seqs: Array<number>
  /** chunks received after the first (the `retry` hint) */
  readonly writes: () => number
}

const rawStream = (url: URL, afterSeq: number): RawStream => {
  const socket = connect(Number(url.port), url.hostname)
  const seqs: Array<number> = []
  let writes = -1
  let raw = Buffer.alloc(0)
  let headersDone = false
  let text = ""
  const started = new Promise<void>((resolve, reject) => {
    socket.once("error", reject)
    socket.on("data", (data: Buffer) => {
      raw = Buffer.concat([raw, data])
      if (!headersDone) {
        const end = raw.indexOf("\r\n\r\n")
        if (end < 0) return
        headersDone = true
        raw = raw.subarray(end + 4)
      }
      for (;;) {
        const line = raw.indexOf("\r\n")
        if (line < 0) break
        const size = parseInt(raw.subarray(0, line).toString("latin1"), 16)
        if (raw.length < line + 2 + size + 2) break
        text += raw.subarray(line + 2, line + 2 + size).toString("utf8")
        raw = raw.subarray(line + 2 + size + 2)
        writes++
        resolve()
      }
      const end = text.lastIndexOf("\n\n")
      if (end < 0) return
      for (const match of text.slice(0, end).matchAll(/^id: (\d+)$/gm)) seqs.push(Number(match[1]))
      text = text.slice(end + 2)
    })
  })
  socket.write(
    `GET /audit/stream?afterSeq=${afterSeq} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\n` +
      "Accept: text/event-stream\r\n\r\n"
  )
  return { socket, started, seqs, writes: () => writes }
}

const memoryAtScale = async (filename: string) => {
  const server = await startServer("sqlite", filename, PENDING)
  const streams: Array<RawStream> = []
  try {
    const rssPendingMb = rssMb(server.pid)
    const listed = await fetch(`${server.url}/approvals/pending`, { headers: { authorization: `Bearer ${token}` } })
    const pendingListed = ((await listed.json()) as Array<unknown>).length
    const rssPendingListedMb = rssMb(server.pid)

    const url = new URL(server.url)
    for (let i = 0; i < SSE_CLIENTS; i++) streams.push(rawStream(url, server.afterSeq))
    await Promise.all(streams.map((stream) => stream.started))
    const rssSseMb = rssMb(server.pid)

    // Some answers, seen by every stream: each gets every event, once.
    const answered = server.requestIds.slice(0, SSE_ANSWERS)
    const started = performance.now()
    await Promise.all(answered.map((requestId) =>
      fetch(`${server.url}/approvals/${requestId}/respond`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ decision: "approve_once" })
      }).then((response) => response.text())
    ))
    const head = await fetch(`${server.url}/audit/head`, { headers: { authorization: `Bearer ${token}` } })
    const { lastSeq } = (await head.json()) as { lastSeq: number }
    const expected = lastSeq - server.afterSeq
    while (
      performance.now() - started < DEADLINE_MS && streams.some((stream) => stream.seqs.length < expected)
    ) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const deliveredMs = Math.round(performance.now() - started)
    let lostEvents = 0
    let duplicateEvents = 0
    for (const stream of streams) {
      const received = new Set(stream.seqs)
      duplicateEvents += stream.seqs.length - received.size
      for (let seq = server.afterSeq + 1; seq <= lastSeq; seq++) if (!received.has(seq)) lostEvents++
    }
    return {
      pending: PENDING,
      pendingListed,
      rssPendingMb,
      rssPendingListedMb,
      sseClients: SSE_CLIENTS,
      rssSseMb,
      sseAnswers: answered.length,
      sseEventsPerClient: expected,
      sseDeliveredToAllMs: deliveredMs,
      sseWritesPerClient: Math.round(streams.reduce((n, stream) => n + stream.writes(), 0) / streams.length),
      sseLostEvents: lostEvents,
      sseDuplicateEvents: duplicateEvents
    }
  } finally {
    for (const stream of streams) stream.socket.destroy()
    await server.stop()
  }
}

/** W7_STORES=pg (or sqlite) runs that store alone */
const stores = (process.env.W7_STORES ?? "sqlite,pg").split(",")

/**
 * The workload as it is defined, then with connections reading pending lists beside (none when 0),
 * then as defined on a server that has run for long (none when 0).
 */
const variants = [
  { name: "", readConnections: 0, warmup: WARMUP },
  ...(READ_CONNECTIONS > 0
    ? [{ name: ", pending lists read beside", readConnections: READ_CONNECTIONS, warmup: WARMUP }]
    : []),
  ...(SETTLED_WARMUP > 0
    ? [{ name: `, after ${SETTLED_WARMUP} answers`, readConnections: 0, warmup: SETTLED_WARMUP }]
    : [])
]

if (import.meta.main && stores.includes("sqlite")) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w7-"))
  try {
    for (const [i, { name, readConnections, warmup }] of variants.entries()) {
      const filename = join(dir, `load${i}.db`)
      const figures = await load("sqlite", filename, ToolGateSqlite.layerStore({ filename }), readConnections, warmup)
      console.log(JSON.stringify({ workload: `W7 SQLite${name}`, server: serverRuntime, ...figures }))
    }
    if (process.env.W7_MEMORY !== "0") {
      const memory = await memoryAtScale(join(dir, "scale.db"))
      console.log(JSON.stringify({ workload: "W7 SQLite memory", server: serverRuntime, ...memory }))
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
if (import.meta.main && stores.includes("pg")) {
  const pg = process.env.TOOLGATE_PG_URL
  for (const { name, readConnections, warmup } of variants) {
    if (pg) {
      const figures = await Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(
            pgSchema(pg),
            (url) =>
              Effect.promise(() =>
                load("pg", url, ToolGatePg.layerStore({ url: Redacted.make(url) }), readConnections, warmup)
              )
          )
        )
      )
      console.log(JSON.stringify({ workload: `W7 PostgreSQL${name}`, server: serverRuntime, ...figures }))
    } else {
      console.log(JSON.stringify({ workload: `W7 PostgreSQL${name}`, skipped: "TOOLGATE_PG_URL not set" }))
    }
  }
}
if (import.meta.main) {
  // a closed PgClient may still hold its LISTEN socket; the figures are out, so leave
  process.exit(0)
}
