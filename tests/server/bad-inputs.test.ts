/**
 * The table of bad inputs and the response each gets, tried against a real server: malformed
 * JSON, wrong types, unknown keys, huge bodies, unknown ids, expired and already-answered
 * requests, no token, a bad token, the auditor role answering, and a token for another session.
 * Every row changes nothing, so they share one server; each says what a client sees.
 */
import { ApprovalRequest, ToolCall } from "@tool-gate/core"
import { expect } from "bun:test"
import { Context, Effect, Layer } from "effect"
import { describe, layer } from "../support/effectTest.js"
import { big, type Ids, problemPaths, respond, setUpIds, table } from "./support/badInputs.js"
import { authorization, chunkedStream, startServer, type TestServer } from "./support/server.js"

class Fixture
  extends Context.Tag("tests/server/Fixture")<Fixture, { readonly server: TestServer; readonly ids: Ids }>()
{}

const FixtureLive = Layer.scoped(
  Fixture,
  Effect.gen(function*() {
    const server = yield* startServer()
    return { server, ids: yield* setUpIds(server) }
  })
)

layer(FixtureLive)("bad inputs", (it) => {
  for (const [group, rows] of table) {
    describe(group, () => {
      for (const row of rows) {
        it.live(`${row.input}: ${row.method} ${row.path({ pending: ":id", teamB: ":id", expired: ":id", approved: ":id", grant: ":id" })} -> ${row.expected.status}`, () =>
          Effect.gen(function*() {
            const { ids, server } = yield* Fixture
            const reply = yield* server.request(row.method, row.path(ids), row.options)
            expect(reply.status).toBe(row.expected.status)
            if (row.expected.tag !== undefined) expect(reply.json?._tag).toBe(row.expected.tag)
            if (reply.status !== 404 || row.expected.tag !== undefined) expect(reply.json.message).toBeString()
            if (row.expected.message !== undefined) expect(reply.json.message).toContain(row.expected.message)
            if (row.expected.allow !== undefined) {
              expect(reply.headers.get("allow")).toBe(row.expected.allow)
              expect(reply.json.allow).toEqual(row.expected.allow.split(", "))
              // what the header allows is served there: HEAD too wherever GET is
              for (const method of row.expected.allow.split(", ").filter((m) => m !== "POST" && m !== "DELETE")) {
                expect(
                  (yield* server.request(method, row.path(ids), {
                    token: row.options?.token === undefined ? "approver" : row.options.token
                  })).status
                ).not
                  .toBeOneOf([404, 405])
              }
            }
            if (row.expected.paths !== undefined) {
              expect(problemPaths(reply.json)).toEqual(expect.arrayContaining([...row.expected.paths]))
            }
          }))
      }
    })
  }

  it.live("a chunked body (no Content-Length) past the limit: reading stops and the connection is closed", () =>
    Effect.gen(function*() {
      const { ids, server } = yield* Fixture
      // The platform's reader destroys the request stream when the limit is passed, which closes
      // the socket before a 413 could be written: the client sees the connection drop.
      const result = yield* Effect.either(Effect.tryPromise(() =>
        fetch(`${server.url}${respond(ids)}`, {
          method: "POST",
          headers: { ...authorization("approver"), "content-type": "application/json" },
          body: chunkedStream(JSON.stringify({ decision: "deny", reason: big }))
        })
      ))
      expect(result._tag === "Left" ? "closed" : result.right.status).toBe("closed")
      const small = yield* server.request("POST", `/approvals/${ids.approved}/respond`, {
        chunked: JSON.stringify({ decision: "approve_once" })
      })
      expect(small.status).toBe(200)
      expect((yield* server.request("GET", "/health", { token: null })).status).toBe(200)
    }))

  it.live("nothing above changed anything", () =>
    Effect.gen(function*() {
      const { ids, server } = yield* Fixture
      expect((yield* server.gate.getRequest(ApprovalRequest.RequestId.make(ids.pending))).status).toBe("pending")
      expect((yield* server.gate.getRequest(ApprovalRequest.RequestId.make(ids.teamB))).status).toBe("pending")
      expect((yield* server.gate.sessionApprovals(ToolCall.SessionKey.make("s1"))).map((a) => String(a.id))).toEqual([
        ids.grant
      ])
      const events = yield* server.store.events()
      expect(events.filter((e) => e.type === "approval.resolved" || e.type === "approval.extended")).toHaveLength(1)
    }))
})
