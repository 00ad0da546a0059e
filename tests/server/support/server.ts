/**
 * A real approval server for the server tests: Node's HTTP server (via @effect/platform-node) on
 * a free loopback port, over a SQLite file in a temp dir, with three tokens. Requests go through
 * `fetch`, as any client's would.
 */
import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { type ApprovalRequest, ApprovalStore, PauseSignal, Policy, type ToolCall, ToolGate } from "@tool-gate/core"
import { Auth, Http, Server } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Context, Effect, Layer, Schedule } from "effect"
import { join } from "node:path"
import { tempDir } from "../../support/sqlStores.js"

export const tokens = {
  approver: "approver-token-0123456789",
  auditor: "auditor-token-0123456789",
  teamA: "team-a-approver-token-0123"
} as const

export const tokenList: ReadonlyArray<Auth.TokenConfig> = [
  { token: tokens.approver, name: "ana", role: "approver" },
  { token: tokens.auditor, name: "audit-bot", role: "auditor" },
  { token: tokens.teamA, name: "alice", role: "approver", sessions: ["team-a-*"] }
]

/**
 * `bash` waits for a human (5 minutes), `quick` for 50 ms, `brief` for 2 s (an expiry a test reads
 * lists before, on a busy machine too), `rm` and `bash shutdown*` are denied, the rest allowed.
 */
export const policy = Policy.unsafeMake({
  deny: [{ tool: "rm", reason: "never" }, {
    id: "no-shutdown",
    tool: "bash",
    args: { command: "shutdown*" },
    reason: "not from here"
  }],
  requireApproval: ["bash", { tool: "quick", ttlMs: 50 }, { tool: "brief", ttlMs: 2000 }]
})

export const bash = (sessionKey: string, id: string, command = `echo ${id}`) => ({
  id,
  name: "bash",
  sessionKey,
  args: { command }
})

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** the parsed body; `any`, so tests read fields without casts */
  readonly json: any
}

export interface RequestOptions {
  /** a token name from `tokens`, a literal token, or `null` for no Authorization header */
  readonly token?: keyof typeof tokens | (string & {}) | null
  /** JSON-encoded unless `raw` is given */
  readonly body?: unknown
  readonly raw?: string
  /** sent as a stream, so with no Content-Length (chunked) */
  readonly chunked?: string
  readonly headers?: Record<string, string>
}

export interface TestServer {
  readonly url: string
  readonly filename: string
  readonly gate: ToolGate.Service
  readonly store: ApprovalStore.Service
  readonly request: (method: string, path: string, options?: RequestOptions) => Effect.Effect<Reply>
}

/** A body stream of unknown length, so `fetch` sends it chunked, without Content-Length. */
export const chunkedStream = (text: string): ReadableStream<Uint8Array> => {
  const bytes = new TextEncoder().encode(text)
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(at, at + 8192))
      at += 8192
    }
  })
}

export const authorization = (token: RequestOptions["token"]): Record<string, string> => {
  if (token === null) return {}
  const value = token === undefined ? tokens.approver : (tokens as Record<string, string>)[token] ?? token
  return { authorization: `Bearer ${value}` }
}

/** Requests to a server at `url`, as `TestServer.request`. */
const requester = (url: string) => (method: string, path: string, request: RequestOptions = {}) =>
  Effect.promise(async (): Promise<Reply> => {
    const headers: Record<string, string> = { ...authorization(request.token), ...request.headers }
    let body: string | ReadableStream<Uint8Array> | undefined
    if (request.raw !== undefined || request.body !== undefined) {
      body = request.raw ?? JSON.stringify(request.body)
    } else if (request.chunked !== undefined) {
      body = chunkedStream(request.chunked)
    }
    if (body !== undefined) headers["content-type"] ??= "application/json"
    const response = await fetch(`${url}${path}`, { method, headers, body })
    const text = await response.text()
    let json: unknown
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, text, json }
  })

/**
 * A second server over `server`'s gate and store that serves every request through the HttpApi
 * router (the body limit without the lean routes), to compare answers with; its `request`, and its
 * `url` (for the event stream).
 */
export const startRouterOnlyServer = (server: TestServer, options: { readonly maxBodyBytes?: number } = {}) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      HttpApiBuilder.serve().pipe(
        Layer.provide(Http.layerBodyLimit(options.maxBodyBytes ?? 64 * 1024)),
        Layer.provide(Http.layer),
        Layer.provide(Auth.layer(tokenList)),
        Layer.provide(Layer.succeed(ToolGate.ToolGate, server.gate)),
        Layer.provide(Layer.succeed(ApprovalStore.ApprovalStore, server.store)),
        Layer.provideMerge(Server.layerNodeServer({ port: 0 }))
      )
    )
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
    const url = `http://127.0.0.1:${address.port}`
    return Object.assign(requester(url), { url })
  })

/** Starts a server for the current scope; `filename` to share a database file with other processes. */
export const startServer = (options: { readonly filename?: string; readonly maxBodyBytes?: number } = {}) =>
  Effect.gen(function*() {
    const filename = options.filename ?? join(yield* tempDir, "toolgate.db")
    const context = yield* Layer.build(
      Server.layer({ port: 0, tokens: tokenList, maxBodyBytes: options.maxBodyBytes }).pipe(
        Layer.provideMerge(ToolGateSqlite.layer({ filename, policy, sweepInterval: "100 millis" }))
      )
    )
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
    const url = `http://127.0.0.1:${address.port}`
    const request = requester(url)
    return {
      url,
      filename,
      gate: Context.get(context, ToolGate.ToolGate),
      store: Context.get(context, ApprovalStore.ApprovalStore),
      request
    } satisfies TestServer
  })

/** Asks for `call` and returns the id of the request it paused on. */
export const paused = (gate: ToolGate.Service, call: ToolCall.ToolCallInput) =>
  Effect.flatMap(
    gate.authorize(call),
    (result) =>
      PauseSignal.isPauseSignal(result)
        ? Effect.succeed(result.requestId)
        : Effect.die(`expected a pause for ${call.id}`)
  )

/**
 * Polls `GET /approvals/pending` (as an operator's client would) until `count` requests show.
 * Spaced, because a loop with no pause would hold the SQLite connection and starve the writer.
 */
export const awaitPending = (server: TestServer, count = 1, query = "") =>
  server.request("GET", `/approvals/pending${query}`).pipe(
    Effect.map((reply) => reply.json as Array<ApprovalRequest.ApprovalRequest>),
    Effect.filterOrFail((pending) => pending.length >= count),
    Effect.retry(Schedule.spaced("10 millis")),
    Effect.orDie
  )
