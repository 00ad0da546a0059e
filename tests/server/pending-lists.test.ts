/**
 * Pending lists the server keeps between reads are never stale: after each change (a new request,
 * an answer, an extension, an expiry, an answer granting a session approval), made by another gate
 * over the same SQLite file (as another process would: the server learns of it only through the
 * log), by the server's own gate or through the API, the next `GET /approvals/pending` is exactly
 * the JSON of what the store holds then, for one session and for all, for every kind of token,
 * read once or again and again.
 */
import { ApprovalRequest, type ToolCall, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Context, Effect, Layer, Schema } from "effect"
import { describe, it } from "../support/effectTest.js"
import { bash, paused, policy, startServer, type TestServer, tokenList } from "./support/server.js"

const encodeList = Schema.encodeSync(Schema.Array(ApprovalRequest.ApprovalRequest))

/** The list each token gets, read twice (the second read may be the kept one), against the store's. */
const expectFresh = (server: TestServer, sessionKey?: string) =>
  Effect.gen(function*() {
    const requests = yield* server.gate.pending({ sessionKey: sessionKey as ToolCall.SessionKey | undefined })
    const query = sessionKey === undefined ? "" : `?sessionKey=${sessionKey}`
    for (const entry of tokenList) {
      // the test's tokens are limited to prefixes (`team-a-*`)
      const canSee = (key: string) =>
        entry.sessions === undefined || entry.sessions.some((glob) => key.startsWith(glob.slice(0, -1)))
      const visible = requests.filter((request) => canSee(request.toolCall.sessionKey))
      for (let read = 0; read < 2; read++) {
        const reply = yield* server.request("GET", `/approvals/pending${query}`, { token: entry.token })
        if (sessionKey !== undefined && !canSee(sessionKey)) {
          expect(reply.status).toBe(404)
          continue
        }
        expect(reply.status).toBe(200)
        expect(reply.text).toBe(JSON.stringify(encodeList(visible)))
      }
    }
    return requests.map((request) => request.requestId)
  })

describe("pending lists", () => {
  it.live("each read after a change by another gate over the same file, or by the server's, is the store's list", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const other = Context.get(
        yield* Layer.build(ToolGateSqlite.layer({ filename: server.filename, policy })),
        ToolGate.ToolGate
      )
      const lists = () => Effect.all([expectFresh(server, "s1"), expectFresh(server, "team-a-1"), expectFresh(server)])

      expect(yield* lists()).toEqual([[], [], []])
      const first = yield* paused(other, bash("s1", "p1"))
      const teamA = yield* paused(other, bash("team-a-1", "p2"))
      expect(yield* lists()).toEqual([[first], [teamA], [first, teamA]])

      yield* other.respond(first, { decision: "deny", respondedBy: "elsewhere" })
      expect(yield* lists()).toEqual([[], [teamA], [teamA]])

      const second = yield* paused(other, bash("s1", "p3"))
      expect(yield* lists()).toEqual([[second], [teamA], [teamA, second]])

      // a new deadline shows at once
      yield* other.extend(second, "2 hours")
      yield* lists()

      yield* server.gate.respond(teamA, { decision: "approve_once", respondedBy: "ana" })
      expect(yield* lists()).toEqual([[second], [], [second]])

      yield* other.respond(second, { decision: "approve_once", respondedBy: "elsewhere" })
      expect(yield* lists()).toEqual([[], [], []])

      // an expiry, an answer that grants a session approval, an answer through the API
      const quick = yield* paused(other, { id: "q1", name: "brief", sessionKey: "s1" })
      const granted = yield* paused(other, bash("team-a-1", "p4"))
      const viaApi = yield* paused(server.gate, bash("s1", "p5"))
      expect(yield* lists()).toEqual([[quick, viaApi], [granted], [quick, granted, viaApi]])
      yield* other.awaitDecision(quick).pipe(Effect.ignore)
      expect(yield* lists()).toEqual([[viaApi], [granted], [granted, viaApi]])
      yield* other.respond(granted, { decision: "approve_session", respondedBy: "elsewhere" })
      expect(yield* lists()).toEqual([[viaApi], [], [viaApi]])
      expect((yield* server.request("POST", `/approvals/${viaApi}/respond`, { body: { decision: "deny" } })).status)
        .toBe(200)
      expect(yield* lists()).toEqual([[], [], []])

      // each read right after the other gate's commit, before the server's log reader may see it
      for (let i = 0; i < 10; i++) {
        const request = yield* paused(other, bash("s1", `again-${i}`))
        expect(yield* expectFresh(server, "s1")).toEqual([request])
        yield* other.respond(request, { decision: "deny", respondedBy: "elsewhere" })
        expect(yield* expectFresh(server, "s1")).toEqual([])
      }
    }))
})
