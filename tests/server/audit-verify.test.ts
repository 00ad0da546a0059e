/**
 * `GET /audit/verify` against a real server on loopback over a SQLite file: an untouched log is a
 * valid report with its head; an event edited or deleted in the file (by another connection, as
 * anyone with the file could) is reported with its seq; a recorded anchor is checked; a token that
 * may not see every session is refused.
 */
import { SqlClient } from "@effect/sql"
import { expect } from "bun:test"
import { Context, Effect, Layer } from "effect"
import { describe, it } from "../support/effectTest.js"
import { sqliteClient } from "../support/sqlStores.js"
import { bash, paused, startServer, type TestServer } from "./support/server.js"

/** A server with a few events in its log: decisions, a request and its answer. */
const withEvents = Effect.gen(function*() {
  const server = yield* startServer()
  for (let i = 0; i < 5; i++) yield* server.gate.authorize({ id: `ls-${i}`, name: "ls", sessionKey: "s1", args: {} })
  const requestId = yield* paused(server.gate, bash("team-a-1", "c1"))
  yield* server.gate.respond(requestId, { decision: "deny", respondedBy: "ana", reason: "no" })
  return server
})

/** Another connection to the server's file. */
const fileOf = (server: TestServer) =>
  Effect.map(Layer.build(sqliteClient(server.filename)), Context.get(SqlClient.SqlClient))

describe("GET /audit/verify", () => {
  it.live("an untouched log: a valid report with its head, which verifies as an anchor", () =>
    Effect.gen(function*() {
      const server = yield* withEvents
      const lastSeq = yield* server.store.lastSeq
      const reply = yield* server.request("GET", "/audit/verify", { token: "auditor" })
      expect(reply.status).toBe(200)
      const [last] = yield* server.store.events({ afterSeq: lastSeq - 1 })
      expect(reply.json).toEqual({
        valid: true,
        events: lastSeq,
        chainStart: 1,
        head: { seq: lastSeq, hash: last!.hash }
      })
      const anchored = yield* server.request("GET", `/audit/verify?anchor=${lastSeq}:${last!.hash}`)
      expect(anchored.json).toMatchObject({ valid: true })
      const wrong = yield* server.request("GET", `/audit/verify?anchor=${lastSeq}:${"0".repeat(64)}`)
      expect(wrong.json.problem).toMatchObject({ seq: lastSeq, kind: "anchor" })
    }))

  it.live("an event edited in the file: reported at its seq, as altered", () =>
    Effect.gen(function*() {
      const server = yield* withEvents
      const sql = yield* fileOf(server)
      yield* sql`UPDATE toolgate_events SET event = replace(event, '"allow"', '"deny"') WHERE seq = 3`
      const reply = yield* server.request("GET", "/audit/verify", { token: "auditor" })
      expect(reply.status).toBe(200)
      expect(reply.json).toMatchObject({ valid: false, events: 2, problem: { seq: 3, kind: "altered" } })
      expect(reply.json.head).toBeUndefined()
    }))

  it.live("an event deleted from the file: reported as its seq missing", () =>
    Effect.gen(function*() {
      const server = yield* withEvents
      const sql = yield* fileOf(server)
      yield* sql`DELETE FROM toolgate_events WHERE seq = 4`
      const reply = yield* server.request("GET", "/audit/verify")
      expect(reply.json).toMatchObject({ valid: false, events: 3, problem: { seq: 4, kind: "missing" } })
      expect(reply.json.problem.message).toContain("seq 4 missing")
    }))

  it.live("a token limited to some sessions is refused (403), no token is 401, a malformed anchor is 400", () =>
    Effect.gen(function*() {
      const server = yield* withEvents
      const limited = yield* server.request("GET", "/audit/verify", { token: "teamA" })
      expect(limited.status).toBe(403)
      expect(limited.json._tag).toBe("Forbidden")
      expect((yield* server.request("GET", "/audit/verify", { token: null })).status).toBe(401)
      const malformed = yield* server.request("GET", "/audit/verify?anchor=12")
      expect(malformed.status).toBe(400)
    }))

  it.live("the OpenAPI document describes it with the report's schema", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const spec = yield* server.request("GET", "/openapi.json", { token: null })
      const verify = spec.json.paths["/audit/verify"].get
      expect(verify.responses["200"].content["application/json"].schema).toEqual({
        $ref: "#/components/schemas/AuditChainReport"
      })
      expect(spec.json.components.schemas.AuditChainReport.required).toEqual(["valid", "events"])
    }))
})
