/**
 * The lean routes (answers and pending lists served before the router) answer exactly as the
 * HttpApi router does: every row of the bad-input table, requests the lean routes leave to the
 * router (encoded ids, other query parameters, other content types), pending lists for each kind
 * of token, and answers (a first one, the same again, a conflicting one) get the same status and
 * the same body from a server with the lean routes and from one with the router alone, over one
 * gate.
 */
import { expect } from "bun:test"
import { Context, Effect, Layer } from "effect"
import { describe, layer } from "../support/effectTest.js"
import { type Ids, type Row, setUpIds, table } from "./support/badInputs.js"
import {
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
  readonly routerOnly: TestServer["request"]
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
