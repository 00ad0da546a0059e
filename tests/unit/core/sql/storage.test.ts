import { ApprovalRequest, AuditEvent, SessionApproval, ToolCall } from "@tool-gate/core"
import { expect } from "bun:test"
import { Arbitrary, Effect, Either, FastCheck as fc, Option, Schema } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import { approval, decision, grant, open, request, requested, resolved } from "./fixtures.js"

const openFile = (file: string, tablePrefix?: string) =>
  open(storeOver(sqliteClient(file), tablePrefix === undefined ? {} : { tablePrefix }))

describe("SqlApprovalStore storage (SQLite)", () => {
  it.live("migrations are idempotent: a file opens again (and twice at once) with its rows intact", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      yield* Effect.scoped(
        Effect.flatMap(openFile(file), ({ store }) => store.createRequest(request(1), requested(request(1))))
      )
      const { sql, store } = yield* openFile(file)
      yield* openFile(file)
      expect(yield* store.getRequest(request(1).requestId)).toEqual(Option.some(request(1)))
      expect(yield* store.lastSeq).toBe(1)
      expect(yield* sql`SELECT migration_id, name FROM toolgate_migrations ORDER BY migration_id`).toEqual([
        { migration_id: 1, name: "create_tables" },
        { migration_id: 2, name: "drop_events_request_index" },
        { migration_id: 3, name: "create_decisions" },
        { migration_id: 4, name: "gap_free_seq" },
        { migration_id: 5, name: "create_checkpoints" },
        { migration_id: 6, name: "event_hash_chain" }
      ])
      expect(yield* sql`PRAGMA journal_mode`).toEqual([{ journal_mode: "wal" }])
      expect(yield* sql`PRAGMA wal_autocheckpoint`).toEqual([{ wal_autocheckpoint: 10_000 }])
    }))

  it.live("a table prefix isolates two stores in one file", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      const a = yield* openFile(file, "a_")
      const b = yield* openFile(file, "b_")
      yield* a.store.createRequest(request(1), requested(request(1)))
      yield* a.store.grant(grant(1), AuditEvent.sessionGranted(ToolCall.SessionKey.make("s1"), "ls", 1, undefined))
      expect(yield* b.store.lastSeq).toBe(0)
      expect(yield* b.store.getRequest(request(1).requestId)).toEqual(Option.none())
      expect(yield* b.store.listPending()).toEqual([])
      expect(yield* b.store.sessionApprovals()).toEqual([])
      const created = yield* b.store.createRequest(request(1), requested(request(1)))
      expect(created._tag).toBe("Created")
      expect(created._tag === "Created" && created.event.seq).toBe(1)
      const names = (yield* a.sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
        .map((row) => row.name)
        .filter((name) => name !== "sqlite_sequence")
      const prefixed = ["checkpoint_requests", "checkpoints", "decisions", "events", "migrations", "requests"]
        .concat("session_approvals")
      expect(names).toEqual([...prefixed.map((name) => `a_${name}`), ...prefixed.map((name) => `b_${name}`)])
    }))

  it.live("rows hold the encoded entity as JSON, which decodes back to what the store returns", () =>
    Effect.gen(function*() {
      const { sql, store } = yield* openFile(join(yield* tempDir, "toolgate.db"))
      const r = request(1)
      yield* store.createRequest(r, requested(r))
      const result = yield* store.resolve(r.requestId, approval(r, "ana"), resolved(r, "ana"), grant(1))
      if (result._tag !== "Resolved") throw new Error(`expected Resolved, got ${result._tag}`)
      const [appended] = yield* store.append([decision(1)])

      const [row] = yield* sql`SELECT * FROM toolgate_requests`
      expect(row).toMatchObject({
        request_id: "req_1",
        session_key: "s1",
        tool_call_id: "call_1",
        status: "approved",
        created_at: 1_001,
        requested_seq: 1,
        expires_at: 61_001,
        warned_at: null,
        consumed_at: null
      })
      const stored = Schema.decodeUnknownSync(Schema.parseJson(ApprovalRequest.ApprovalRequest))(row!.request)
      expect(stored).toEqual(result.request)
      expect(stored.toolCall.args).toEqual({ command: "make 1", env: { CI: true, depth: [1, { x: null }] } })

      const events = yield* sql<
        { seq: number; tool_name: string; event: string; prev_hash: string | null; hash: string }
      >`SELECT * FROM toolgate_events ORDER BY seq`
      expect(events.map((e) => [e.seq, e.tool_name])).toEqual([[1, "bash"], [2, "bash"], [3, "ls"]])
      const decoded = events.map((e): AuditEvent.UnsequencedEvent =>
        Schema.decodeUnknownSync(Schema.parseJson(AuditEvent.UnsequencedEvent))(e.event)
      )
      expect(decoded[0]!.toolName).toBe("Bash")
      // with the event's links in the hash chain, from their own columns
      expect<unknown>(decoded.map((e, i) => {
        const { hash, prev_hash, seq } = events[i]!
        return prev_hash === null ? { seq, ...e, hash } : { seq, ...e, prevHash: prev_hash, hash }
      })).toEqual([...(yield* store.events())])
      expect(decoded[2]).toEqual(decision(1))
      expect(appended!.seq).toBe(3)

      const [approvalRow] = yield* sql`SELECT * FROM toolgate_session_approvals`
      expect(approvalRow).toMatchObject({ id: "sa_1", session_key: "s1", tool_name: "deploy", seq: 2, granted_seq: 2 })
      const storedApproval = Schema.decodeUnknownSync(Schema.parseJson(SessionApproval.SessionApproval))(
        approvalRow!.approval
      )
      expect([storedApproval]).toEqual([...(yield* store.sessionApprovals())])
      expect(storedApproval.seq).toBe(result.event.seq)
    }))

  it.live("any valid request round-trips through its row unchanged", () =>
    Effect.gen(function*() {
      const { store } = yield* openFile(join(yield* tempDir, "toolgate.db"))
      // Schema.Number admits NaN and ±Infinity, which JSON writes as null: such a request cannot
      // round-trip through any JSON column, so it is left out here
      const fromJson = Schema.decodeUnknownEither(Schema.parseJson(ApprovalRequest.ApprovalRequest))
      const arbitrary = Arbitrary.make(ApprovalRequest.ApprovalRequest).filter((r) =>
        Either.isRight(fromJson(JSON.stringify(r)))
      )
      const samples = fc.sample(fc.uniqueArray(arbitrary, { selector: (r) => r.requestId, maxLength: 60 }), 1)[0]!
      for (const r of samples) {
        const result = yield* store.createRequest(r, requested(r))
        // a generated (session, call id) pair may repeat: the first request for it is kept
        if (result._tag !== "Created" && result._tag !== "Existing") throw new Error(`unexpected ${result._tag}`)
        const stored = result.request
        if (result._tag === "Created") expect(stored).toEqual(r)
        // stored as JSON: a field given as `undefined` (the arbitrary makes some) reads back absent
        const asWritten = Either.getOrThrow(fromJson(JSON.stringify(stored)))
        expect(yield* store.findByToolCall(r.toolCall.sessionKey, r.toolCall.id)).toEqual(Option.some(asWritten))
      }
    }))
})
