/**
 * The lean routes (answers, pending lists and, on Node's server, the whole log's event stream,
 * served before the router) answer exactly as the HttpApi router does: every row of the bad-input
 * table, requests the lean routes leave to the router (encoded ids, other query parameters, other
 * content types), pending lists for each kind of token, answers (a first one, the same again, a
 * conflicting one) and event streams (from the start, after a seq, resumed with Last-Event-ID, for
 * a token limited to some sessions) get the same status, headers and bytes from a server with the
 * lean routes and from one with the router alone, over one gate.
 */
import { expect } from "bun:test"
import { Context, Effect, Layer } from "effect"
import { describe, layer } from "../support/effectTest.js"
import { type Ids, type Row, setUpIds, table } from "./support/badInputs.js"
import {
  authorization,
  bash,
  paused,
  type Reply,
  type RequestOptions,
  startRouterOnlyServer,
  startServer,
  type TestServer
} from "./support/server.js"

class Fixture extends Context.Tag("tests/server/LeanRoutesFixture")<Fixture, {
  readonly server: TestServer
  readonly routerOnly: TestServer["request"] & { readonly url: string }
  readonly ids: Ids
}>() {}

const FixtureLive = Layer.scoped(
  Fixture,
  Effect.gen(function*() {
    const server = yield* startServer()
    return { server, routerOnly: yield* startRouterOnlyServer(server), ids: yield* setUpIds(server) }
  })
)

/** What a client can tell apart: the status, the body and its content type. */
const seen = (reply: Reply) => ({
  status: reply.status,
  contentType: reply.headers.get("content-type"),
  body: reply.text
})

const same = (method: string, path: string, options?: RequestOptions) =>
  Effect.gen(function*() {
    const { routerOnly, server } = yield* Fixture
    const lean = yield* server.request(method, path, options)
    const router = yield* routerOnly(method, path, options)
    expect(seen(lean)).toEqual(seen(router))
    return lean
  })

const answer = { body: { decision: "approve_once" } }

/** Requests near the lean routes' patterns, most of which they leave to the router. */
const edges: ReadonlyArray<Omit<Row, "expected">> = [
  { input: "a percent-encoded id", method: "POST", path: () => "/approvals/%72eq_unknown/respond", options: answer },
  { input: "a trailing slash", method: "POST", path: () => "/approvals/req_unknown/respond/", options: answer },
  { input: "capitals", method: "POST", path: () => "/Approvals/req_unknown/RESPOND", options: answer },
  { input: "a query string", method: "POST", path: () => "/approvals/req_unknown/respond?x=1", options: answer },
  {
    input: "a text body",
    method: "POST",
    path: () => "/approvals/req_unknown/respond",
    options: { raw: "{\"decision\":\"deny\"}", headers: { "content-type": "text/plain" } }
  },
  {
    input: "JSON with a charset",
    method: "POST",
    path: () => "/approvals/req_unknown/respond",
    options: { raw: "{\"decision\":\"deny\"}", headers: { "content-type": "Application/JSON; charset=utf-8" } }
  },
  {
    input: "no content type",
    method: "POST",
    path: () => "/approvals/req_unknown/respond",
    options: { raw: "{\"decision\":\"deny\"}", headers: { "content-type": "" } }
  },
  // the router takes path parameters of at most 100 characters
  {
    input: "an id of 100 characters",
    method: "POST",
    path: () => `/approvals/${"r".repeat(100)}/respond`,
    options: answer
  },
  {
    input: "an id of 101 characters",
    method: "POST",
    path: () => `/approvals/${"r".repeat(101)}/respond`,
    options: answer
  },
  {
    input: "a Basic header",
    method: "POST",
    path: respondPending,
    options: { ...answer, token: null, headers: { authorization: "Basic YTpi" } }
  },
  {
    input: "a lowercase scheme",
    method: "GET",
    path: () => "/approvals/pending",
    options: { token: null, headers: { authorization: "bearer approver-token-0123456789" } }
  },
  { input: "the GET of respond", method: "GET", path: respondPending },
  { input: "a PUT of respond", method: "PUT", path: respondPending, options: answer },
  { input: "a session twice", method: "GET", path: () => "/approvals/pending?sessionKey=s1&sessionKey=s2" },
  { input: "an empty session", method: "GET", path: () => "/approvals/pending?sessionKey=" },
  { input: "an encoded session", method: "GET", path: () => "/approvals/pending?sessionKey=%73%31" },
  { input: "a blank session", method: "GET", path: () => "/approvals/pending?sessionKey=%20" },
  { input: "an over-long session", method: "GET", path: () => `/approvals/pending?sessionKey=${"s".repeat(5000)}` },
  { input: "another parameter", method: "GET", path: () => "/approvals/pending?sessionKey=s1&x=1" },
  { input: "a pending list with a trailing slash", method: "GET", path: () => "/approvals/pending/" },
  { input: "a HEAD of the list", method: "HEAD", path: () => "/approvals/pending" }
]

function respondPending(ids: Ids) {
  return `/approvals/${ids.pending}/respond`
}

layer(FixtureLive)("lean routes", (it) => {
  for (const [group, rows] of table) {
    describe(group, () => {
      for (const row of rows) {
        it.live(`${row.input}: ${row.method}, the same as the router`, () =>
          Effect.gen(function*() {
            const { ids } = yield* Fixture
            const reply = yield* same(row.method, row.path(ids), row.options)
            expect(reply.status).toBe(row.expected.status)
          }))
      }
    })
  }

  describe("near the lean routes' patterns", () => {
    for (const row of edges) {
      it.live(`${row.input}: the same as the router`, () =>
        Effect.gen(function*() {
          const { ids } = yield* Fixture
          yield* same(row.method, row.path(ids), row.options)
        }))
    }
  })

  it.live("pending lists, for every kind of token: the same as the router", () =>
    Effect.gen(function*() {
      for (const token of ["approver", "auditor", "teamA"] as const) {
        for (const query of ["", "?sessionKey=s1", "?sessionKey=team-a-1", "?sessionKey=nobody"]) {
          yield* same("GET", `/approvals/pending${query}`, { token })
        }
      }
      const all = yield* same("GET", "/approvals/pending")
      expect(all.json.length).toBeGreaterThanOrEqual(2)
    }))

  it.live("event streams, from anywhere and for every kind of token: the same head and bytes as the router", () =>
    Effect.gen(function*() {
      const { routerOnly, server } = yield* Fixture
      yield* paused(server.gate, bash("team-a-2", "lean-stream-1"))
      yield* paused(server.gate, bash("s8", "lean-stream-2"))
      const head: number = (yield* server.request("GET", "/audit/head")).json.lastSeq
      expect(head).toBeGreaterThan(4)
      /** What a client gets until it has `events` events: the head, then the bytes. */
      const read = (url: string, events: number, query: string, headers: Record<string, string>) =>
        Effect.promise(async () => {
          const controller = new AbortController()
          const response = await fetch(`${url}/audit/stream${query}`, { headers, signal: controller.signal })
          const reader = response.body!.getReader()
          const decoder = new TextDecoder()
          let text = ""
          // the retry hint, then each event's block
          while (text.split("\n\n").length - 2 < events) {
            const chunk = await reader.read()
            if (chunk.done) break
            text += decoder.decode(chunk.value, { stream: true })
          }
          controller.abort()
          // the headers the endpoint sets (the headers every response gets are Server.layerApp's, which
          // the router-only server leaves out: tests/server/headers.test.ts checks them on the stream)
          const header = (name: string) => response.headers.get(name)
          return {
            status: response.status,
            headers: ["content-type", "cache-control", "x-accel-buffering"].map(header),
            text
          }
        })
      const cases = [
        { token: "approver", query: "", lastEventId: undefined },
        { token: "approver", query: "?afterSeq=2", lastEventId: undefined },
        { token: "approver", query: "", lastEventId: String(head - 2) },
        { token: "auditor", query: "?afterSeq=1", lastEventId: "3" },
        { token: "teamA", query: "", lastEventId: undefined },
        { token: "teamA", query: `?afterSeq=${head}`, lastEventId: undefined }
      ] as const
      for (const { lastEventId, query, token } of cases) {
        const headers: Record<string, string> = { accept: "text/event-stream", ...authorization(token) }
        if (lastEventId !== undefined) headers["last-event-id"] = lastEventId
        const after = lastEventId ?? (query === "" ? "0" : query.slice("?afterSeq=".length))
        // the events this token sees after that point, up to the head (the log is still meanwhile)
        const visible = (yield* server.request("GET", `/audit?afterSeq=${after}&limit=1000`, { token })).json.length
        const lean = yield* read(server.url, visible, query, headers)
        const router = yield* read(routerOnly.url, visible, query, headers)
        expect({ token, query, lastEventId, ...lean }).toEqual({ token, query, lastEventId, ...router })
        expect(lean.status).toBe(200)
        expect(lean.text.startsWith("retry: 1000\n\n")).toBe(true)
        expect(lean.text.split("\ndata: ").length - 1).toBe(visible)
      }
    }))

  it.live("an answer, the same again, a different one: the same as the router", () =>
    Effect.gen(function*() {
      const { routerOnly, server } = yield* Fixture
      const first = yield* paused(server.gate, bash("s9", "lean-1"))
      const second = yield* paused(server.gate, bash("team-a-1", "lean-2"))
      // answered through each server in turn: the repeat gets the first resolution, the change a 409
      const byLean = yield* server.request("POST", `/approvals/${first}/respond`, answer)
      expect(byLean.status).toBe(200)
      expect(seen(yield* routerOnly("POST", `/approvals/${first}/respond`, answer))).toEqual(seen(byLean))
      const byRouter = yield* routerOnly("POST", `/approvals/${second}/respond`, { ...answer, token: "teamA" })
      expect(byRouter.status).toBe(200)
      expect(seen(yield* server.request("POST", `/approvals/${second}/respond`, { ...answer, token: "teamA" })))
        .toEqual(seen(byRouter))
      const deny = { body: { decision: "deny" } }
      const conflict = yield* same("POST", `/approvals/${first}/respond`, deny)
      expect(conflict.status).toBe(409)
    }))
})
