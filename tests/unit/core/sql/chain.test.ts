/**
 * The audit log's hash chain (`AuditChain`): every store chains each event onto the one before it
 * whatever wrote it (one event or many, requests, answers, grants, decisions in flight together,
 * writes rolled back by a caller's transaction), so an untouched log verifies; on SQLite and
 * PostgreSQL, an event edited, deleted, unhashed or rechained in the database is reported with its
 * `seq`, and a recorded anchor catches what the chain alone cannot (a deleted tail, a recomputed
 * chain).
 */
import { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { ApprovalStore, AuditChain, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Context, Effect, Either, Exit, Layer, Option, Schema, type Scope } from "effect"
import { join } from "node:path"
import { migrations, tables } from "../../../../packages/core/src/internal/sqlSchema.js"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import { approval, decision, grant, granted, open, request, requested, resolved } from "./fixtures.js"

class Aborted {
  readonly _tag = "Aborted"
}

interface Opened {
  readonly store: ApprovalStore.Service
  /** the database under the store (none for memory) */
  readonly sql: SqlClient.SqlClient | undefined
}

type Opener = Effect.Effect<Opened, unknown, Scope.Scope>

const memory: Opener = Effect.map(ApprovalStore.makeMemory, (store) => ({ store, sql: undefined }))
const sqlite: Opener = Effect.flatMap(tempDir, (dir) => open(storeOver(sqliteClient(join(dir, "toolgate.db")))))
let channels = 0
const postgres = (url: string): Opener =>
  Effect.flatMap(pgSchema(url), (schemaUrl) => open(pgStoreOver(pgClient(schemaUrl), `toolgate_chain_${channels++}`)))

const verify = (store: ApprovalStore.Service, options?: AuditChain.VerifyOptions) =>
  AuditChain.verify({ pageSize: 7, ...options }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))

const policy = Policy.unsafeMake({ allow: ["ls"], requireApproval: ["deploy"] })

/** Writes of every kind, some in flight together, through a gate and the store itself. */
const writeAll = (store: ApprovalStore.Service) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.make({ policy, sweepInterval: "1 hour" }).pipe(
      Effect.provideService(ApprovalStore.ApprovalStore, store)
    )
    // allowed calls in flight together: merged into one decision insert and one event insert per batch
    yield* Effect.forEach(
      Array.from({ length: 40 }, (_, i) => i),
      (i) => gate.authorize({ id: `ls-${i}`, name: "ls", sessionKey: `s${i % 3}`, args: { path: `/${i}` } }),
      { concurrency: "unbounded", discard: true }
    )
    // requests, answered (one for the session), spent, all in flight together
    yield* Effect.forEach(
      Array.from({ length: 6 }, (_, i) => i),
      (i) =>
        Effect.gen(function*() {
          const call = { id: `deploy-${i}`, name: "deploy", sessionKey: `d${i}`, args: { to: "prod" } }
          const paused = yield* gate.authorize(call)
          if (!("requestId" in paused)) return yield* Effect.dieMessage("expected a pause")
          yield* gate.respond(paused.requestId, {
            decision: i % 2 === 0 ? "approve_once" : "approve_session",
            respondedBy: "ana"
          })
          yield* gate.authorize(call)
        }),
      { concurrency: "unbounded", discard: true }
    )
    yield* gate.clearApprovals(ToolCall.SessionKey.make("d1"), "ana")
    // the store itself: one event, several, a request with its answer, a grant
    yield* store.append([decision(1)])
    yield* store.append([decision(2), decision(3), decision(4)])
    const r = request(1)
    yield* store.createRequest(r, requested(r))
    yield* store.resolve(r.requestId, approval(r, "bo"), resolved(r, "bo"))
    yield* store.grant(grant(1), granted(1))
    return yield* store.lastSeq
  })

/** Every event's stored text and links, in order. */
const linksOf = (store: ApprovalStore.Service) => store.chainLinks(0, 1_000_000)

const chainSuite = (name: string, opener: Opener) =>
  describe(`the audit chain (${name})`, () => {
    it.live("every write chains its events onto the last one: the log verifies, its head is the last event's hash", () =>
      Effect.gen(function*() {
        const { store } = yield* opener
        expect(yield* verify(store)).toEqual({ valid: true, events: 0 })
        const lastSeq = yield* writeAll(store)
        const links = yield* linksOf(store)
        expect(links.map((l) => l.seq)).toEqual(Array.from({ length: lastSeq }, (_, i) => i + 1))
        links.forEach((l, i) => {
          expect(l.prevHash).toBe(links[i - 1]?.hash)
          expect(l.hash).toBe(AuditChain.link(l.prevHash, l.text))
        })
        // as read back, events carry the same links
        const events = yield* store.events()
        expect(events.map((e) => [e.prevHash, e.hash])).toEqual(links.map((l) => [l.prevHash, l.hash]))
        expect(yield* verify(store)).toEqual({
          valid: true,
          events: lastSeq,
          chainStart: 1,
          head: { seq: lastSeq, hash: links[lastSeq - 1]!.hash! }
        })
        // and against its own head, recorded
        const anchor = { seq: lastSeq, hash: links[lastSeq - 1]!.hash! }
        expect((yield* verify(store, { anchor })).valid).toBe(true)
      }))

    it.live("an anchor the log no longer reaches is reported as missing events, one that differs as a recomputed chain", () =>
      Effect.gen(function*() {
        const { store } = yield* opener
        yield* store.append([decision(1), decision(2), decision(3)])
        const links = yield* linksOf(store)
        expect((yield* verify(store, { anchor: { seq: 5, hash: links[2]!.hash! } })).problem).toMatchObject({
          seq: 4,
          kind: "missing"
        })
        expect((yield* verify(store, { anchor: { seq: 2, hash: links[2]!.hash! } })).problem).toMatchObject({
          seq: 2,
          kind: "anchor"
        })
      }))
  })

chainSuite("memory", memory)
chainSuite("SQLite", sqlite)
describePostgres("audit chain", (url) => chainSuite("PostgreSQL", postgres(url)))

interface Tampering {
  readonly name: string
  /** the database edited after 12 events were written; returns the anchor to check against, if any */
  readonly tamper: (sql: SqlClient.SqlClient, links: ReadonlyArray<ApprovalStore.ChainLink>) => Effect.Effect<
    Option.Option<AuditChain.Anchor>,
    unknown
  >
  readonly expected: Partial<AuditChain.Report> | { readonly problem: Partial<AuditChain.Problem> }
}

const anchorOf = (links: ReadonlyArray<ApprovalStore.ChainLink>, seq: number) =>
  Option.some({ seq, hash: links[seq - 1]!.hash! })

/** Rewrites the events from `seq` on with `edit` applied to seq's text, each rehashed onto the one before. */
const rechain = (
  sql: SqlClient.SqlClient,
  links: ReadonlyArray<ApprovalStore.ChainLink>,
  seq: number,
  edit: (text: string) => string
) =>
  Effect.gen(function*() {
    let prevHash = links[seq - 2]?.hash
    for (const l of links.slice(seq - 1)) {
      const text = l.seq === seq ? edit(l.text) : l.text
      const hash = AuditChain.link(prevHash, text)
      yield* sql`UPDATE toolgate_events SET event = ${text}, prev_hash = ${
        prevHash ?? null
      }, hash = ${hash} WHERE seq = ${l.seq}`
      prevHash = hash
    }
  })

const tamperings: ReadonlyArray<Tampering> = [
  {
    name: "untouched: the log verifies",
    tamper: () => Effect.succeed(Option.none()),
    expected: { valid: true, events: 12, chainStart: 1 }
  },
  {
    name: "an event's text edited: reported at its seq as altered",
    tamper: (sql) =>
      Effect.as(sql`UPDATE toolgate_events SET event = replace(event, '"v1"', '"v9"') WHERE seq = 5`, Option.none()),
    expected: { valid: false, events: 4, problem: { seq: 5, kind: "altered" } }
  },
  {
    name: "an event deleted: reported as the seq missing",
    tamper: (sql) => Effect.as(sql`DELETE FROM toolgate_events WHERE seq = 7`, Option.none()),
    expected: { valid: false, events: 6, problem: { seq: 7, kind: "missing" } }
  },
  {
    name: "the first events deleted: the log must start at seq 1",
    tamper: (sql) => Effect.as(sql`DELETE FROM toolgate_events WHERE seq <= 2`, Option.none()),
    expected: { valid: false, events: 0, problem: { seq: 1, kind: "missing" } }
  },
  {
    name: "an event edited and its hash recomputed: the next one no longer links to it",
    tamper: (sql, links) =>
      Effect.gen(function*() {
        const text = links[5]!.text.replace("\"v1\"", "\"v9\"")
        yield* sql`UPDATE toolgate_events SET event = ${text}, hash = ${
          AuditChain.link(links[5]!.prevHash, text)
        } WHERE seq = 6`
        return Option.none()
      }),
    expected: { valid: false, events: 6, problem: { seq: 7, kind: "brokenLink" } }
  },
  {
    name: "an event's hash removed: reported as unhashed inside the chain",
    tamper: (sql) => Effect.as(sql`UPDATE toolgate_events SET hash = NULL WHERE seq = 4`, Option.none()),
    expected: { valid: false, events: 3, problem: { seq: 4, kind: "unhashed" } }
  },
  {
    name: "an event deleted and the numbers closed up: reported as a broken link",
    tamper: (sql) =>
      Effect.gen(function*() {
        yield* sql`DELETE FROM toolgate_events WHERE seq = 6`
        for (let seq = 7; seq <= 12; seq++) yield* sql`UPDATE toolgate_events SET seq = ${seq - 1} WHERE seq = ${seq}`
        return Option.none()
      }),
    expected: { valid: false, events: 5, problem: { seq: 6, kind: "brokenLink" } }
  },
  {
    name: "a column the log's queries filter on changed (the event moved to another session): reported at its seq",
    tamper: (sql) => Effect.as(sql`UPDATE toolgate_events SET session_key = 'elsewhere' WHERE seq = 8`, Option.none()),
    expected: { valid: false, events: 7, problem: { seq: 8, kind: "columns" } }
  },
  {
    name: "the last events deleted: the chain alone cannot tell, the recorded head can",
    tamper: (sql, links) => Effect.as(sql`DELETE FROM toolgate_events WHERE seq > 10`, anchorOf(links, 12)),
    expected: { valid: false, events: 10, problem: { seq: 11, kind: "missing" } }
  },
  {
    name: "an edit with the chain recomputed after it: valid alone, caught by the recorded head",
    tamper: (sql, links) =>
      Effect.as(rechain(sql, links, 3, (text) => text.replace("\"v1\"", "\"v9\"")), anchorOf(links, 9)),
    expected: { valid: false, events: 8, problem: { seq: 9, kind: "anchor" } }
  }
]

/** 12 events written by the store, then `tampering` applied to the database; the verification. */
const tampered = (opener: Opener, tampering: Tampering) =>
  Effect.gen(function*() {
    const { sql, store } = yield* opener
    for (let i = 1; i <= 12; i += 3) yield* store.append([decision(i), decision(i + 1), decision(i + 2)])
    const anchor = yield* tampering.tamper(sql!, yield* linksOf(store))
    return yield* verify(store, { anchor: Option.getOrUndefined(anchor) })
  })

const tamperSuite = (name: string, opener: Opener) =>
  describe(`the audit chain, tampered with in ${name}`, () => {
    for (const tampering of tamperings) {
      it.live(tampering.name, () =>
        Effect.gen(function*() {
          const report = yield* tampered(opener, tampering)
          expect(report).toMatchObject(tampering.expected)
          if (report.valid) expect(report.head?.seq).toBe(12)
          else expect(report.head).toBeUndefined()
        }))
    }

    it.live("writes rolled back by the caller's transaction leave the chain whole", () =>
      Effect.gen(function*() {
        const { sql, store } = yield* opener
        for (let i = 0; i < 4; i++) {
          yield* store.append([decision(10 * i)])
          yield* Effect.flip(sql!.withTransaction(
            Effect.zipRight(store.append([decision(10 * i + 1), decision(10 * i + 2)]), Effect.fail(new Aborted()))
          ))
          // committed inside a caller's transaction, after one rolled back
          yield* sql!.withTransaction(store.append([decision(10 * i + 3)]))
        }
        expect(yield* verify(store)).toMatchObject({ valid: true, events: 8, chainStart: 1 })
      }))

    it.live("a batch rolled back and run again call by call (one of its calls failed) leaves the chain whole", () =>
      Effect.gen(function*() {
        const { store } = yield* opener
        const held = request(600)
        yield* store.createRequest(held, requested(held))
        // a request under an id another call holds dies, after its batch has chained its events
        const taken = { ...request(601), requestId: held.requestId }
        const others = Array.from({ length: 7 }, (_, n) => request(610 + n))
        const exits = yield* Effect.forEach(
          [taken, ...others],
          (ask, n) =>
            Effect.zipRight(
              Effect.yieldNow(),
              Effect.exit(Effect.zipRight(store.append([decision(n)]), store.createRequest(ask, requested(ask))))
            ),
          { concurrency: "unbounded" }
        )
        expect(exits.filter(Exit.isFailure).length).toBe(1)
        expect(yield* verify(store)).toMatchObject({ valid: true, events: 1 + 8 + 7, chainStart: 1 })
      }))

    it.live("events without hashes (written before the chain) come first: the chain starts after them", () =>
      Effect.gen(function*() {
        const { sql, store } = yield* opener
        yield* store.append([decision(1), decision(2)])
        // events without hashes, as written before the chain: the chain starts after them
        yield* sql!`UPDATE toolgate_events SET prev_hash = NULL, hash = NULL`
        yield* store.append([decision(3)])
        yield* store.append([decision(4), decision(5)])
        expect(yield* verify(store)).toMatchObject({ valid: true, events: 5, chainStart: 3, head: { seq: 5 } })
      }))
  })

tamperSuite("SQLite", sqlite)
describePostgres("audit chain tampering", (url) => tamperSuite("PostgreSQL", postgres(url)))

describe("the audit chain over a database of the previous version", () => {
  it.live("its events keep no hash; the chain starts at the first event written after the upgrade", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = join(dir, "toolgate.db")
      const admin = yield* Effect.map(Layer.build(sqliteClient(file)), Context.get(SqlClient.SqlClient))
      yield* Migrator.make({})({
        loader: Effect.map(migrations(tables("toolgate_")), (all) => all.filter(([id]) => id <= 5)),
        table: "toolgate_migrations"
      }).pipe(Effect.provideService(SqlClient.SqlClient, admin))
      for (const n of [1, 2, 3]) {
        const event = decision(n)
        yield* admin`INSERT INTO toolgate_events (at, type, outcome, session_key, tool_call_id, tool_name, event)
          VALUES (${event.at}, 'decision', 'allow', 's1', ${event.toolCallId}, 'ls', ${JSON.stringify(event)})`
      }
      const { store } = yield* open(storeOver(sqliteClient(file)))
      expect(yield* verify(store)).toEqual({ valid: true, events: 3 })
      yield* store.append([decision(4), decision(5)])
      const report = yield* verify(store)
      expect(report).toMatchObject({ valid: true, events: 5, chainStart: 4, head: { seq: 5 } })
      const [first] = yield* store.events({ afterSeq: 3, limit: 1 })
      expect(first!.prevHash).toBeUndefined()
      expect(first!.hash).toBe(AuditChain.link(undefined, (yield* store.chainLinks(3, 1))[0]!.text))
    }))
})

describe("AuditChain.AnchorFromString", () => {
  it.effect("reads SEQ:HASH and writes it back; anything else is a typed error", () =>
    Effect.gen(function*() {
      const hash = "a".repeat(64)
      const decode = Schema.decodeUnknownEither(AuditChain.AnchorFromString)
      expect(decode(`12:${hash}`)).toEqual(Either.right({ seq: 12, hash }))
      expect(Schema.encodeSync(AuditChain.AnchorFromString)({ seq: 12, hash })).toBe(`12:${hash}`)
      for (
        const bad of [hash, `0:${hash}`, `12:${hash.slice(1)}`, `12:${hash.toUpperCase()}`, `-1:${hash}`, `x:${hash}`]
      ) {
        expect(Either.isLeft(decode(bad))).toBe(true)
      }
    }))
})

const worker = join(import.meta.dir, "chainWorker.ts")

/** A `chainWorker` process: `ready` once it has opened the store, then started by `go`. */
const spawnWorker = (db: string, tag: string, calls: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = Bun.spawn([process.execPath, "--conditions=@tool-gate/source", worker, db, tag, String(calls)], {
        stdin: "pipe",
        stdout: "pipe",
        stderr: "pipe"
      })
      let opened: () => void = () => {}
      const ready = new Promise<void>((resolve) => opened = resolve)
      const stdout = (async () => {
        let text = ""
        for await (const chunk of child.stdout) {
          text += new TextDecoder().decode(chunk)
          if (text.includes("ready")) opened()
        }
        opened()
        return text
      })()
      const output = Promise.all([stdout, new Response(child.stderr).text(), child.exited])
      const go = () => {
        child.stdin.write("go\n")
        child.stdin.flush()
      }
      return { child, ready, go, output }
    }),
    ({ child }) => Effect.sync(() => child.kill())
  )

const twoProcesses = (name: string, db: Effect.Effect<string, unknown, Scope.Scope>, opener: (db: string) => Opener) =>
  describe(`the audit chain written by two processes at once (${name})`, () => {
    it.live(
      "one valid chain, whichever process wrote each event; it verifies while they write",
      () =>
        Effect.gen(function*() {
          const target = yield* db
          // opened first: the workers find the database migrated
          const { store } = yield* opener(target)
          const workers = yield* Effect.all([spawnWorker(target, "a", 240), spawnWorker(target, "b", 240)])
          // each says "ready" once its gate is open; the line it then reads starts both at once
          yield* Effect.promise(() => Promise.all(workers.map((w) => w.ready)))
          for (const w of workers) w.go()
          const ended = Effect.promise(() => Promise.all(workers.map((w) => w.output)))
          // verifications while the writers commit: each reads a prefix of the log, whole
          let checks = 0
          const outputs = yield* Effect.raceFirst(
            ended,
            Effect.forever(Effect.tap(verify(store, { pageSize: 100 }), (report) =>
              Effect.sync(() => {
                checks++
                expect(report.problem).toBeUndefined()
              })))
          )
          for (const [stdout, stderr, code] of outputs) {
            expect(stderr).toBe("")
            expect(code).toBe(0)
            expect(stdout).toContain("done")
          }
          expect(checks).toBeGreaterThan(0)
          const report = yield* verify(store, { pageSize: 100 })
          const lastSeq = yield* store.lastSeq
          // at least one event per call
          expect(lastSeq).toBeGreaterThanOrEqual(480)
          expect(report).toMatchObject({ valid: true, events: lastSeq, chainStart: 1, head: { seq: lastSeq } })
          // the processes took turns: the chain passed from one to the other and back, more than once
          const writers = (yield* store.events()).map((e) => e.sessionKey?.[0])
          expect(new Set(writers)).toEqual(new Set(["a", "b"]))
          expect(writers.filter((writer, i) => i > 0 && writer !== writers[i - 1]).length).toBeGreaterThan(2)
        }),
      120_000
    )
  })

twoProcesses(
  "SQLite",
  Effect.map(tempDir, (dir) => join(dir, "toolgate.db")),
  (file) => open(storeOver(sqliteClient(file)))
)
describePostgres(
  "audit chain across processes",
  (url) =>
    twoProcesses(
      "PostgreSQL",
      pgSchema(url),
      (schemaUrl) => open(pgStoreOver(pgClient(schemaUrl), `toolgate_chain_${channels++}`))
    )
)
