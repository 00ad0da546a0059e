/**
 * Faults: a damaged file, a database locked past the busy timeout, a PostgreSQL connection killed
 * mid-answer. Each is a `PersistenceError` (never a raw `SqlError`), the caller can retry, and the
 * tables hold nothing half-written.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import {
  type ApprovalStore as Store,
  CheckpointStore,
  type SqlApprovalStore,
  SqlCheckpointStore
} from "@tool-gate/core"
import { PersistenceError } from "@tool-gate/core/ToolGateError"
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Context, Effect, Fiber, Layer, Option, Redacted, Schedule } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import { type TcpProxy, tcpProxy } from "../../../support/tcpProxy.js"
import { approval, decision, grant, granted, open, request, requested, resolved, statementsSent } from "./fixtures.js"

/** The error the effect fails with (its success fails the test). */
const failure = Effect.flip

/** Everything the store holds. */
const contents = (store: Store.Service) =>
  Effect.all({
    seq: store.lastSeq,
    events: store.events(),
    pending: store.listPending(),
    approvals: store.sessionApprovals(),
    request: store.getRequest(request(1).requestId)
  })

describe("SqlApprovalStore faults (SQLite)", () => {
  it.live("a file that is not a database is a PersistenceError when the store opens", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      writeFileSync(file, "this is not a database ".repeat(512))
      const error = yield* failure(Effect.scoped(open(storeOver(sqliteClient(file)))))
      expect(error).toBeInstanceOf(PersistenceError)
      expect((error as PersistenceError).operation).toBe("open")
    }))

  it.live("a file that is not a database: the checkpoint store's PersistenceError names the checkpoint store", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      writeFileSync(file, "this is not a database ".repeat(512))
      const error = yield* failure(
        Effect.scoped(Layer.build(SqlCheckpointStore.layer().pipe(Layer.provide(sqliteClient(file)))))
      )
      expect(error).toBeInstanceOf(PersistenceError)
      expect((error as PersistenceError).operation).toBe("migrate checkpoints")
      expect((error as PersistenceError).message).toStartWith("Checkpoint store failed during migrate checkpoints: ")
      const approvals = yield* failure(Effect.scoped(open(storeOver(sqliteClient(file)))))
      expect((approvals as PersistenceError).message).toStartWith("Approval store failed during open: ")
    }))

  it.live("a database locked by another writer past the busy timeout: PersistenceError, nothing written, retry works", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      const { store } = yield* open(storeOver(sqliteClient(file), { busyTimeoutMs: 100 }))
      const r = request(1)
      yield* store.createRequest(r, requested(r))
      const before = yield* contents(store)

      const other = new Database(file)
      other.run("BEGIN IMMEDIATE")
      const started = Date.now()
      const attempts: Array<Effect.Effect<unknown, PersistenceError>> = [
        store.resolve(r.requestId, approval(r, "ana"), resolved(r, "ana"), grant(1)),
        store.createRequest(request(2), requested(request(2))),
        store.append([decision(1)]),
        store.grant(grant(2), granted(2)),
        store.consume(r.requestId, 5)
      ]
      for (const attempt of attempts) {
        expect((yield* failure(attempt))._tag).toBe("PersistenceError")
      }
      expect(Date.now() - started).toBeGreaterThanOrEqual(5 * 100 - 50)
      other.run("ROLLBACK")
      other.close()

      expect(yield* contents(store)).toEqual(before)
      const retried = yield* store.resolve(r.requestId, approval(r, "ana"), resolved(r, "ana"), grant(1))
      expect(retried._tag).toBe("Resolved")
      expect(yield* store.sessionApprovals()).toHaveLength(1)
    }))
})

const pgSuite = (url: string) =>
  describe("SqlApprovalStore faults (postgres)", () => {
    /**
     * A store with one request, and an answer of it (through `answering`, a store on the same
     * schema) waiting for the request's row, which another session holds, until its backend is
     * terminated; then the row is let go. The answer's fiber, and how things stood before it.
     */
    const answerKilledWhileWaiting = (answeringFresh: boolean) =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const { store } = yield* open(pgStoreOver(pgClient(schemaUrl), "toolgate_test_faults"))
        const answering = answeringFresh
          ? (yield* open(pgStoreOver(pgClient(schemaUrl), "toolgate_test_faults"))).store
          : store
        const admin = yield* Effect.map(Layer.build(pgClient(schemaUrl)), Context.get(SqlClient.SqlClient))
        const r = request(1)
        yield* store.createRequest(r, requested(r))
        const before = yield* contents(store)

        const holder = yield* admin.reserve
        yield* holder.executeRaw("BEGIN", [])
        yield* holder.executeRaw("SELECT 1 FROM toolgate_requests WHERE request_id = $1 FOR UPDATE", [r.requestId])
        const answer = yield* Effect.fork(
          answering.resolve(r.requestId, approval(r, "ana"), resolved(r, "ana"), grant(1))
        )
        let killed = 0
        while (killed === 0) {
          yield* Effect.sleep("20 millis")
          const rows = yield* admin<{ killed: boolean }>`
            SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE%toolgate_requests%'`
          killed = rows.length
        }
        return { answer, answering, before, holder, r, store }
      })

    it.live("a connection killed mid-answer in its transaction: PersistenceError, nothing written, retry works", () =>
      Effect.gen(function*() {
        // a store that has committed nothing yet answers in a transaction
        const { answer, answering, before, holder, r, store } = yield* answerKilledWhileWaiting(true)
        const error = yield* failure(Fiber.join(answer))
        yield* holder.executeRaw("ROLLBACK", [])
        expect(error._tag).toBe("PersistenceError")

        expect(yield* contents(store)).toEqual(before)
        const retried = yield* answering.resolve(r.requestId, approval(r, "ana"), resolved(r, "ana"), grant(1))
        expect(retried._tag).toBe("Resolved")
        expect((yield* store.events()).filter((e) => e.type === "approval.resolved")).toHaveLength(1)
      }))

    it.live("a connection killed mid-answer written at once: claimed again on another connection, once", () =>
      Effect.gen(function*() {
        const { answer, holder, store } = yield* answerKilledWhileWaiting(false)
        yield* holder.executeRaw("ROLLBACK", [])
        expect((yield* Fiber.join(answer))._tag).toBe("Resolved")
        expect((yield* store.events()).filter((e) => e.type === "approval.resolved")).toHaveLength(1)
        expect(yield* store.sessionApprovals()).toHaveLength(1)
      }))

    /** A new request (one statement), its record found and read (reads that merge, then a plain one), then answered. */
    const requestFoundAndAnswered = (store: Store.Service) =>
      Effect.gen(function*() {
        const second = request(2)
        expect((yield* store.createRequest(second, requested(second)))._tag).toBe("Created")
        const found = yield* store.findRecorded(second.toolCall.sessionKey, second.toolCall.id)
        expect(Option.isSome(found) && found.value._tag === "Request" && found.value.request.requestId).toBe(
          second.requestId
        )
        expect(Option.isSome(yield* store.getRequest(second.requestId))).toBe(true)
        const answered = yield* store.resolve(second.requestId, approval(second, "ana"), resolved(second, "ana"))
        expect(answered._tag).toBe("Resolved")
        return second
      })

    /** A store on its own schema whose connections `endKept` ends from the server while they are idle. */
    const keptStore = Effect.gen(function*() {
      const schemaUrl = yield* pgSchema(url)
      // its own application name, so the admin can end exactly the store's connections
      const client = PgClient.layer({ url: Redacted.make(schemaUrl), applicationName: "toolgate-kept-test" })
      const { store } = yield* open(pgStoreOver(client, "toolgate_test_kept"))
      const admin = yield* Effect.map(Layer.build(pgClient(schemaUrl)), Context.get(SqlClient.SqlClient))
      const endKept = Effect.gen(function*() {
        // (materialized first: a plain WHERE may call pg_terminate_backend on any row, the admin's own too)
        const ended = yield* admin<{ pid: number }>`
          WITH kept AS MATERIALIZED (
            SELECT pid FROM pg_stat_activity WHERE application_name = 'toolgate-kept-test'
            AND state = 'idle' AND query NOT LIKE 'LISTEN%'
          ) SELECT pid FROM kept WHERE pg_terminate_backend(pid)`
        expect(ended.length).toBeGreaterThanOrEqual(2)
        yield* admin<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE pid IN ${
          admin.in(ended.map((row) => row.pid))
        }`.pipe(Effect.filterOrFail((rows) => rows.length === 0), Effect.retry(Schedule.spaced("10 millis")))
      })
      return { store, endKept }
    })

    it.live("connections the server ends while the store keeps them: the next write and read still succeed", () =>
      Effect.gen(function*() {
        const { endKept, store } = yield* keptStore
        const first = request(1)
        // a write and a read: the store now keeps a connection for each
        yield* store.createRequest(first, requested(first))
        yield* store.getRequest(first.requestId)
        yield* endKept
        yield* requestFoundAndAnswered(store)
      }))

    /** Connections idle in `sql`'s pool (besides any kept ones), then every flow forgotten by `proxy`. */
    const idleThenForgotten = (sql: SqlClient.SqlClient, proxy: TcpProxy) =>
      Effect.gen(function*() {
        // each idle connection is the next one the pool hands out
        yield* Effect.forEach(Array.from({ length: 6 }), () => sql`SELECT pg_sleep(0.05)`, {
          concurrency: "unbounded"
        })
        expect(yield* proxy.forget).toBeGreaterThanOrEqual(6)
      })

    /** A store on its own schema whose connections pass a proxy, with one request created. */
    const proxiedStore = (channel: string, options?: SqlApprovalStore.Options) =>
      Effect.gen(function*() {
        const proxy = yield* tcpProxy(url)
        const schemaUrl = yield* pgSchema(url)
        const { sql, store } = yield* open(pgStoreOver(pgClient(proxy.url(schemaUrl)), channel, options))
        const first = request(1)
        yield* store.createRequest(first, requested(first))
        return { first, proxy, schemaUrl, sql, store }
      })

    /**
     * A store whose connections pass a proxy; `forget` makes the proxy forget every flow while they
     * are idle: the kept connections and the pool's idle ones, each found dead only when used.
     */
    const forgottenStore = (keepConnections: boolean) =>
      Effect.gen(function*() {
        const { first, proxy, schemaUrl, sql, store } = yield* proxiedStore("toolgate_test_forgotten", {
          keepConnections
        })
        yield* store.getRequest(first.requestId)
        return { first, forget: idleThenForgotten(sql, proxy), proxy, schemaUrl, store }
      })

    for (const keepConnections of [true, false]) {
      const kept = keepConnections ? "kept and pooled" : "pooled (none kept)"

      it.live(`connections (${kept}) a load balancer forgot while idle, a new request (one statement) first: it and the reads after succeed, once each`, () =>
        Effect.gen(function*() {
          const { forget, store } = yield* forgottenStore(keepConnections)
          yield* forget
          const second = yield* requestFoundAndAnswered(store)
          expect(yield* store.consume(second.requestId, second.createdAt + 10)).toBe(true)
          const events = yield* store.events()
          expect(events.map((e) => e.type)).toEqual(["approval.requested", "approval.requested", "approval.resolved"])
          expect(events.map((e) => e.seq)).toEqual([1, 2, 3])
        }))

      it.live(`connections (${kept}) a load balancer forgot while idle, an answer granting a session approval (a transaction) first: it succeeds, once`, () =>
        Effect.gen(function*() {
          const { first, forget, store } = yield* forgottenStore(keepConnections)
          yield* forget
          const answered = yield* store.resolve(
            first.requestId,
            approval(first, "ana"),
            resolved(first, "ana"),
            grant(1)
          )
          expect(answered._tag).toBe("Resolved")
          expect(yield* store.sessionApprovals()).toHaveLength(1)
          const events = yield* store.events()
          expect(events.map((e) => e.type)).toEqual(["approval.requested", "approval.resolved"])
          expect(events.map((e) => e.seq)).toEqual([1, 2])
        }))

      it.live(`connections (${kept}) a load balancer forgot, with the server out of reach since: a PersistenceError, nothing written`, () =>
        Effect.gen(function*() {
          const { first, forget, proxy, schemaUrl, store } = yield* forgottenStore(keepConnections)
          yield* forget
          yield* proxy.refuse
          const second = request(2)
          expect((yield* failure(store.createRequest(second, requested(second))))._tag).toBe("PersistenceError")
          expect((yield* failure(store.resolve(first.requestId, approval(first, "ana"), resolved(first, "ana"))))._tag)
            .toBe("PersistenceError")
          const admin = yield* Effect.map(Layer.build(pgClient(schemaUrl)), Context.get(SqlClient.SqlClient))
          const rows = yield* admin<{ type: string }>`SELECT type FROM toolgate_events ORDER BY seq`
          expect(rows.map((row) => row.type)).toEqual(["approval.requested"])
        }))
    }

    /** A checkpoint store through a proxy, one checkpoint saved, and connections idle in its pool. */
    const forgottenCheckpoints = Effect.gen(function*() {
      const proxy = yield* tcpProxy(url)
      const client = pgClient(proxy.url(yield* pgSchema(url)))
      const context = yield* Layer.build(SqlCheckpointStore.layer().pipe(Layer.provideMerge(client)))
      const checkpoints = Context.get(context, CheckpointStore.CheckpointStore)
      const sql = Context.get(context, SqlClient.SqlClient)
      const saved = { token: "t1", name: "wait", state: "{}", requestIds: ["r1"], createdAt: 1 }
      expect(yield* checkpoints.save(saved)).toBe(true)
      return { checkpoints, forget: idleThenForgotten(sql, proxy), proxy, sql }
    })

    it.live("checkpoints over connections a load balancer forgot while idle: the reads and a save after succeed, once each", () =>
      Effect.gen(function*() {
        const { checkpoints, forget } = yield* forgottenCheckpoints
        yield* forget
        expect(Option.map(yield* checkpoints.find({ requestId: "r1" }), (row) => row.token)).toEqual(Option.some("t1"))
        yield* forget
        expect((yield* checkpoints.open("wait")).map((row) => row.token)).toEqual(["t1"])
        yield* forget
        expect(yield* checkpoints.save({ token: "t2", name: "wait", state: "{}", requestIds: ["r2"], createdAt: 2 }))
          .toBe(true)
        expect((yield* checkpoints.open("wait")).map((row) => row.token)).toEqual(["t1", "t2"])
      }))

    it.live("a checkpoint's save whose COMMIT took effect and its answer was lost: run again, it is true, saved once", () =>
      Effect.gen(function*() {
        const { checkpoints, proxy, sql } = yield* forgottenCheckpoints
        yield* proxy.loseAnswerTo("COMMIT")
        const second = { token: "t2", name: "wait", state: "{}", requestIds: ["r2", "r3"], createdAt: 2 }
        expect(yield* checkpoints.save(second)).toBe(true)
        expect(proxy.answersLost()).toBe(1)
        expect((yield* checkpoints.open("wait")).map((row) => row.token)).toEqual(["t1", "t2"])
        const owners = yield* sql<{ request_id: string; token: string }>`
          SELECT request_id, token FROM toolgate_checkpoint_requests ORDER BY request_id`
        expect(owners).toEqual([
          { request_id: "r1", token: "t1" },
          { request_id: "r2", token: "t2" },
          { request_id: "r3", token: "t2" }
        ])
        // another checkpoint over one of its requests is still refused
        expect(yield* checkpoints.save({ ...second, token: "t3", requestIds: ["r3"] })).toBe(false)
      }))

    it.live("a checkpoint's claim and leased writes over connections a load balancer forgot while idle: each succeeds, once", () =>
      Effect.gen(function*() {
        const { checkpoints, forget } = yield* forgottenCheckpoints
        yield* forget
        const fence = Option.getOrThrow(yield* checkpoints.claim("t1", "worker-a", 2, 100))
        yield* forget
        expect(yield* checkpoints.renew("t1", "worker-a", fence, 200)).toBe(true)
        yield* forget
        expect(yield* checkpoints.update("t1", "worker-a", fence, "{\"step\":2}")).toBe(true)
        yield* forget
        expect(yield* checkpoints.complete("t1", "worker-a", fence, 7)).toBe(true)
        const row = Option.getOrThrow(yield* checkpoints.find({ token: "t1" }))
        expect([row.claims, row.claimedUntil, row.state, row.completedAt]).toEqual([1, 200, "{\"step\":2}", 7])
      }))

    it.live("an answer whose COMMIT took effect and its answer was lost: PersistenceError, and answered again it is no longer pending: held once", () =>
      Effect.gen(function*() {
        const { first, proxy, schemaUrl } = yield* proxiedStore("toolgate_test_commit_lost")
        // a store that has committed nothing yet knows no head to write a claim at once after: it
        // answers in a transaction
        const { store } = yield* open(pgStoreOver(pgClient(proxy.url(schemaUrl)), "toolgate_test_commit_lost"))
        yield* proxy.loseAnswerTo("COMMIT")
        // not run again: it may have committed (it did), so the caller is told it failed
        const lost = yield* failure(
          store.resolve(first.requestId, approval(first, "ana"), resolved(first, "ana"), grant(1))
        )
        expect(proxy.answersLost()).toBe(1)
        expect(lost._tag).toBe("PersistenceError")
        // answered again, the request is no longer pending: the first answer took effect, once
        const again = yield* store.resolve(first.requestId, approval(first, "ana"), resolved(first, "ana"), grant(1))
        expect(again._tag === "NotPending" && again.request.status).toBe("approved")
        expect((yield* store.events()).map((e) => e.type)).toEqual(["approval.requested", "approval.resolved"])
        expect(yield* store.sessionApprovals()).toHaveLength(1)
      }))

    it.live("an answer written at once whose answer was lost: claimed again in a transaction, it is no longer pending: held once", () =>
      Effect.gen(function*() {
        const { first, proxy, store } = yield* proxiedStore("toolgate_test_claim_at_once_lost")
        // the statement that writes claims at once takes the writers' lock only if it is free
        yield* proxy.loseAnswerTo("pg_try_advisory_xact_lock")
        const answered = yield* store.resolve(
          first.requestId,
          approval(first, "ana"),
          resolved(first, "ana"),
          grant(1)
        )
        expect(proxy.answersLost()).toBe(1)
        // it took effect, once; the claim made again finds the request answered
        expect(answered._tag === "NotPending" && answered.request.status).toBe("approved")
        expect((yield* store.events()).map((e) => e.type)).toEqual(["approval.requested", "approval.resolved"])
        expect(yield* store.sessionApprovals()).toHaveLength(1)
      }))

    it.live("answers written at once before a transaction that lost its connection: not written again, the rest run again", () =>
      Effect.gen(function*() {
        const proxy = yield* tcpProxy(url)
        const schemaUrl = yield* pgSchema(url)
        const channel = "toolgate_test_ahead_then_lost"
        const { store } = yield* open(pgStoreOver(pgClient(proxy.url(schemaUrl)), channel))
        const other = (yield* open(pgStoreOver(pgClient(schemaUrl), channel))).store
        // requests another process made (so the answers meet in a batch); then this store's first
        // write, in a transaction, tells it the log's head
        const asks = [2, 3, 4].map((n) => request(n))
        for (const ask of asks) yield* other.createRequest(ask, requested(ask))
        const own = request(1)
        yield* store.createRequest(own, requested(own))
        // in the batch, the second answer of a request is claimed in the transaction, whose BEGIN
        // never reaches the server
        yield* proxy.dropRequestTo("BEGIN")
        const results = yield* Effect.forEach(
          [...asks, asks[0]!],
          (ask) => store.resolve(ask.requestId, approval(ask, "ana"), resolved(ask, "ana")),
          { concurrency: "unbounded" }
        )
        expect(proxy.requestsDropped()).toBe(1)
        expect(results.map((result) => result._tag)).toEqual(["Resolved", "Resolved", "Resolved", "NotPending"])
        expect((yield* store.events()).filter((e) => e.type === "approval.resolved")).toHaveLength(3)
      }))

    it.live("a new request written at once whose answer was lost: run again on another connection, it finds the request, written once", () =>
      Effect.gen(function*() {
        const { first, proxy, store } = yield* proxiedStore("toolgate_test_at_once_lost")
        // the statement that writes a lone step at once takes the writers' lock only if it is free
        yield* proxy.loseAnswerTo("pg_try_advisory_xact_lock")
        const second = request(2)
        const created = yield* store.createRequest(second, requested(second))
        expect(proxy.answersLost()).toBe(1)
        expect(created._tag === "Existing" && created.request.requestId).toBe(second.requestId)
        expect((yield* store.events()).map((e) => [e.type, e.requestId])).toEqual([
          ["approval.requested", first.requestId],
          ["approval.requested", second.requestId]
        ])
      }))

    it.live("a spend, one statement with no transaction around it, on a kept connection the server ended: spent once", () =>
      Effect.gen(function*() {
        const { endKept, store } = yield* keptStore
        const r = request(1)
        yield* store.createRequest(r, requested(r))
        yield* store.resolve(r.requestId, approval(r, "ana"), resolved(r, "ana"))
        yield* store.getRequest(r.requestId)
        yield* endKept

        expect(yield* store.consume(r.requestId, r.createdAt + 10)).toBe(true)
        expect(yield* store.consume(r.requestId, r.createdAt + 11)).toBe(false)
        const spent = Option.getOrThrow(yield* store.getRequest(r.requestId))
        expect(spent.status === "approved" && spent.consumedAt).toBe(r.createdAt + 10)
      }))

    it.live("spends merged into one statement on a kept connection the server ended: each spent once", () =>
      Effect.gen(function*() {
        const { endKept, store } = yield* keptStore
        const asks = Array.from({ length: 8 }, (_, n) => request(n + 1))
        for (const ask of asks) {
          yield* store.createRequest(ask, requested(ask))
          yield* store.resolve(ask.requestId, approval(ask, "ana"), resolved(ask, "ana"))
        }
        yield* store.getRequest(asks[0]!.requestId)
        yield* endKept

        // in flight together, the spends merge into one statement (counted: it names `v.column2`)
        const { result, statements } = yield* statementsSent(
          "v.column2",
          Effect.forEach(asks, (ask) => store.consume(ask.requestId, ask.createdAt + 10), { concurrency: "unbounded" })
        )
        expect(statements).toBeGreaterThanOrEqual(1)
        expect(result).toEqual(asks.map(() => true))
        for (const ask of asks) {
          const spent = Option.getOrThrow(yield* store.getRequest(ask.requestId))
          expect(spent.status === "approved" && spent.consumedAt).toBe(ask.createdAt + 10)
        }
      }))
  })

describePostgres("store fault tests", pgSuite)
