/**
 * Audit events as they leave the server, for auditors' tools: `args` (and `editedArgs`) as JSON
 * objects, `time` in RFC 3339 beside `at`, on `GET /audit` and on the event stream; `since` and
 * `until` in RFC 3339 or epoch milliseconds on both, a bad one a 400 naming the parameter. The
 * log itself keeps its stored form.
 */
import { AuditEvent } from "@tool-gate/core"
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Effect, Schema } from "effect"
import { describe, it } from "../support/effectTest.js"
import { problemPaths } from "./support/badInputs.js"
import { awaitPending, paused, startServer, type TestServer } from "./support/server.js"
import { openStream } from "./support/sse.js"

/** A request approved with edited arguments, an allowed call and a denied one. */
const trail = (server: TestServer) =>
  Effect.gen(function*() {
    const call = { id: "c1", name: "bash", sessionKey: "s1", args: { command: "deploy", env: "staging" } }
    yield* paused(server.gate, call)
    const [request] = yield* awaitPending(server)
    const answer = yield* server.request("POST", `/approvals/${request!.requestId}/respond`, {
      body: { decision: "approve_once", editedArgs: { command: "deploy", env: "qa" } }
    })
    expect(answer.status).toBe(200)
    yield* server.gate.evaluate({ id: "c2", name: "ls", sessionKey: "s1", args: { path: "/tmp", depth: 2 } })
    yield* server.gate.evaluate({ id: "c3", name: "rm", sessionKey: "s2", args: { path: "/" } })
  })

const audit = (server: TestServer, query: string) =>
  Effect.map(server.request("GET", `/audit${query}`, { token: "auditor" }), (reply) => {
    expect({ query, status: reply.status }).toEqual({ query, status: 200 })
    return reply.json as Array<any>
  })

describe("audit events as JSON", () => {
  it.live("GET /audit: args and editedArgs are objects, time is at in RFC 3339; the JSON decodes to the log's events", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* trail(server)
      const events = yield* audit(server, "")
      expect(events.map((e) => e.type)).toEqual(["approval.requested", "approval.resolved", "decision", "decision"])
      expect(events[0].args.env).toBe("staging")
      expect(events[1]).toMatchObject({
        outcome: "approved",
        args: { command: "deploy", env: "staging" },
        editedArgs: { command: "deploy", env: "qa" }
      })
      expect(events[2].args).toEqual({ depth: 2, path: "/tmp" })
      for (const event of events) {
        expect(event.time).toBe(new Date(event.at).toISOString())
        expect(Object.keys(event).slice(0, 3)).toEqual(["seq", "at", "time"])
      }
      expect(events.map((e: unknown) => Schema.decodeUnknownSync(AuditEvent.Json)(e))).toEqual([
        ...yield* server.store.events()
      ])

      // the log keeps its own form: the arguments' canonical text
      const db = new Database(server.filename, { readonly: true })
      const stored = db.query("SELECT event FROM toolgate_events ORDER BY seq").all() as Array<{ event: string }>
      db.close()
      expect(JSON.parse(stored[0]!.event).args).toBe(`{"command":"deploy","env":"staging"}`)
      expect(JSON.parse(stored[0]!.event).time).toBeUndefined()
    }))

  it.live("a row whose args were edited into text that is no JSON object is shown as that text, not a 500", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* trail(server)
      const db = new Database(server.filename)
      for (const [seq, args] of [[3, "not json"], [4, "[1]"]] as const) {
        const { event } = db.query("SELECT event FROM toolgate_events WHERE seq = ?").get(seq) as { event: string }
        db.query("UPDATE toolgate_events SET event = ? WHERE seq = ?").run(
          JSON.stringify({ ...JSON.parse(event), args }),
          seq
        )
      }
      db.close()
      const events = yield* audit(server, "")
      expect(events.map((e) => e.args)).toEqual([
        { command: "deploy", env: "staging" },
        { command: "deploy", env: "staging" },
        "not json",
        "[1]"
      ])
    }))

  it.live("the event stream carries the same JSON as GET /audit", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* trail(server)
      const stream = yield* openStream(server, { token: "auditor" })
      const streamed = yield* stream.take(4)
      expect(streamed.map((e) => e.json)).toEqual(yield* audit(server, ""))
      expect((streamed[1]!.json as any).editedArgs).toEqual({ command: "deploy", env: "qa" })
    }))

  it.live("since and until: RFC 3339 in any offset or epoch milliseconds, on the query and the stream", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* trail(server)
      const all = yield* audit(server, "")
      const [from, to] = [all[1], all[2]]
      const expected = all.filter((e) => e.at >= from.at && e.at <= to.at).map((e) => e.seq)
      const plusTwo = (at: number) => new Date(at + 2 * 3_600_000).toISOString().replace("Z", "+02:00")
      const ranges = [
        `since=${from.at}&until=${to.at}`,
        `since=${from.time}&until=${to.time}`,
        `since=${encodeURIComponent(plusTwo(from.at))}&until=${encodeURIComponent(plusTwo(to.at))}`,
        // RFC 3339 allows a space for the T and lower-case t and z
        `since=${encodeURIComponent(from.time.replace("T", " "))}&until=${to.time.replace("T", "t").replace("Z", "z")}`
      ]
      for (const range of ranges) {
        expect({ range, seqs: (yield* audit(server, `?${range}`)).map((e) => e.seq) }).toEqual({
          range,
          seqs: expected
        })
        const stream = yield* openStream(server, { token: "auditor", query: `?${range}` })
        expect((yield* stream.take(expected.length)).map((e) => e.data.seq)).toEqual(expected)
        stream.close()
      }
      // past the end of the log: nothing
      expect(yield* audit(server, `?since=${new Date(all.at(-1).at + 1).toISOString()}`)).toEqual([])
    }))

  it.live("a since or until that is not a time is a 400 naming the parameter, on the query and the stream", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* trail(server)
      const bad = [
        ["since", "2026-02-30T00:00:00Z"],
        ["until", "2026-11-24T24:00:00Z"],
        ["since", "2026-11-24T10:00:60Z"],
        ["until", "2026-11-24"],
        ["since", "yesterday"],
        ["until", "1e3"],
        ["since", "Infinity"]
      ] as const
      for (const [name, value] of bad) {
        for (const route of ["/audit", "/audit/stream"]) {
          const reply = yield* server.request("GET", `${route}?${name}=${encodeURIComponent(value)}`, {
            token: "auditor"
          })
          expect({ route, value, status: reply.status }).toEqual({ route, value, status: 400 })
          expect(problemPaths(reply.json)).toContain(name)
          expect(reply.json.message).toContain("RFC 3339")
        }
      }
    }))
})
