/**
 * Two store instances on one database, each with its own connection, as two processes would
 * have: exactly-once answers and requests enforced by the database, wake-ups across instances,
 * and a log that a tailer reads in commit order. On SQLite, and on PostgreSQL when
 * `TOOLGATE_PG_URL` is set.
 */
import type { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import type { ApprovalStore as Store } from "@tool-gate/core"
import { SqlApprovalStore } from "@tool-gate/core"
import { expect } from "bun:test"
import { Chunk, Deferred, Effect, Layer, Option, Queue, Ref, type Scope, Stream } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"
import { approval, decision, open, request, requested, resolved } from "./fixtures.js"

/** A fresh database, and a way to open `n` stores on it, each with its own connection. */
type Opener = Effect.Effect<
  (n: number) => Effect.Effect<ReadonlyArray<Store.Service>, unknown, Scope.Scope>,
  unknown,
  Scope.Scope
>

// all at once, as processes starting together would: they race to migrate a new database
const openMany = <E>(n: number, layer: () => Layer.Layer<Store.ApprovalStore | SqlClient.SqlClient, E>) =>
  Effect.forEach(Array.from({ length: n }), () => Effect.map(open(layer()), (opened) => opened.store), {
    concurrency: "unbounded"
  })

const sqlite: Opener = Effect.map(
  tempDir,
  (dir) => (n: number) => openMany(n, () => storeOver(sqliteClient(join(dir, "toolgate.db"))))
)

const postgres = (url: string): Opener =>
  Effect.map(
    pgSchema(url),
    (schemaUrl) => (n: number) => openMany(n, () => pgStoreOver(pgClient(schemaUrl), "toolgate_test_processes"))
  )

const suite = (name: string, opener: Opener) =>
  describe(`SqlApprovalStore across instances (${name})`, () => {
    const stores = (n: number) => Effect.flatMap(opener, (openN) => openN(n))

    it.live("instances opening a new database at once all migrate it, once", () =>
      Effect.gen(function*() {
        const opened = yield* stores(4)
        yield* opened[0]!.append([decision(1)])
        for (const store of opened) expect(yield* store.lastSeq).toBe(1)
      }))

    it.live("racing answers: exactly one instance resolves each request, the other gets NotPending", () =>
      Effect.gen(function*() {
        const [a, b] = yield* stores(2)
        const requests = Array.from({ length: 25 }, (_, i) => request(i))
        yield* Effect.forEach(requests, (r) => a!.createRequest(r, requested(r)))
        const results = yield* Effect.forEach(
          requests,
          (r) =>
            Effect.all([
              a!.resolve(r.requestId, approval(r, "a"), resolved(r, "a")),
              b!.resolve(r.requestId, approval(r, "b"), resolved(r, "b"))
            ], { concurrency: 2 }),
          { concurrency: "unbounded" }
        )
        for (const pair of results) {
          expect(pair.map((result) => result._tag).sort()).toEqual(["NotPending", "Resolved"])
          const winner = pair.find((result) => result._tag === "Resolved")!
          const loser = pair.find((result) => result._tag === "NotPending")!
          expect(loser.request).toEqual(winner.request)
        }
        const events = (yield* b!.events()).filter((e) => e.type === "approval.resolved")
        expect(events.map((e) => e.requestId).sort()).toEqual(requests.map((r) => r.requestId).sort())
        expect(yield* a!.listPending()).toEqual([])
      }))

    it.live("racing requests for one tool call: one is created, both callers get it", () =>
      Effect.gen(function*() {
        const [a, b] = yield* stores(2)
        const results = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) =>
            Effect.all([
              a!.createRequest(request(1_000 + i, { callId: `c${i}` }), requested(request(1_000 + i))),
              b!.createRequest(request(2_000 + i, { callId: `c${i}` }), requested(request(2_000 + i)))
            ], { concurrency: 2 }),
          { concurrency: "unbounded" }
        )
        for (const [x, y] of results) {
          expect([x!._tag, y!._tag].sort()).toEqual(["Created", "Existing"])
          expect(x!._tag !== "Decided" && x!._tag !== "Covered" && y!._tag !== "Decided" && y!._tag !== "Covered").toBe(
            true
          )
          expect((x as { request: unknown }).request).toEqual((y as { request: unknown }).request)
        }
        expect(yield* a!.listPending()).toHaveLength(20)
        expect((yield* b!.events()).filter((e) => e.type === "approval.requested")).toHaveLength(20)
      }))

    it.live("a subscriber on one instance is woken by a commit on the other", () =>
      Effect.gen(function*() {
        const [a, b] = yield* stores(2)
        const hints = yield* b!.subscribe
        yield* Effect.sleep("20 millis")
        const [event] = yield* a!.append([decision(1)])
        // a hint is a wake-up: the reader then finds the other instance's commit in the log
        yield* Queue.take(hints).pipe(Effect.timeout("2 seconds"))
        expect((yield* b!.events({ afterSeq: event!.seq - 1 })).map((e) => e.toolCallId)).toEqual<unknown>(["d_1"])
      }))

    it.live("a tailer reading seq > last sees every event once, in order, while two instances write", () =>
      Effect.gen(function*() {
        const [a, b, reader] = yield* stores(3)
        const total = 200
        const seen: Array<number> = []
        // as the gate's tailer does: read after the last seq seen whenever the store hints
        const hints = yield* reader!.subscribe
        const tail = Effect.gen(function*() {
          while (seen.length < total) {
            const page = yield* reader!.events({ afterSeq: seen[seen.length - 1] ?? 0 })
            for (const event of page) seen.push(event.seq)
            if (page.length === 0) yield* Queue.take(hints)
          }
        })
        const write = (store: Store.Service, offset: number) =>
          Effect.forEach(
            Array.from({ length: total / 2 }, (_, i) => offset + i),
            (n) => store.append([decision(n)]),
            { concurrency: 8, discard: true }
          )
        yield* Effect.all([tail, write(a!, 0), write(b!, 10_000)], { concurrency: "unbounded" }).pipe(
          Effect.timeout("20 seconds")
        )
        const log = (yield* reader!.events()).map((e) => e.seq)
        expect(seen).toEqual(log)
        expect(new Set(seen).size).toBe(total)
      }))
  })

suite("sqlite", sqlite)

describePostgres("store instances tests", (url) => suite("postgres", postgres(url)))

describe("SqlApprovalStore change feed", () => {
  it.live("the feed runs only while someone is subscribed, and local commits hint without it", () =>
    Effect.gen(function*() {
      const running = yield* Ref.make(0)
      const signals = yield* Queue.unbounded<undefined>()
      // the feed says when it starts and stops: the test waits for that, not for time to pass
      const started = yield* Queue.unbounded<void>()
      const stopped = yield* Queue.unbounded<void>()
      const feed = Layer.succeed(SqlApprovalStore.SqlChangeFeed, {
        onCommit: () => Effect.void,
        changes: Stream.fromQueue(signals).pipe(
          Stream.onStart(Effect.zipRight(Ref.update(running, (n) => n + 1), Queue.offer(started, undefined))),
          Stream.ensuring(Effect.zipRight(Ref.update(running, (n) => n - 1), Queue.offer(stopped, undefined)))
        )
      })
      const dir = yield* tempDir
      const { store } = yield* open(
        SqlApprovalStore.layer().pipe(
          Layer.provide(feed),
          Layer.provideMerge(sqliteClient(join(dir, "toolgate.db")))
        )
      )
      expect(yield* Ref.get(running)).toBe(0)
      const received = yield* Deferred.make<ReadonlyArray<number>>()
      yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* store.subscribe
        const second = yield* store.subscribe
        yield* Queue.take(started).pipe(Effect.timeout("5 seconds"))
        expect(yield* Ref.get(running)).toBe(1)
        // a burst of commits leaves one hint per subscriber
        yield* store.append([decision(1)])
        yield* store.append([decision(2)])
        yield* Deferred.succeed(received, [
          ...Chunk.toArray(yield* Queue.takeAll(first)),
          ...Chunk.toArray(yield* Queue.takeAll(second))
        ])
      }))
      expect(yield* Deferred.await(received)).toEqual([1, 1])
      yield* Queue.take(stopped).pipe(Effect.timeout("5 seconds"))
      expect(yield* Ref.get(running)).toBe(0)
      expect(yield* Queue.size(started)).toBe(0)
    }))

  it.live("a signal naming a seq already hinted wakes no reader; a later seq does, and an unknown one once another connection committed", () =>
    Effect.gen(function*() {
      const signals = yield* Queue.unbounded<number | undefined>()
      const feedOf = (changes: Stream.Stream<number | undefined>) =>
        Layer.succeed(SqlApprovalStore.SqlChangeFeed, { onCommit: () => Effect.void, changes })
      const file = join(yield* tempDir, "toolgate.db")
      const storeOn = (changes: Stream.Stream<number | undefined>) =>
        open(SqlApprovalStore.layer().pipe(Layer.provide(feedOf(changes)), Layer.provideMerge(sqliteClient(file))))
      const { store } = yield* storeOn(Stream.fromQueue(signals))
      const other = yield* storeOn(Stream.never)
      yield* Effect.scoped(Effect.gen(function*() {
        const hints = yield* store.subscribe
        yield* store.append([decision(1)])
        expect(yield* Queue.take(hints)).toBe(1)
        // the feed echoes the local commit, then another process's: a reader holds one hint at
        // most, so had the echo woken it, the next hint would still read 1
        yield* Queue.offer(signals, 1)
        yield* Queue.offer(signals, 7)
        expect(yield* Queue.take(hints).pipe(Effect.timeout("5 seconds"))).toBe(7)
        // a signal naming no seq after this connection's own commit only (a file watch seeing it;
        // the commit hints nothing itself: its seq is below the 7 already hinted)
        yield* store.append([decision(2)])
        yield* Queue.offer(signals, undefined)
        expect(yield* Queue.take(hints).pipe(Effect.timeout("300 millis"), Effect.option)).toEqual(Option.none())
        // ... and after another connection's commit
        yield* other.store.append([decision(3)])
        yield* Queue.offer(signals, undefined)
        expect(yield* Queue.take(hints).pipe(Effect.timeout("5 seconds"))).toBe(7)
      }))
    }))

  it.live("the notify feed listens again after LISTEN fails, and signals what it hears", () =>
    Effect.gen(function*() {
      const attempts = yield* Ref.make(0)
      const listener: SqlApprovalStore.Listener = {
        listen: (channel) =>
          Stream.unwrap(Effect.map(Ref.getAndUpdate(attempts, (n) => n + 1), (n) =>
            n === 0
              ? Stream.fail(new SqlError({ message: "connection refused" }))
              : Stream.make(`${channel}:1`).pipe(Stream.concat(Stream.never))))
      }
      const feed = yield* SqlApprovalStore.makeNotifyFeed(listener, { fallbackInterval: "1 hour" }).pipe(
        Effect.provide(sqliteClient(join(yield* tempDir, "toolgate.db")))
      )
      yield* feed.changes.pipe(Stream.take(1), Stream.runDrain, Effect.timeout("5 seconds"))
      expect(yield* Ref.get(attempts)).toBe(2)
    }))
})
