/**
 * Both stores fold a read into the write that follows it. A request is written only when its call id
 * has no record and no session approval for its tool is active (PostgreSQL: in one statement;
 * SQLite: its event's insert carries the check); an answer (or a warning, an extension, an expiry)
 * of a request this process wrote is written guarded by the row's text as this process last wrote
 * it (PostgreSQL: with its event, in one statement; SQLite: the row's rewrite is its claim). Either
 * one writes nothing when its guard fails, and the step then runs as before. What may not change:
 * a write still meets the row as it is (another process's change, a write rolled back), and the
 * log stays numbered without a hole and chained. PostgreSQL also writes a lone step at once, with
 * no transaction, when it knows the log's head. On SQLite, a claim in a batch's own transaction
 * is a read (its `BEGIN IMMEDIATE` holds the write lock), one for the answers merged in it; in a
 * caller's own transaction it stays an update, which takes the lock before the row is read.
 */
import type { SqlClient } from "@effect/sql"
import type { ApprovalRequest, ApprovalStore as Store } from "@tool-gate/core"
import { ApprovalStore, AuditChain, AuditEvent, SessionApproval, ToolCall } from "@tool-gate/core"
import { expect } from "bun:test"
import type { Scope } from "effect"
import { Deferred, Effect, Fiber, Option, Queue, Schema } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import type { Sent } from "./fixtures.js"
import {
  approval,
  bashGrant,
  decision,
  granted,
  open,
  request,
  requested,
  sqliteStatementsSent,
  statementsSent
} from "./fixtures.js"

let channels = 0

type Process = Effect.Effect.Success<ReturnType<typeof open>>

/** `n` stores on one fresh PostgreSQL schema, as `n` processes open it. */
const pgProcesses = (url: string, n: number) =>
  Effect.flatMap(pgSchema(url), (schemaUrl) =>
    Effect.forEach(
      Array.from({ length: n }),
      () => open(pgStoreOver(pgClient(schemaUrl), `toolgate_folded_${channels++}`))
    ))

/** `n` stores on one fresh SQLite file, as `n` processes open it. */
const sqliteProcesses = (n: number) =>
  Effect.flatMap(tempDir, (dir) =>
    Effect.forEach(
      Array.from({ length: n }),
      () => open(storeOver(sqliteClient(join(dir, "toolgate.db"))))
    ))

/** What the shared tests need of a database. */
interface Backend {
  readonly processes: (n: number) => Effect.Effect<ReadonlyArray<Process>, unknown, Scope.Scope>
  /** Counts the updates of request rows from now on (a row-level trigger). */
  readonly countRowUpdates: (
    sql: SqlClient.SqlClient
  ) => Effect.Effect<(requestId: string) => Effect.Effect<number, unknown>, unknown>
  readonly statementsSent: Sent
  /** a claim in the batch's own transaction reads the row (SQLite) rather than updating it */
  readonly claimsByRead: boolean
}

/** Approves `ask` as `actor`, at 5 ms after it was made. */
const approve = (store: Store.Service, ask: ApprovalRequest.ApprovalRequest, actor: string) =>
  store.answer(ask.requestId, ask.createdAt + 5, (claimed) => {
    const resolution = approval(claimed, actor)
    return { resolution, event: AuditEvent.approvalResolved(claimed, resolution) }
  })

/** The log is numbered 1, 2, ... without a hole, and its hash chain holds. */
const expectWholeLog = (store: Store.Service) =>
  Effect.gen(function*() {
    const events = yield* store.events()
    expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1))
    const report = yield* AuditChain.verify().pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))
    expect(report).toMatchObject({ valid: true, events: events.length })
    return events
  })

/** The updates of a request row noted in `request_updates`, counted. */
const updatesOf = (sql: SqlClient.SqlClient) => (requestId: string) =>
  Effect.map(
    sql<{ n: string | number }>`SELECT COUNT(*) AS n FROM request_updates WHERE request_id = ${requestId}`,
    (rows) => Number(rows[0]!.n)
  )

const postgres = (url: string): Backend => ({
  processes: (n) => pgProcesses(url, n),
  countRowUpdates: (sql) =>
    Effect.gen(function*() {
      yield* sql`CREATE TABLE request_updates (request_id TEXT NOT NULL)`
      yield* sql.unsafe(`CREATE FUNCTION note_request_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO request_updates VALUES (NEW.request_id); RETURN NEW; END $$`)
      yield* sql.unsafe(`CREATE TRIGGER note_request_update AFTER UPDATE ON toolgate_requests
        FOR EACH ROW EXECUTE FUNCTION note_request_update()`)
      return updatesOf(sql)
    }),
  statementsSent,
  claimsByRead: false
})

const sqlite: Backend = {
  processes: sqliteProcesses,
  countRowUpdates: (sql) =>
    Effect.gen(function*() {
      yield* sql`CREATE TABLE request_updates (request_id TEXT NOT NULL)`
      yield* sql.unsafe(`CREATE TRIGGER note_request_update AFTER UPDATE ON toolgate_requests
        BEGIN INSERT INTO request_updates VALUES (NEW.request_id); END`)
      return updatesOf(sql)
    }),
  statementsSent: sqliteStatementsSent,
  claimsByRead: true
}

/** The folds both stores make, on `backend`. */
const foldedWrites = (backend: Backend) => {
  it.scoped("an answer to a request this process wrote writes its row once", () =>
    Effect.gen(function*() {
      const [a, b] = yield* backend.processes(2)
      const updates = yield* backend.countRowUpdates(a!.sql)
      const mine = request(1)
      const theirs = request(2)
      yield* a!.store.createRequest(mine, requested(mine))
      yield* b!.store.createRequest(theirs, requested(theirs))
      // a warning, whose claim has no time of its own: the event's columns still hold its own
      const warning = AuditEvent.approvalExpiring(mine, mine.createdAt + 1)
      expect(yield* a!.store.markWarned(mine.requestId, warning)).toBe(true)
      expect(yield* approve(a!.store, mine, "ana")).toMatchObject({ _tag: "Resolved" })
      expect(yield* approve(a!.store, theirs, "ana")).toMatchObject({ _tag: "Resolved" })
      // folded: the rewrite alone (the warning's, the answer's); claimed, then rewritten: twice
      // (SQLite: the claim a read, under the lock its transaction took: once)
      expect(yield* updates(mine.requestId)).toBe(2)
      expect(yield* updates(theirs.requestId)).toBe(backend.claimsByRead ? 1 : 2)
      yield* expectWholeLog(a!.store)
    }))

  it.scoped("three processes pausing and answering their own calls at once: each request once, the log whole", () =>
    Effect.gen(function*() {
      const stores = yield* backend.processes(3)
      const rounds = 20
      yield* Effect.forEach(stores, ({ store }, p) =>
        Effect.forEach(
          Array.from({ length: rounds }, (_, n) => request(100 * p + n, { sessionKey: `s${p}` })),
          (ask) =>
            Effect.zipRight(
              store.createRequest(ask, requested(ask)),
              Effect.flatMap(
                approve(store, ask, `p${p}`),
                (result) => result._tag === "Resolved" ? Effect.void : Effect.die(`${ask.requestId}: ${result._tag}`)
              )
            )
        ), { concurrency: "unbounded", discard: true })
      const events = yield* expectWholeLog(stores[0]!.store)
      expect(events.filter((event) => event.type === "approval.requested")).toHaveLength(3 * rounds)
      const resolved = events.filter((event) => event.type === "approval.resolved")
      expect(new Set(resolved.map((event) => event.requestId)).size).toBe(3 * rounds)
      expect(resolved).toHaveLength(3 * rounds)
      expect(yield* stores[0]!.store.listPending()).toHaveLength(0)
    }))

  it.scoped("an answer meets the row as another process left it, not as this one wrote it", () =>
    Effect.gen(function*() {
      const [a, b] = yield* backend.processes(2)
      const warned = request(1)
      const answered = request(2)
      for (const ask of [warned, answered]) yield* a!.store.createRequest(ask, requested(ask))
      expect(
        yield* b!.store.markWarned(warned.requestId, AuditEvent.approvalExpiring(warned, warned.createdAt + 1))
      )
        .toBe(true)
      expect(yield* approve(b!.store, answered, "bob")).toMatchObject({ _tag: "Resolved" })

      const afterWarning = yield* approve(a!.store, warned, "ana")
      expect(afterWarning).toMatchObject({
        _tag: "Resolved",
        request: { status: "approved", warnedAt: warned.createdAt + 1, resolution: { respondedBy: "ana" } }
      })
      expect(yield* approve(a!.store, answered, "ana")).toMatchObject({
        _tag: "NotPending",
        request: { status: "approved", resolution: { respondedBy: "bob" } }
      })
      const events = yield* expectWholeLog(a!.store)
      expect(events.map((event) => event.type)).toEqual([
        "approval.requested",
        "approval.requested",
        "approval.expiring",
        "approval.resolved",
        "approval.resolved"
      ])
    }))

  it.scoped("a write rolled back leaves nothing an answer relies on", () =>
    Effect.gen(function*() {
      const [a] = yield* backend.processes(1)
      const ask = request(1)
      yield* a!.store.createRequest(ask, requested(ask))
      const rolledBack = yield* a!.sql.withTransaction(
        Effect.zipRight(
          a!.store.markWarned(ask.requestId, AuditEvent.approvalExpiring(ask, ask.createdAt + 1)),
          Effect.fail("roll back" as const)
        )
      ).pipe(Effect.flip)
      expect(rolledBack).toBe("roll back")

      const answered = yield* approve(a!.store, ask, "ana")
      expect(answered).toMatchObject({ _tag: "Resolved", request: { status: "approved" } })
      expect(answered._tag === "Resolved" && answered.request.warnedAt).toBeUndefined()
      const events = yield* expectWholeLog(a!.store)
      expect(events.map((event) => event.type)).toEqual(["approval.requested", "approval.resolved"])
    }))

  it.scoped("three processes racing on requests one of them wrote: each resolved once, warned at most once, the log whole", () =>
    Effect.gen(function*() {
      const [a, b, c] = yield* backend.processes(3)
      const asks = Array.from({ length: 24 }, (_, n) => request(n))
      for (const ask of asks) yield* a!.store.createRequest(ask, requested(ask))
      const deny = (store: Store.Service, ask: ApprovalRequest.ApprovalRequest) =>
        store.answer(ask.requestId, ask.createdAt + 5, (claimed) => {
          const resolution: ApprovalRequest.Resolution = {
            status: "denied",
            decision: "deny",
            respondedBy: "bob",
            reason: "no",
            resolvedAt: claimed.createdAt + 5
          }
          return { resolution, event: AuditEvent.approvalResolved(claimed, resolution) }
        })
      const warn = (store: Store.Service, ask: ApprovalRequest.ApprovalRequest) =>
        store.markWarned(ask.requestId, AuditEvent.approvalExpiring(ask, ask.createdAt + 1))
      // one request at a time, so that each process's claims run alone (folded when they can)
      const results = yield* Effect.forEach(asks, (ask) =>
        Effect.all(
          [approve(a!.store, ask, "ana"), deny(b!.store, ask), warn(c!.store, ask), warn(a!.store, ask)],
          { concurrency: "unbounded" }
        ))
      const events = yield* expectWholeLog(a!.store)
      for (const [n, ask] of asks.entries()) {
        const [approved, denied] = results[n]!
        expect([approved._tag, denied._tag].sort()).toEqual(["NotPending", "Resolved"])
        const own = events.filter((event) => event.requestId === ask.requestId)
        const resolved = own.filter((event) => event.type === "approval.resolved")
        expect(resolved).toHaveLength(1)
        const warnings = own.filter((event) => event.type === "approval.expiring")
        expect(warnings.length).toBeLessThanOrEqual(1)
        // the row says what the log says: its resolution, and its warning when one was logged
        const row = Option.getOrThrow(yield* a!.store.getRequest(ask.requestId))
        expect(row.status).toBe(approved._tag === "Resolved" ? "approved" : "denied")
        expect(row.warnedAt).toBe(warnings.length === 1 ? ask.createdAt + 1 : undefined)
        expect(resolved[0]!.outcome).toBe(approved._tag === "Resolved" ? "approved" : "denied")
      }
    }))

  it.scoped("a request is written only when its call id has no record and no active approval may cover it", () =>
    Effect.gen(function*() {
      const [a, b] = yield* backend.processes(2)
      const { store } = a!
      // another process's records, which this one has not read
      yield* b!.store.recordDecision({
        sessionKey: "s1",
        toolCallId: "decided",
        toolName: "bash",
        argsDigest: "d",
        callDigest: "d",
        at: 1_000,
        decision: { _tag: "Allow", via: "policy", policyVersion: "v1" }
      }, [decision(1)])
      const held = request(2, { callId: "held" })
      yield* b!.store.createRequest(held, requested(held))
      yield* b!.store.grant(bashGrant("sa_open", "covered"), granted(1, "covered"))
      yield* b!.store.grant(bashGrant("sa_lapsed", "lapsed", 1_000), granted(2, "lapsed"))

      const decided = request(3, { callId: "decided" })
      expect(yield* store.createRequest(decided, requested(decided))).toMatchObject({ _tag: "Decided" })
      const again = request(4, { callId: "held" })
      expect(yield* store.createRequest(again, requested(again))).toMatchObject({
        _tag: "Existing",
        request: { requestId: held.requestId }
      })
      const covered = request(5, { sessionKey: "covered" })
      expect(yield* store.createRequest(covered, requested(covered))).toMatchObject({
        _tag: "Covered",
        grant: { id: "sa_open" }
      })
      // an approval that lapsed before the request was made, or of another session, covers nothing
      for (const ask of [request(6, { sessionKey: "lapsed" }), request(7, { sessionKey: "s2" })]) {
        expect(yield* store.createRequest(ask, requested(ask))).toMatchObject({ _tag: "Created" })
      }
      const events = yield* expectWholeLog(store)
      expect(events.filter((event) => event.type === "approval.requested").map((event) => String(event.toolCallId)))
        .toEqual(["held", "call_6", "call_7"])
      const rows = yield* a!.sql<{ request_id: string; requested_seq: string }>`
          SELECT request_id, requested_seq FROM toolgate_requests ORDER BY requested_seq`
      expect(rows.map((row) => [row.request_id, Number(row.requested_seq)])).toEqual(
        events.filter((event) => event.type === "approval.requested").map((event) => [event.requestId, event.seq])
      )
    }))

  it.scoped("an approval of exact scope for other arguments leaves a request to one statement; one for its arguments covers it", () =>
    Effect.gen(function*() {
      const [a] = yield* backend.processes(1)
      const approved = request(1)
      yield* a!.store.grant(
        Schema.decodeUnknownSync(SessionApproval.SessionApproval.pipe(Schema.omit("seq")))({
          id: "sa_exact",
          sessionKey: "s1",
          toolName: "bash",
          scope: "exact",
          argsDigest: ToolCall.argsDigest(approved.toolCall.args),
          workingDirectory: approved.toolCall.workingDirectory,
          grantedBy: "ana",
          createdAt: 500
        }),
        granted(1)
      )
      // the read of the call's records and the session's approvals, which a folded insert skips
      const read = "NULL, NULL, approval FROM"
      const other = request(2)
      const alone = yield* backend.statementsSent(read, a!.store.createRequest(other, requested(other)))
      expect(alone).toMatchObject({ result: { _tag: "Created" }, statements: 0 })
      const third = request(3)
      const again = { ...third, toolCall: { ...approved.toolCall, id: third.toolCall.id } }
      const covered = yield* backend.statementsSent(read, a!.store.createRequest(again, requested(again)))
      expect(covered).toMatchObject({ result: { _tag: "Covered", grant: { id: "sa_exact" } }, statements: 1 })
      yield* expectWholeLog(a!.store)
    }))

  it.scoped("a request id another call holds: the request dies and writes nothing", () =>
    Effect.gen(function*() {
      const [a] = yield* backend.processes(1)
      const held = request(1)
      yield* a!.store.createRequest(held, requested(held))
      const taken = { ...request(2), requestId: held.requestId }
      const exit = yield* Effect.exit(a!.store.createRequest(taken, requested(taken)))
      expect(exit._tag).toBe("Failure")
      const events = yield* expectWholeLog(a!.store)
      expect(events.map((event) => String(event.toolCallId))).toEqual([held.toolCall.id])
    }))
}

describe("SQLite writes folded with their reads", () => {
  foldedWrites(sqlite)

  it.scoped("answers in flight to another process's requests: claimed by reads under the batch's lock, each row rewritten once", () =>
    Effect.gen(function*() {
      const [a, b] = yield* sqlite.processes(2)
      const updates = yield* sqlite.countRowUpdates(a!.sql)
      const asks = Array.from({ length: 16 }, (_, n) => request(300 + n))
      for (const ask of asks) yield* b!.store.createRequest(ask, requested(ask))
      // not this process's requests, so no answer folds its claim into its rewrite: the first
      // alone (the store was idle) claims its request with a read, the others merged with one
      const results = yield* Effect.forEach(
        asks,
        (ask) => Effect.zipRight(Effect.yieldNow(), approve(a!.store, ask, "ana")),
        {
          concurrency: "unbounded"
        }
      )
      expect(results.map((result) => result._tag)).toEqual(asks.map(() => "Resolved"))
      for (const ask of asks) expect(yield* updates(ask.requestId)).toBe(1)
      // in the caller's own transaction (a plain BEGIN, which takes no lock): an update first
      const inTransaction = request(320)
      yield* b!.store.createRequest(inTransaction, requested(inTransaction))
      expect(yield* a!.sql.withTransaction(approve(a!.store, inTransaction, "ana"))).toMatchObject({
        _tag: "Resolved"
      })
      expect(yield* updates(inTransaction.requestId)).toBe(2)
      expect(yield* b!.store.listPending()).toHaveLength(0)
      yield* expectWholeLog(b!.store)
    }))
})

describePostgres(
  "writes folded with their reads",
  (url) =>
    describe("PostgreSQL writes folded with their reads", () => {
      foldedWrites(postgres(url))

      it.scoped("once this process knows the log's head, a lone pause and its answer are each one statement, no transaction", () =>
        Effect.gen(function*() {
          const [a] = yield* pgProcesses(url, 1)
          const first = request(1)
          const opened = yield* statementsSent("BEGIN", a!.store.createRequest(first, requested(first)))
          expect(opened.statements).toBe(1)
          const next = request(2)
          const lone = yield* statementsSent(
            "BEGIN",
            Effect.zipRight(a!.store.createRequest(next, requested(next)), approve(a!.store, next, "ana"))
          )
          expect(lone).toMatchObject({ result: { _tag: "Resolved" }, statements: 0 })
          yield* expectWholeLog(a!.store)
        }))

      /** Answers `asks` in flight: approved for the session (a grant `sa_<request id>`) when `n` is even, else once. */
      const answerAll = (store: Store.Service, asks: ReadonlyArray<ApprovalRequest.ApprovalRequest>) =>
        Effect.forEach(
          asks,
          (ask, n) =>
            Effect.zipRight(
              Effect.yieldNow(),
              store.answer(ask.requestId, ask.createdAt + 5, (claimed) => {
                const resolution: ApprovalRequest.Resolution = n % 2 === 0
                  ? {
                    ...approval(claimed, "ana"),
                    decision: "approve_session",
                    scope: "tool",
                    sessionApprovalId: `sa_${ask.requestId}`
                  }
                  : approval(claimed, "ana")
                return {
                  resolution,
                  event: AuditEvent.approvalResolved(claimed, resolution),
                  grant: n % 2 === 0
                    ? { ...bashGrant(`sa_${ask.requestId}`, claimed.toolCall.sessionKey), requestId: claimed.requestId }
                    : undefined
                }
              })
            ),
          { concurrency: "unbounded" }
        )

      it.live("answers in flight to another process's requests, once this process knows the log's head: no transaction; each once, its grant numbered by its event", () =>
        Effect.gen(function*() {
          const [a, b] = yield* pgProcesses(url, 2)
          const asks = Array.from({ length: 12 }, (_, n) => request(10 + n))
          for (const ask of asks) yield* b!.store.createRequest(ask, requested(ask))
          // a commits once, so it knows the log's head
          const own = request(1)
          yield* a!.store.createRequest(own, requested(own))
          const { result, statements } = yield* statementsSent("BEGIN", answerAll(a!.store, asks))
          expect(statements).toBe(0)
          expect(result.map((r) => r._tag)).toEqual(asks.map(() => "Resolved"))
          const approvals = yield* a!.sql<{ id: string; seq: number | string }>`
            SELECT id, seq FROM toolgate_session_approvals ORDER BY seq`
          const granting = result.filter((_, n) => n % 2 === 0)
          expect(approvals.map((row) => [row.id, Number(row.seq)])).toEqual(
            granting.map((r, i) => [`sa_${asks[2 * i]!.requestId}`, r._tag === "Resolved" ? r.event.seq : -1]).sort((
              x,
              y
            ) => Number(x[1]) - Number(y[1]))
          )
          for (const [n, r] of result.entries()) {
            if (r._tag !== "Resolved") continue
            if (n % 2 === 0) expect(r.grant).toMatchObject({ id: `sa_${asks[n]!.requestId}`, seq: r.event.seq })
            else expect(r.grant).toBeUndefined()
          }
          // b, the other process, is woken by their NOTIFY and sees them
          expect((yield* b!.store.listPending()).map((r) => r.requestId)).toEqual([own.requestId])
          yield* expectWholeLog(a!.store)
        }))

      it.live("answers in flight of requests no longer pending, or never made, are refused as read: no transaction", () =>
        Effect.gen(function*() {
          const [a, b] = yield* pgProcesses(url, 2)
          const asks = Array.from({ length: 4 }, (_, n) => request(10 + n))
          for (const ask of asks) yield* b!.store.createRequest(ask, requested(ask))
          yield* Effect.forEach(asks, (ask) => approve(b!.store, ask, "bob"))
          const own = request(1)
          yield* a!.store.createRequest(own, requested(own))
          const never = request(99)
          const { result, statements } = yield* statementsSent(
            "BEGIN",
            Effect.forEach([...asks, never], (ask) => approve(a!.store, ask, "ana"), { concurrency: "unbounded" })
          )
          expect(statements).toBe(0)
          expect(result.map((r) => r._tag === "NotPending" ? r.request.resolution?.respondedBy : r._tag)).toEqual([
            "bob",
            "bob",
            "bob",
            "bob",
            "NotFound"
          ])
          yield* expectWholeLog(a!.store)
        }))

      it.live("answers in flight to requests another process changed since, or after it wrote: claimed in the transaction, each once", () =>
        Effect.gen(function*() {
          const [a, b] = yield* pgProcesses(url, 2)
          const asks = Array.from({ length: 6 }, (_, n) => request(10 + n))
          for (const ask of asks) yield* a!.store.createRequest(ask, requested(ask))
          // a knows their texts as it wrote them, and its head: b answers two, warns one, and writes after it
          yield* approve(b!.store, asks[1]!, "bob")
          yield* approve(b!.store, asks[4]!, "bob")
          expect(yield* b!.store.markWarned(asks[3]!.requestId, AuditEvent.approvalExpiring(asks[3]!, 1_500))).toBe(
            true
          )
          const result = yield* answerAll(a!.store, asks)
          // the answer met the row as b left it
          expect(result[3]).toMatchObject({ request: { status: "approved", warnedAt: 1_500 } })
          expect(result.map((r) => r._tag)).toEqual([
            "Resolved",
            "NotPending",
            "Resolved",
            "Resolved",
            "NotPending",
            "Resolved"
          ])
          const events = yield* expectWholeLog(a!.store)
          expect(events.filter((e) => e.type === "approval.resolved")).toHaveLength(6)
          expect(events.filter((e) => e.type === "approval.expiring")).toHaveLength(1)
          // b writes after a's head: a's answers, written at once or not, are each once
          // (in another session: the first answers granted bash in theirs)
          const more = Array.from({ length: 4 }, (_, n) => request(30 + n, { sessionKey: "s2" }))
          for (const ask of more) expect((yield* b!.store.createRequest(ask, requested(ask)))._tag).toBe("Created")
          const later = yield* answerAll(a!.store, more)
          expect(later.map((r) => r._tag)).toEqual(more.map(() => "Resolved"))
          expect((yield* a!.store.events()).filter((e) => e.type === "approval.resolved")).toHaveLength(10)
          yield* expectWholeLog(a!.store)
        }))

      it.live("answers in flight written at once meet a row as another process left it, though this one knows the head", () =>
        Effect.gen(function*() {
          const [a, b] = yield* pgProcesses(url, 2)
          const asks = Array.from({ length: 4 }, (_, n) => request(10 + n))
          for (const ask of asks) yield* a!.store.createRequest(ask, requested(ask))
          expect(yield* b!.store.markWarned(asks[1]!.requestId, AuditEvent.approvalExpiring(asks[1]!, 1_500))).toBe(
            true
          )
          // a writes on, past the few steps that go to a transaction after one could not be written
          // at once: it knows the head again, but still the text it wrote of the warned request
          for (let n = 0; n < 8; n++) {
            const own = request(50 + n, { sessionKey: "s2" })
            yield* a!.store.createRequest(own, requested(own))
          }
          const result = yield* answerAll(a!.store, asks)
          expect(result.map((r) => r._tag)).toEqual(asks.map(() => "Resolved"))
          expect(result[1]).toMatchObject({ request: { status: "approved", warnedAt: 1_500 } })
          yield* expectWholeLog(a!.store)
        }))

      it.live("a reader of the log reads nothing for steps written at once: their NOTIFY waits for them", () =>
        Effect.gen(function*() {
          const [a] = yield* pgProcesses(url, 1)
          const { store } = a!
          const hints = yield* store.subscribe
          let seen = 0
          // a reader as the gate's log tailer is: woken by each hint, it reads the tail after what it saw
          yield* Effect.forkScoped(Effect.forever(Effect.zipRight(
            Queue.take(hints),
            Effect.flatMap(Effect.suspend(() => store.tail(seen, 100)), (events) =>
              Effect.sync(() => {
                seen = events.at(-1)?.seq ?? seen
              }))
          )))
          const first = request(1)
          yield* store.createRequest(first, requested(first))
          const steps = 30
          const { statements } = yield* statementsSent(
            "WHERE seq >",
            Effect.gen(function*() {
              for (let n = 2; n < 2 + steps; n++) {
                const ask = request(n)
                yield* store.createRequest(ask, requested(ask))
                yield* approve(store, ask, "ana")
              }
              // every step's NOTIFY delivered, every hint taken
              yield* Effect.sleep("200 millis")
              expect(seen).toBe(1 + 2 * steps)
            })
          )
          // each step's own hint told the store of it before its NOTIFY was let through
          expect(statements).toBe(0)
        }))

      it.live("a spend in flight, which appends nothing, leaves a lone answer to be written at once", () =>
        Effect.gen(function*() {
          const [a, b] = yield* pgProcesses(url, 2)
          const [spent, answered] = [request(1), request(2)]
          for (const ask of [spent, answered]) yield* a!.store.createRequest(ask, requested(ask))
          yield* approve(a!.store, spent, "ana")
          // another connection holds the row to be spent, so the spend waits in flight
          const held = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holder = yield* Effect.fork(b!.sql.withTransaction(
            Effect.zipRight(
              b!.sql`SELECT request_id FROM toolgate_requests WHERE request_id = ${spent.requestId} FOR UPDATE`,
              Effect.zipRight(Deferred.succeed(held, undefined), Deferred.await(release))
            )
          ))
          yield* Deferred.await(held)
          const spend = yield* Effect.fork(a!.store.consume(spent.requestId, spent.createdAt + 10))
          yield* Effect.sleep("50 millis")
          // (in a transaction the answer would queue behind the spend, which waits for the holder)
          const lone = yield* statementsSent("BEGIN", approve(a!.store, answered, "ana")).pipe(
            Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "queued behind the spend" as const }),
            Effect.ensuring(Deferred.succeed(release, undefined))
          )
          expect(lone).toMatchObject({ result: { _tag: "Resolved" }, statements: 0 })
          yield* Fiber.join(holder)
          expect(yield* Fiber.join(spend)).toBe(true)
          yield* expectWholeLog(a!.store)
        }))

      it.live("a transaction holding the writers' lock: a step written at once is undone and waits its turn", () =>
        Effect.gen(function*() {
          const [a, b] = yield* pgProcesses(url, 2)
          const asks = [request(1), request(2), request(3)]
          for (const ask of asks) yield* a!.store.createRequest(ask, requested(ask))
          // another process's transaction takes the writers' lock and holds it a while
          const held = yield* Deferred.make<void>()
          const holder = yield* Effect.fork(b!.sql.withTransaction(
            Effect.zipRight(
              b!.store.append([decision(1)]),
              Effect.zipRight(Deferred.succeed(held, undefined), Effect.sleep("300 millis"))
            )
          ))
          yield* Deferred.await(held)
          // a claim (its row rewritten before the number is refused) and a new request
          const answered = yield* approve(a!.store, asks[0]!, "ana")
          const later = request(4)
          const created = yield* a!.store.createRequest(later, requested(later))
          yield* Fiber.join(holder)
          expect(answered).toMatchObject({ _tag: "Resolved", request: { status: "approved" } })
          expect(created._tag).toBe("Created")
          const events = yield* expectWholeLog(a!.store)
          expect(events.map((event) => event.type)).toEqual([
            "approval.requested",
            "approval.requested",
            "approval.requested",
            "decision",
            "approval.resolved",
            "approval.requested"
          ])
        }))
    })
)
