/**
 * Load: the approval server answering, listing and streaming at once, on loopback.
 *
 * A real server (`Server.layer`: Node's HTTP server through @effect/platform-node) runs in a
 * process of its own (bench/loadServer.ts; on Bun, or bundled for Node with LOAD_SERVER_RUNTIME=node)
 * over a SQLite file (WAL) in a temp dir, then over PostgreSQL when TOOLGATE_PG_URL is set (a fresh
 * schema), and pre-creates N pending requests through `ToolGate`, spread over 50 sessions. This
 * process opens K SSE clients on `/audit/stream` (half replay the log from the start, so replay
 * meets live events under load; half start after the last event before the load; half of each
 * drop their connection every 100 events and resume with `Last-Event-ID`) and runs two
 * autocannon instances at once: one answers every request by id (approve once / approve for
 * session / deny in turn), plus a conflicting second answer to one request in ten, each of which
 * must get 409; the other reads
 * `/approvals/pending?sessionKey=` round the sessions until the answers are done.
 *
 * Then it checks: no error and no status but 2xx and the deliberate 409s; every request answered
 * exactly once, as its 2xx response said (the store's request and one `approval.resolved` event
 * each); every SSE client received every event of the log after its start exactly once, in seq
 * order, across its reconnects. One JSON line per store.
 *
 * Bounded: N answers plus N/10 conflicts, reads stop with the answers, 10 s per request; the
 * server must be ready, and then the run done, within LOAD_DEADLINE_S each.
 *
 *   bun bench/load.ts                 LOAD_REQUESTS=2000 LOAD_SSE_CLIENTS=8 LOAD_DEADLINE_S=120 by default;
 *                                     LOAD_SERVER_RUNTIME=node: the server on Node, as `toolgate serve` runs
 */
import { type ApprovalRequest, ApprovalStore, type AuditEvent } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import autocannon from "autocannon"
import { Effect, type Layer, Redacted } from "effect"
import { cpSync } from "node:fs"
import { join } from "node:path"
import { pgSchema } from "../tests/support/sqlStores.js"
import { type Ready, requests, sessionKey, sessions, token } from "./loadServer.js"
import { runMain } from "./main.js"
import { postgresCpuMs } from "./postgresCpu.js"

const SSE_CLIENTS = Number(process.env.LOAD_SSE_CLIENTS ?? 8)
const DEADLINE_S = Number(process.env.LOAD_DEADLINE_S ?? 120)
/** the server's runtime: `bun` (its sources) or `node` (bundled for Node, better-sqlite3 on SQLite) */
export const serverRuntime = process.env.LOAD_SERVER_RUNTIME ?? "bun"

export interface Options {
  readonly url: string
  readonly token: string
  /** the pending requests to answer, all in sessions `load-0` .. `load-{sessions - 1}` */
  readonly requestIds: ReadonlyArray<ApprovalRequest.RequestId>
  readonly sessions: number
  /** the last seq before the load */
  readonly afterSeq: number
  /** where the SSE clients that replay start (default 0: the whole log) */
  readonly replayAfterSeq?: number
  readonly sseClients: number
  readonly answerConnections?: number
  readonly readConnections?: number
}

type Decision = "approve_once" | "approve_session" | "deny"

interface Answer {
  readonly requestId: string
  readonly decision: Decision
}

const decisions: ReadonlyArray<Decision> = ["approve_once", "approve_session", "deny"]

const answersFor = (requestIds: ReadonlyArray<string>): Array<Answer> => {
  const first = requestIds.map((requestId, i): Answer => ({ requestId, decision: decisions[i % 3]! }))
  // After every first answer, so each is (almost surely) answered by then; if a conflict still
  // wins the race, the first answer gets the 409 instead and the counts are the same.
  const conflicts = first.filter((_, i) => i % 10 === 0).map((answer): Answer => ({
    requestId: answer.requestId,
    decision: answer.decision === "deny" ? "approve_once" : "deny"
  }))
  return [...first, ...conflicts]
}

const bodyOf = (answer: Answer) =>
  JSON.stringify(answer.decision === "deny" ? { decision: "deny", reason: "load test" } : { decision: answer.decision })

interface StreamClient {
  readonly afterSeq: number
  /** `seq` of each event received, in arrival order, over every connection */
  readonly seqs: Array<number>
  /** protocol faults: a bad status, an `id:` that is not the event's seq, an early end */
  readonly faults: Array<string>
  reconnects: number
  readonly close: () => void
}

/**
 * An SSE client reading `/audit/stream` as fast as events come. With `reconnectEvery`, it drops
 * the connection after that many events and reconnects with `Last-Event-ID`, as an EventSource
 * does after a network blip (the same URL, the last id it saw).
 */
const openStream = async (
  url: string,
  bearer: string,
  afterSeq: number,
  reconnectEvery = Number.POSITIVE_INFINITY
): Promise<StreamClient> => {
  let controller = new AbortController()
  let closed = false
  const client: StreamClient = {
    afterSeq,
    seqs: [],
    faults: [],
    reconnects: 0,
    close: () => {
      closed = true
      controller.abort()
    }
  }
  const connect = async () => {
    const headers: Record<string, string> = { accept: "text/event-stream", authorization: `Bearer ${bearer}` }
    if (client.seqs.length > 0) headers["last-event-id"] = String(client.seqs.at(-1))
    const response = await fetch(`${url}/audit/stream?afterSeq=${afterSeq}`, { headers, signal: controller.signal })
    if (response.status !== 200 || response.body === null) throw new Error(`status ${response.status}`)
    return response.body.getReader()
  }
  const pump = async (reader: Awaited<ReturnType<typeof connect>>): Promise<void> => {
    const decoder = new TextDecoder()
    let buffer = ""
    let received = 0
    for (;;) {
      const chunk = await reader.read()
      if (chunk.done) throw new Error("the stream ended")
      buffer += decoder.decode(chunk.value, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        let id: string | undefined
        let data: string | undefined
        for (const line of buffer.slice(0, end).split("\n")) {
          if (line.startsWith("id:")) id = line.slice(3).trim()
          else if (line.startsWith("data:")) data = line.slice(5).trim()
        }
        buffer = buffer.slice(end + 2)
        if (data === undefined) continue // `retry:` or a keep-alive comment
        const event = JSON.parse(data) as AuditEvent.AuditEvent
        if (id !== String(event.seq)) client.faults.push(`id ${id} on event ${event.seq}`)
        client.seqs.push(event.seq)
        // whatever else this connection had buffered is dropped, as a real blip would lose it
        if (++received >= reconnectEvery) {
          controller.abort()
          controller = new AbortController()
          client.reconnects++
          return pump(await connect())
        }
      }
    }
  }
  const first = await connect().catch((error: unknown) => {
    client.faults.push(String(error))
  })
  if (first !== undefined) {
    pump(first).catch((error: unknown) => {
      if (!closed) client.faults.push(String(error))
    })
  }
  return client
}

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return Math.round((sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0) * 100) / 100
}

/**
 * autocannon's `stop` takes effect at its next sample (`sampleInt`, not in its types): every
 * 10 ms, not every second.
 */
const stopWithin10ms = { sampleInt: 10 }

/**
 * What the HTTP side saw. Latencies are measured here, from building a request to its response,
 * and the time runs to the last answer's response (autocannon notices it is done only at its
 * next one-second sample).
 */
const hammer = async (options: Options, answers: ReadonlyArray<Answer>) => {
  const headers = { authorization: `Bearer ${options.token}`, "content-type": "application/json" }
  const won = new Map<string, Decision>()
  let wonTwice = 0
  let conflicts409 = 0
  const unexpected: Array<string> = []
  const answerMs: Array<number> = []
  /** each read's latency and when it ended */
  const reads: Array<readonly [ms: number, at: number]> = []
  let nextAnswer = 0
  let nextRead = 0
  let lastAnswerAt = 0

  const started = performance.now()
  const readConnections = options.readConnections ?? 4
  // no reader at all with 0 connections (to tell what the reads cost)
  const reading = readConnections === 0 ? undefined : autocannon({
    url: options.url,
    ...stopWithin10ms,
    connections: readConnections,
    duration: DEADLINE_S,
    timeout: 10,
    headers,
    requests: [{
      method: "GET",
      setupRequest: (request, context) => {
        context.sentAt = performance.now()
        return { ...request, path: `/approvals/pending?sessionKey=${sessionKey(nextRead++, options.sessions)}` }
      },
      onResponse: (status, body, context) => {
        const at = performance.now()
        reads.push([at - (context.sentAt as number), at])
        if (status !== 200) unexpected.push(`read ${status} ${body.slice(0, 200)}`)
      }
    }]
  })
  const answered = await autocannon({
    url: options.url,
    connections: options.answerConnections ?? 16,
    amount: answers.length,
    timeout: 10,
    headers,
    requests: [{
      method: "POST",
      setupRequest: (request, context) => {
        const answer = answers[nextAnswer++]
        if (answer === undefined) throw new Error("autocannon sent more answers than it was given")
        context.answer = answer
        context.sentAt = performance.now()
        return { ...request, path: `/approvals/${answer.requestId}/respond`, body: bodyOf(answer) }
      },
      onResponse: (status, body, context) => {
        lastAnswerAt = performance.now()
        answerMs.push(lastAnswerAt - (context.sentAt as number))
        // the reads end with the last answer (within a 10 ms sample), not up to a second later:
        // the server's CPU per answer would count the reads made after the answers (thousands)
        if (answerMs.length === answers.length) reading?.stop()
        const answer = context.answer as Answer
        if (status === 200) {
          const decision = (JSON.parse(body) as { resolution?: { decision?: Decision } }).resolution?.decision
          if (won.has(answer.requestId)) wonTwice++
          won.set(answer.requestId, decision!)
        } else if (status === 409) {
          conflicts409++
        } else {
          unexpected.push(`answer ${status} ${body.slice(0, 200)}`)
        }
      }
    }]
  })
  reading?.stop()
  const read = reading === undefined ? { errors: 0, timeouts: 0 } : await reading
  return {
    seconds: (lastAnswerAt - started) / 1000,
    won,
    wonTwice,
    conflicts409,
    unexpected,
    answerMs,
    // the reads that ran beside the answers
    readMs: reads.filter(([, at]) => at <= lastAnswerAt).map(([ms]) => ms),
    readsAll: reads.length,
    transportErrors: answered.errors + answered.timeouts + read.errors + read.timeouts
  }
}

/**
 * Opens the SSE clients, runs the answers and reads, waits for the clients to catch up with the
 * log, and checks everything against the store in context (the server's own, or another
 * connection to the same database).
 */
export const runLoad = (options: Options) =>
  Effect.gen(function*() {
    const store = yield* ApprovalStore.ApprovalStore
    const clientCpuBefore = process.cpuUsage()
    const databaseCpuBefore = postgresCpuMs()
    const streams = yield* Effect.acquireRelease(
      Effect.promise(() =>
        Promise.all(
          Array.from(
            { length: options.sseClients },
            (_, i) =>
              openStream(
                options.url,
                options.token,
                i % 2 === 0 ? options.replayAfterSeq ?? 0 : options.afterSeq,
                i % 4 >= 2 ? 100 : undefined
              )
          )
        )
      ),
      (streams) => Effect.sync(() => streams.forEach((stream) => stream.close()))
    )
    const answers = answersFor(options.requestIds)
    const http = yield* Effect.promise(() => hammer(options, answers))

    const lastSeq = yield* store.lastSeq
    yield* Effect.promise(async () => {
      const until = performance.now() + 30_000
      while (
        performance.now() < until && streams.some((s) => s.faults.length === 0 && (s.seqs.at(-1) ?? 0) < lastSeq)
      ) {
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    })
    const clientCpu = process.cpuUsage(clientCpuBefore)
    const databaseCpu = postgresCpuMs()
    const log = yield* store.events()

    let lostEvents = 0
    let duplicateEvents = 0
    let outOfOrderEvents = 0
    let streamFaults = 0
    for (const stream of streams) {
      const expected = log.filter((event) => event.seq > stream.afterSeq && event.seq <= lastSeq).map((event) =>
        event.seq
      )
      const received = new Set(stream.seqs)
      lostEvents += expected.filter((seq) => !received.has(seq)).length
      duplicateEvents += stream.seqs.length - received.size
      outOfOrderEvents += stream.seqs.filter((seq, i) => i > 0 && seq <= stream.seqs[i - 1]!).length
      streamFaults += stream.faults.length
      if (stream.faults.length > 0) console.error(`SSE client after ${stream.afterSeq}: ${stream.faults.join("; ")}`)
    }

    const resolvedEvents = new Map<string, number>()
    for (const event of log) {
      if (event.type === "approval.resolved") {
        resolvedEvents.set(event.requestId!, (resolvedEvents.get(event.requestId!) ?? 0) + 1)
      }
    }
    let unanswered = 0
    let wrongAnswer = 0
    for (const requestId of options.requestIds) {
      const request = yield* store.getRequest(requestId)
      const decision = request._tag === "Some" ? request.value.resolution?.decision : undefined
      if (decision === undefined || !resolvedEvents.has(requestId)) {
        unanswered++
      } else if (decision !== http.won.get(requestId)) wrongAnswer++
    }
    const doubleApplied = [...resolvedEvents.values()].filter((n) => n > 1).length + http.wonTwice
    const conflictsSent = answers.length - options.requestIds.length
    for (const line of http.unexpected.slice(0, 5)) console.error(line)

    return {
      requests: options.requestIds.length,
      sseClients: options.sseClients,
      sseReconnects: streams.reduce((n, stream) => n + stream.reconnects, 0),
      // this process's CPU while the clients ran (autocannon, the SSE readers), checks excluded
      clientCpuMs: Math.round((clientCpu.user + clientCpu.system) / 1000),
      // every local PostgreSQL process's over the same time (a SQLite run leaves them idle)
      databaseCpuMs: databaseCpu === undefined || databaseCpuBefore === undefined
        ? undefined
        : databaseCpu - databaseCpuBefore,
      reqPerSec: Math.round((http.answerMs.length + http.readMs.length) / http.seconds),
      answeredPerSec: Math.round(options.requestIds.length / http.seconds),
      answerP50ms: percentile(http.answerMs, 0.5),
      answerP99ms: percentile(http.answerMs, 0.99),
      reads: http.readMs.length,
      readsAll: http.readsAll,
      readP50ms: percentile(http.readMs, 0.5),
      readP99ms: percentile(http.readMs, 0.99),
      conflictsSent,
      conflicts409: http.conflicts409,
      errors: http.transportErrors + http.unexpected.length + Math.abs(http.conflicts409 - conflictsSent) +
        streamFaults,
      lostEvents,
      duplicateEvents,
      outOfOrderEvents,
      unanswered,
      doubleApplied,
      answeredExactlyOnce: unanswered === 0 && doubleApplied === 0 && wrongAnswer === 0
    }
  }).pipe(
    Effect.scoped,
    Effect.timeoutFail({
      duration: `${DEADLINE_S} seconds`,
      onTimeout: () => new Error(`the load run took over ${DEADLINE_S} s`)
    })
  )

/** A server process started by `startServer`: ready, with its pid (for /proc) and a way to stop it. */
export interface ServerProcess extends Ready {
  readonly pid: number
  readonly stop: () => Promise<void>
}

/** Where the Node build of bench/loadServer.ts goes: under node_modules, so its externals resolve. */
const nodeBundleDir = join(import.meta.dir, "..", "node_modules", ".cache", "tool-gate-bench")

/** What the Node build leaves to Node, as the CLI's bundle does: the native driver, Bun's. */
const nodeExternals = ["better-sqlite3", "@effect/sql-sqlite-bun", "bun:*"]

/**
 * bench/loadServer.ts built for Node from this checkout's sources, as packages/cli/scripts/bundle.mjs
 * builds `toolgate`, with the web console's files beside it (once per process).
 */
const nodeBundle = (() => {
  let built: Promise<string> | undefined
  return () =>
    built ??= Bun.build({
      entrypoints: [join(import.meta.dir, "loadServer.ts")],
      target: "node",
      conditions: ["@tool-gate/source"],
      external: nodeExternals,
      outdir: nodeBundleDir,
      naming: "loadServer.mjs"
    }).then((result) => {
      if (!result.success) throw new AggregateError(result.logs, "bundling bench/loadServer.ts for Node failed")
      // the server reads them next to its module
      cpSync(join(import.meta.dir, "..", "packages", "server", "src", "console"), join(nodeBundleDir, "console"), {
        recursive: true,
        filter: (source) => !source.endsWith(".d.ts")
      })
      return join(nodeBundleDir, "loadServer.mjs")
    })
})()

/**
 * Starts a server process with `pending` pending requests and waits (at most LOAD_DEADLINE_S) for
 * it to be ready: on Bun, or on Node with LOAD_SERVER_RUNTIME=node.
 */
export const startServer = async (
  kind: "sqlite" | "pg",
  target: string,
  pending = requests,
  runtime = serverRuntime
): Promise<ServerProcess> => {
  // e.g. LOAD_SERVER_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the server
  const flags = (process.env.LOAD_SERVER_FLAGS ?? "").split(" ").filter((flag) => flag !== "")
  const command = runtime === "node"
    ? ["node", ...flags, await nodeBundle()]
    : [process.execPath, "--conditions=@tool-gate/source", ...flags, join(import.meta.dir, "loadServer.ts")]
  const child = Bun.spawn([...command, kind, target, String(pending)], {
    stdout: "pipe",
    stderr: "inherit",
    env: process.env
  })
  const stop = async () => {
    child.kill()
    await child.exited
  }
  const notReady = setTimeout(() => child.kill(), DEADLINE_S * 1000)
  try {
    const reader = child.stdout.getReader()
    const decoder = new TextDecoder()
    let out = ""
    while (!out.includes("\n")) {
      const chunk = await reader.read()
      if (chunk.done) {
        throw new Error(`the ${kind} server process ended (or took over ${DEADLINE_S} s) before it was ready`)
      }
      out += decoder.decode(chunk.value, { stream: true })
    }
    reader.releaseLock()
    const ready = JSON.parse(out.slice(0, out.indexOf("\n"))) as Ready
    return { ...ready, pid: child.pid, stop }
  } catch (error) {
    await stop()
    throw error
  } finally {
    clearTimeout(notReady)
  }
}

/** Starts the server process, runs the load against it and checks through `storeLayer`. */
const runAgainst = async <E>(
  kind: "sqlite" | "pg",
  target: string,
  storeLayer: Layer.Layer<ApprovalStore.ApprovalStore, E>
) => {
  const server = await startServer(kind, target)
  try {
    return await Effect.runPromise(
      runLoad({ ...server, token, sessions, sseClients: SSE_CLIENTS }).pipe(Effect.provide(storeLayer))
    )
  } finally {
    await server.stop()
  }
}

if (import.meta.main) {
  await runMain("Load", {
    sqlite: (filename) => runAgainst("sqlite", filename, ToolGateSqlite.layerStore({ filename })),
    postgres: (pg) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(
            pgSchema(pg),
            (url) => Effect.promise(() => runAgainst("pg", url, ToolGatePg.layerStore({ url: Redacted.make(url) })))
          )
        )
      )
  })
}
