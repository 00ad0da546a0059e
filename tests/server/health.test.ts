/**
 * `GET /health` needs no token, so when the store fails it answers 503 with nothing of the
 * store's error, while the endpoints behind a token keep the detailed `PersistenceError`. The
 * stores really fail: on SQLite another connection takes the event table away; on PostgreSQL the
 * connection running the read is terminated.
 */
import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { ToolGatePg } from "@tool-gate/pg"
import { Server } from "@tool-gate/server"
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Context, Effect, Fiber, Layer, Option, Redacted, Schedule } from "effect"
import { describe, it } from "../support/effectTest.js"
import { describePostgres } from "../support/postgresSuite.js"
import { pgClient, pgSchema } from "../support/sqlStores.js"
import { authorization, policy, startServer, tokenList } from "./support/server.js"

const unavailable = { _tag: "Unavailable", message: "The approval store is not answering" }

describe("health with a failing store (SQLite)", () => {
  it.live("503 without the store's error; endpoints behind a token keep it; 200 once the store answers", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      // Another connection takes the event log away, so the store's reads really fail.
      const other = new Database(server.filename)
      other.run("ALTER TABLE toolgate_events RENAME TO toolgate_events_away")
      const health = yield* server.request("GET", "/health", { token: null })
      expect(health.status).toBe(503)
      expect(health.json).toEqual(unavailable)
      const head = yield* server.request("GET", "/audit/head", { token: "auditor" })
      expect(head.status).toBe(503)
      expect(head.json).toMatchObject({ _tag: "PersistenceError", operation: "lastSeq" })
      expect(head.json.message).toStartWith("Approval store failed during lastSeq: ")

      other.run("ALTER TABLE toolgate_events_away RENAME TO toolgate_events")
      other.close()
      expect((yield* server.request("GET", "/health", { token: null })).json).toEqual({ status: "ok" })
    }))
})

const pgSuite = (url: string) =>
  describe("health with a failing store (PostgreSQL)", () => {
    it.live("the read's connection terminated: 503 without the error; endpoints behind a token keep it", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const context = yield* Layer.build(
          Server.layer({ port: 0, tokens: tokenList }).pipe(
            Layer.provideMerge(
              ToolGatePg.layer({ url: Redacted.make(schemaUrl), policy, channel: "toolgate_health_test" })
            )
          )
        )
        const address = Context.get(context, HttpServer.HttpServer).address
        if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
        const get = (path: string, token: "auditor" | null) =>
          Effect.promise(async () => {
            const response = await fetch(`http://127.0.0.1:${address.port}${path}`, { headers: authorization(token) })
            return { status: response.status, json: await response.json() as any }
          })
        const admin = yield* Effect.map(Layer.build(pgClient(schemaUrl)), Context.get(SqlClient.SqlClient))

        // Another session holds the event log, so the store's read waits there until terminated.
        const lockEvents = Effect.acquireRelease(
          Effect.flatMap(admin.reserve, (holder) =>
            Effect.as(
              Effect.zipRight(
                holder.executeRaw("BEGIN", []),
                holder.executeRaw("LOCK TABLE toolgate_events IN ACCESS EXCLUSIVE MODE", [])
              ),
              holder
            )),
          (holder) => Effect.ignore(holder.executeRaw("ROLLBACK", []))
        )
        /** The request, with every read waiting on the lock terminated until it is answered. */
        const terminated = <A>(request: Effect.Effect<A>) =>
          Effect.gen(function*() {
            const reply = yield* Effect.fork(request)
            while (Option.isNone(yield* Fiber.poll(reply))) {
              yield* Effect.sleep("20 millis")
              yield* admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT MAX(seq)%'`
            }
            return yield* Fiber.join(reply)
          })

        yield* Effect.scoped(Effect.gen(function*() {
          yield* lockEvents
          const health = yield* terminated(get("/health", null))
          expect(health).toEqual({ status: 503, json: unavailable })
          const head = yield* terminated(get("/audit/head", "auditor"))
          expect(head.status).toBe(503)
          expect(head.json).toMatchObject({ _tag: "PersistenceError", operation: "lastSeq" })
          expect(head.json.message).toStartWith("Approval store failed during lastSeq: ")
        }))

        // The pool may hand out a terminated connection once more (that read fails too) before
        // dropping it.
        const recovered = yield* get("/health", null).pipe(
          Effect.filterOrFail((reply) => reply.status === 200),
          Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.intersect(Schedule.recurs(50))))
        )
        expect(recovered.json).toEqual({ status: "ok" })
      }))
  })

describePostgres("health tests", pgSuite)
