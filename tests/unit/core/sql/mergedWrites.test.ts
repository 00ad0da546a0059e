/**
 * Requests created in flight together: the SQL driver writes a batch of them merged (one read of
 * their call ids' records, one of the session approvals that may cover them, one insert each for
 * their events and for the requests). Each still gets what one transaction per call gives: the
 * first request of a call id is created and the others meet it, a session approval in the store
 * covers the calls it covers (only while it is active at the request's time), and each request's
 * `requested_seq` is the seq of its own `approval.requested` event. Answers in flight are claimed
 * merged too, and each request is still resolved once.
 */
import type { SqlClient } from "@effect/sql"
import type { ApprovalRequest, ApprovalStore as Store } from "@tool-gate/core"
import { AuditEvent } from "@tool-gate/core"
import { expect } from "bun:test"
import { Cause, Effect, Exit, type Layer, Option } from "effect"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgStore, sqliteStore } from "../../../support/sqlStores.js"
import { bashGrant, decision, granted, open, request, requested, statementsSent } from "./fixtures.js"

/** `ask` approved for its session by ana (grant `sa_${n}`), or denied by bob, 5 ms after it was made. */
const approvedForSession = (ask: ApprovalRequest.ApprovalRequest, n: number): ApprovalRequest.Resolution => ({
  status: "approved",
  decision: "approve_session",
  respondedBy: "ana",
  scope: "tool",
  sessionApprovalId: `sa_${n}`,
  resolvedAt: ask.createdAt + 5
})
const deniedBy = (ask: ApprovalRequest.ApprovalRequest): ApprovalRequest.Resolution => ({
  status: "denied",
  decision: "deny",
  respondedBy: "bob",
  resolvedAt: ask.createdAt + 5
})

const suite = <E>(name: string, layer: () => Layer.Layer<Store.ApprovalStore | SqlClient.SqlClient, E>) =>
  describe(`merged request writes (${name})`, () => {
    it.scoped("64 requests in flight: one per call id is created, the rest meet it; covered calls are not asked", () =>
      Effect.gen(function*() {
        const { sql, store } = yield* open(layer())
        yield* store.grant(bashGrant("sa_open", "covered"), granted(1, "covered"))
        // active for the batch's first requests (created from 1,100), expired at 1,140: before the
        // requests of its session (created at 1,148 and later) are made
        yield* store.grant(bashGrant("sa_lapsed", "lapsed", 1_140), granted(2, "lapsed"))
        const asks = Array.from({ length: 64 }, (_, n) =>
          n < 32
            ? request(100 + n, { sessionKey: "s1", callId: `c${n % 8}` })
            : request(100 + n, { sessionKey: n < 48 ? "covered" : "lapsed", callId: `c${n}` }))
        const results = yield* Effect.forEach(
          asks,
          (ask) => Effect.zipRight(Effect.yieldNow(), store.createRequest(ask, requested(ask))),
          { concurrency: "unbounded" }
        )
        for (let id = 0; id < 8; id++) {
          const own = results.filter((_, n) => n < 32 && n % 8 === id)
          const created = own.filter((result) => result._tag === "Created")
          expect(created).toHaveLength(1)
          const createdId = (created[0] as { request: { requestId: string } }).request.requestId
          for (const result of own) {
            if (result._tag === "Created") continue
            expect(result._tag).toBe("Existing")
            expect((result as { request: { requestId: string } }).request.requestId).toBe(createdId)
          }
        }
        results.slice(32, 48).forEach((result) =>
          expect(result).toMatchObject({ _tag: "Covered", grant: { id: "sa_open" } })
        )
        results.slice(48).forEach((result) => expect(result._tag).toBe("Created"))
        // each request row points at its own approval.requested event
        const rows = yield* sql<{ request_id: string; requested_seq: number | string }>`
          SELECT request_id, requested_seq FROM toolgate_requests`
        const events = (yield* store.events()).filter((e) => e.type === "approval.requested")
        expect(rows).toHaveLength(8 + 16)
        expect(events).toHaveLength(8 + 16)
        const seqOf = new Map<string, number>(events.map((e) => [e.requestId!, e.seq]))
        for (const row of rows) expect(Number(row.requested_seq)).toBe(seqOf.get(row.request_id)!)
      }))

    it.scoped("a request id another call holds: that request dies and writes nothing, alone or beside others", () =>
      Effect.gen(function*() {
        const { sql, store } = yield* open(layer())
        const held = request(600, { sessionKey: "ids" })
        yield* store.createRequest(held, requested(held))
        const taken = { ...request(601, { sessionKey: "ids" }), requestId: held.requestId }
        const alone = yield* Effect.exit(store.createRequest(taken, requested(taken)))
        expect(Exit.isFailure(alone) && Cause.isDie(alone.cause)).toBe(true)
        const others = Array.from({ length: 7 }, (_, n) => request(610 + n, { sessionKey: "ids" }))
        const exits = yield* Effect.forEach(
          [taken, ...others],
          (ask) => Effect.zipRight(Effect.yieldNow(), Effect.exit(store.createRequest(ask, requested(ask)))),
          { concurrency: "unbounded" }
        )
        expect(Exit.isFailure(exits[0]!) && Cause.isDie(exits[0]!.cause)).toBe(true)
        exits.slice(1).forEach((exit) => expect(Exit.isSuccess(exit) && exit.value._tag).toBe("Created"))
        const events = yield* store.events()
        expect(events.map((e) => e.toolCallId)).toEqual([held, ...others].map((ask) => ask.toolCall.id))
        expect(events.map((e) => e.seq)).toEqual(events.map((_, n) => n + 1))
        const rows = yield* sql<{ tool_call_id: string }>`
          SELECT tool_call_id FROM toolgate_requests WHERE request_id = ${held.requestId}`
        expect(rows).toEqual([{ tool_call_id: held.toolCall.id }])
      }))

    it.scoped("answers in flight: each request resolved once (the first claim wins), session grants written with theirs", () =>
      Effect.gen(function*() {
        const { sql, store } = yield* open(layer())
        const asks = Array.from({ length: 16 }, (_, n) => request(200 + n))
        for (const ask of asks) yield* store.createRequest(ask, requested(ask))
        // per request: an approval for the session (with its grant), a denial, and the pre-expiry warning
        const calls = asks.flatMap((ask, n) => {
          const approve = approvedForSession(ask, n)
          const deny = deniedBy(ask)
          return [
            store.resolve(ask.requestId, approve, AuditEvent.approvalResolved(ask, approve), {
              ...bashGrant(`sa_${n}`, ask.toolCall.sessionKey),
              requestId: ask.requestId
            }),
            store.resolve(ask.requestId, deny, AuditEvent.approvalResolved(ask, deny)),
            Effect.map(
              store.markWarned(ask.requestId, AuditEvent.approvalExpiring(ask, ask.createdAt + 1)),
              (warned) => ({
                _tag: warned ? "Warned" : "NotWarned"
              })
            )
          ]
        })
        const results = yield* Effect.forEach(calls, (call) => Effect.zipRight(Effect.yieldNow(), call), {
          concurrency: "unbounded"
        })
        const events = yield* store.events()
        const approvals = yield* sql<{ id: string }>`SELECT id FROM toolgate_session_approvals`
        let granted = 0
        for (let n = 0; n < 16; n++) {
          const [approved, denied] = [results[3 * n]!, results[3 * n + 1]!]
          expect([approved._tag, denied._tag].sort()).toEqual(["NotPending", "Resolved"])
          const winner = approved._tag === "Resolved" ? "approved" : "denied"
          const loser = (approved._tag === "Resolved" ? denied : approved) as unknown as {
            request: ApprovalRequest.ApprovalRequest
          }
          expect(loser.request.status).toBe(winner)
          const own = events.filter((e) => e.requestId === asks[n]!.requestId)
          expect(own.filter((e) => e.type === "approval.resolved")).toHaveLength(1)
          expect(own.filter((e) => e.type === "approval.expiring")).toHaveLength(
            results[3 * n + 2]!._tag === "Warned" ? 1 : 0
          )
          if (winner === "approved") granted++
          expect(approvals.some((a) => a.id === `sa_${n}`)).toBe(winner === "approved")
        }
        expect(approvals).toHaveLength(granted)
        expect(yield* store.listPending()).toHaveLength(0)
      }))

    it.scoped("answers made of the claimed request, in flight: the first answer of each request wins, its grant numbered by its event", () =>
      Effect.gen(function*() {
        const { sql, store } = yield* open(layer())
        const asks = Array.from({ length: 16 }, (_, n) => request(400 + n))
        for (const ask of asks) yield* store.createRequest(ask, requested(ask))
        const seen: Array<ApprovalRequest.ApprovalRequest> = []
        // two answers per request, each made from the request the store claimed for it
        const answer = (ask: ApprovalRequest.ApprovalRequest, n: number, approve: boolean) =>
          store.answer(ask.requestId, ask.createdAt + 5, (claimed) => {
            seen.push(claimed)
            const resolution = approve ? approvedForSession(ask, n) : deniedBy(ask)
            return {
              resolution,
              event: AuditEvent.approvalResolved(claimed, resolution),
              grant: approve
                ? { ...bashGrant(`sa_${n}`, claimed.toolCall.sessionKey), requestId: claimed.requestId }
                : undefined
            }
          })
        const results = yield* Effect.forEach(
          asks.flatMap((ask, n) => [answer(ask, n, n % 2 === 0), answer(ask, n, n % 2 === 1)]),
          (call) => Effect.zipRight(Effect.yieldNow(), call),
          { concurrency: "unbounded" }
        )
        // the answer only ever saw its request pending, as it was created
        for (const claimed of seen) {
          expect(claimed.status).toBe("pending")
          expect(claimed).toEqual(asks.find((ask) => ask.requestId === claimed.requestId)!)
        }
        const approvals = yield* sql<{ id: string; seq: number | string }>`
          SELECT id, seq FROM toolgate_session_approvals`
        for (let n = 0; n < 16; n++) {
          const pair = [results[2 * n]!, results[2 * n + 1]!]
          expect(pair.map((result) => result._tag).sort()).toEqual(["NotPending", "Resolved"])
          const won = pair.find((result) => result._tag === "Resolved")!
          if (won._tag !== "Resolved") throw new Error("unreachable")
          const row = approvals.find((a) => a.id === `sa_${n}`)
          if (won.request.status === "approved") {
            expect(won.grant).toMatchObject({ id: `sa_${n}`, seq: won.event.seq })
            expect(Number(row!.seq)).toBe(won.event.seq)
          } else {
            expect(won.grant).toBeUndefined()
            expect(row).toBeUndefined()
          }
        }
        expect(yield* store.listPending()).toHaveLength(0)
        // answering after the deadline claims nothing and writes nothing
        const late = request(500, { sessionKey: "s2" })
        expect((yield* store.createRequest(late, requested(late)))._tag).toBe("Created")
        const overdue = yield* store.answer(late.requestId, late.expiresAt + 1, () => {
          throw new Error("an overdue request is never handed to its answer")
        })
        expect(overdue._tag).toBe("Overdue")
        const missing = yield* store.answer("req_missing" as ApprovalRequest.RequestId, 1, () => {
          throw new Error("a missing request is never handed to its answer")
        })
        expect(missing._tag).toBe("NotFound")
      }))

    it.scoped("answers in flight are each judged at their own time: those past their request's deadline are Overdue", () =>
      Effect.gen(function*() {
        const { store } = yield* open(layer())
        const asks = Array.from({ length: 16 }, (_, n) => request(300 + n))
        for (const ask of asks) yield* store.createRequest(ask, requested(ask))
        // odd ones answered a millisecond after their deadline, even ones well before it
        const results = yield* Effect.forEach(asks, (ask, n) => {
          const resolution: ApprovalRequest.Resolution = {
            status: "approved",
            decision: "approve_once",
            respondedBy: "ana",
            resolvedAt: n % 2 === 1 ? ask.expiresAt + 1 : ask.createdAt + 5
          }
          return Effect.zipRight(
            Effect.yieldNow(),
            store.resolve(ask.requestId, resolution, AuditEvent.approvalResolved(ask, resolution))
          )
        }, { concurrency: "unbounded" })
        expect(results.map((result) => result._tag)).toEqual(asks.map((_, n) => n % 2 === 1 ? "Overdue" : "Resolved"))
        expect((yield* store.listPending()).map((r) => r.requestId).sort()).toEqual(
          asks.filter((_, n) => n % 2 === 1).map((ask) => ask.requestId).sort()
        )
      }))
  })

suite("SQLite", () => sqliteStore())
describePostgres("merged request writes", (url) => suite("PostgreSQL", () => pgStore(url)))

describePostgres("merged reads", (url) =>
  describe("reads of call records in flight (PostgreSQL)", () => {
    for (const keepConnections of [true, false]) {
      it.scoped(`merge into a few statements, each call finding its own record (keepConnections: ${keepConnections})`, () =>
        Effect.gen(function*() {
          const { store } = yield* open(pgStore(url, { keepConnections }))
          const asks = Array.from({ length: 200 }, (_, n) => request(n, { callId: `c${n}` }))
          for (const ask of asks) yield* store.createRequest(ask, requested(ask))
          const { result, statements } = yield* statementsSent(
            "FROM \"toolgate_requests\" WHERE",
            Effect.forEach(asks, (ask) => store.findRecorded("s1", ask.toolCall.id), { concurrency: "unbounded" })
          )
          expect(
            result.map((found) =>
              Option.isSome(found) && found.value._tag === "Request" && found.value.request.requestId
            )
          )
            .toEqual(asks.map((ask) => ask.requestId))
          // one alone (the store was idle), the others merged behind it: not one statement per call
          expect(statements).toBeGreaterThan(0)
          expect(statements).toBeLessThanOrEqual(10)
        }))
    }

    it.scoped("the log's head asked in flight: a few reads, each after its caller asked", () =>
      Effect.gen(function*() {
        const { store } = yield* open(pgStore(url))
        yield* store.append([decision(1), decision(2)])
        const { result, statements } = yield* statementsSent(
          "SELECT MAX(seq)",
          Effect.forEach(Array.from({ length: 100 }), () => store.lastSeq, { concurrency: "unbounded" })
        )
        expect(result).toEqual(Array.from({ length: 100 }, () => 2))
        expect(statements).toBeGreaterThan(0)
        expect(statements).toBeLessThanOrEqual(5)
        // asked after its commit, each reads past it (a read already running when it asks is not shared)
        const seen = yield* Effect.forEach([1, 2, 3], (n) =>
          Effect.flatMap(store.append([decision(10 + n)]), ([written]) =>
            Effect.map(
              Effect.forEach(Array.from({ length: 10 }), () => store.lastSeq, { concurrency: "unbounded" }),
              (heads) => heads.every((head) => head >= written!.seq)
            )), { concurrency: "unbounded" })
        expect(seen).toEqual([true, true, true])
      }))
  }))
