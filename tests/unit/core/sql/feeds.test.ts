/**
 * The change feeds carry a commit of one store instance to the subscribers of another, by
 * themselves: the SQLite file feed (the file's change) and the PostgreSQL LISTEN/NOTIFY feed, each
 * with its fallback timer pushed out of reach, so a hint can only come from the other's commit.
 */
import { PgClient } from "@effect/sql-pg"
import { type ApprovalStore, SqlApprovalStore, SqlChangeFeed } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Chunk, Clock, Effect, Fiber, Layer, Option, Queue, type Scope, Stream } from "effect"
import { existsSync, readdirSync, readlinkSync, rmSync } from "node:fs"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, sqliteClient, tempDir } from "../../../support/sqlStores.js"
import { decision, open } from "./fixtures.js"

const noFallback = "1 hour"

/** A store instance on the SQLite file, woken by the file feed alone. */
const fileFeedInstance = (file: string) =>
  open(
    SqlApprovalStore.layer({ clock: "caller" }).pipe(
      Layer.provide(ToolGateSqlite.layerFileFeed(file, noFallback)),
      Layer.provideMerge(sqliteClient(file))
    )
  )

/**
 * `writer` commits until `reader`'s subscription is hinted (a feed may start listening after the
 * first commits); then the reader finds the commit that woke it. Fails if no hint ever comes.
 */
const wokenAcross = <E>(
  opened: Effect.Effect<ReadonlyArray<{ readonly store: ApprovalStore.Service }>, E, Scope.Scope>
) =>
  Effect.gen(function*() {
    const [writer, reader] = yield* opened
    const hints = yield* reader!.store.subscribe
    let woken = Option.none<number>()
    for (let n = 1; n <= 50 && Option.isNone(woken); n++) {
      yield* writer!.store.append([decision(n)])
      woken = yield* Queue.take(hints).pipe(Effect.timeout("200 millis"), Effect.option)
    }
    expect(Option.isSome(woken)).toBe(true)
    const seen = yield* reader!.store.events({ afterSeq: 0 })
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.every((event) => event.toolCallId?.startsWith("d_"))).toBe(true)
  })

describe("change feeds across store instances", () => {
  it.live("SQLite: the file feed wakes another instance's subscriber on a commit", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      const instance = () => fileFeedInstance(file)
      yield* wokenAcross(Effect.all([instance(), instance()]))
    }), 30_000)
})

describe("change feeds and this instance's own commits", () => {
  it.live(
    "SQLite: the file's change after the instance's own commit hints no reader again; another's does",
    () =>
      Effect.gen(function*() {
        const file = join(yield* tempDir, "toolgate.db")
        const instance = () => fileFeedInstance(file)
        const [own, other] = yield* Effect.all([instance(), instance()])
        const hints = yield* own!.store.subscribe
        // the file watch starts with the subscription: let its first signals pass
        yield* Effect.sleep("200 millis")
        yield* Queue.takeAll(hints)
        for (let n = 1; n <= 5; n++) {
          yield* own!.store.append([decision(n)])
          // the commit's own hint, then nothing more once the watch has seen the file change
          expect(yield* Queue.take(hints)).toBe(n)
          yield* Effect.sleep("100 millis")
          expect(yield* Queue.size(hints)).toBe(0)
        }
        yield* other!.store.append([decision(6)])
        const woken = yield* Queue.take(hints).pipe(Effect.timeout("5 seconds"), Effect.option)
        expect(Option.isSome(woken)).toBe(true)
      }),
    30_000
  )
})

describe("change feeds poll beside what they watch", () => {
  /**
   * The signals of `changes` in 300 ms of wall-clock time, under the test's TestClock (which never
   * moves): polls that kept the `Clock` service's time would give none.
   */
  const signalsIn300ms = <A>(changes: Stream.Stream<A>) =>
    changes.pipe(Stream.interruptWhen(Effect.withClock(Effect.sleep("300 millis"), Clock.make())), Stream.runCollect)

  it.scoped("SQLite: the file feed signals every fallback interval of wall-clock time, with no change to the file", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "toolgate.db")
      const feed = yield* SqlChangeFeed.SqlChangeFeed.pipe(
        Effect.provide(ToolGateSqlite.layerFileFeed(file, "20 millis"))
      )
      const count = Chunk.size(yield* signalsIn300ms(feed.changes))
      expect(count).toBeGreaterThanOrEqual(3)
      expect(count).toBeLessThan(30)
    }))

  it.scoped("PostgreSQL's notify feed polls beside LISTEN, and passes on what LISTEN hears", () =>
    Effect.gen(function*() {
      const listener: SqlApprovalStore.Listener = {
        listen: (channel) => Stream.make(`${channel}:7`, "7", "not a seq").pipe(Stream.concat(Stream.never))
      }
      const feed = yield* SqlApprovalStore.makeNotifyFeed(listener, { fallbackInterval: "20 millis" }).pipe(
        Effect.provide(sqliteClient(join(yield* tempDir, "toolgate.db")))
      )
      const signals = yield* signalsIn300ms(feed.changes)
      const heard = Chunk.toArray(signals).filter((seq) => seq !== undefined)
      expect(heard).toEqual([7])
      expect(Chunk.size(signals) - heard.length).toBeGreaterThanOrEqual(3)
    }))
})

describe("the SQLite file feed of a process that commits often", () => {
  /** The feed on `file`, its signals counted into a queue while the test's scope is open. */
  const followed = (file: string) =>
    Effect.gen(function*() {
      const feed = yield* SqlChangeFeed.SqlChangeFeed.pipe(
        Effect.provide(ToolGateSqlite.layerFileFeed(file, noFallback))
      )
      const signals = yield* Queue.unbounded<void>()
      yield* feed.changes.pipe(Stream.runForEach(() => Queue.offer(signals, undefined)), Effect.forkScoped)
      // the watch starts with the stream; let its first signals pass
      yield* Effect.sleep("100 millis")
      yield* Queue.takeAll(signals)
      return { feed, signals }
    })

  /** How many descriptors this process holds of the database's files (Linux; elsewhere 0). */
  const descriptorsOf = (file: string): number => {
    if (!existsSync("/proc/self/fd")) return 0
    let count = 0
    for (const fd of readdirSync("/proc/self/fd")) {
      try {
        if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(file)) count++
      } catch {
        // closed since the listing
      }
    }
    return count
  }

  /** Another connection's commit, as another process makes it. */
  const commitElsewhere = (other: Database, n: number) => Effect.sync(() => other.run("INSERT INTO t VALUES (?)", [n]))

  it.live(
    "another process's commit is signalled while this one commits, and after it stops",
    () =>
      Effect.gen(function*() {
        const file = join(yield* tempDir, "toolgate.db")
        const other = new Database(file)
        yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
        other.run("PRAGMA journal_mode = WAL")
        other.run("CREATE TABLE t (n INTEGER)")
        const before = descriptorsOf(file)
        const { feed, signals } = yield* followed(file)

        // many commits of this process at once, then one every 10 ms: a busy writer
        yield* Effect.repeatN(feed.onCommit(1), 59)
        const busy = yield* Effect.forkScoped(
          Effect.forever(Effect.zipRight(feed.onCommit(1), Effect.sleep("10 millis")))
        )
        yield* Effect.sleep("50 millis")
        // nor does the feed open the database's files: closing a descriptor of one drops the
        // process's POSIX locks on it, SQLite's own (another connection may then rebuild the -shm
        // under this one's mapping)
        expect(descriptorsOf(file)).toBe(before)
        yield* Queue.takeAll(signals)
        yield* commitElsewhere(other, 1)
        expect(Option.isSome(yield* Queue.take(signals).pipe(Effect.timeout("5 seconds"), Effect.option))).toBe(true)

        // quiet again: the next commit elsewhere is signalled too
        yield* Fiber.interrupt(busy)
        yield* Effect.sleep("300 millis")
        yield* Queue.takeAll(signals)
        yield* commitElsewhere(other, 2)
        expect(Option.isSome(yield* Queue.take(signals).pipe(Effect.timeout("5 seconds"), Effect.option))).toBe(true)
      }),
    30_000
  )
})

describe("the SQLite file feed when its directory goes away", () => {
  it.live(
    "a busy writer whose directory is removed keeps the slow poll, and the process runs on",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const feed = yield* SqlChangeFeed.SqlChangeFeed.pipe(
          Effect.provide(ToolGateSqlite.layerFileFeed(join(dir, "toolgate.db"), "20 millis"))
        )
        const counted = yield* feed.changes.pipe(
          Stream.interruptWhen(Effect.sleep("500 millis")),
          Stream.runCount,
          Effect.fork
        )
        yield* Effect.sleep("50 millis")
        // busy: the watch closes; 100 ms after the last commit it would start again, on no directory
        yield* Effect.repeatN(feed.onCommit(1), 59)
        rmSync(dir, { recursive: true, force: true })
        yield* Effect.sleep("250 millis")
        const before = yield* Fiber.join(counted)
        expect(before).toBeGreaterThanOrEqual(10)
      }),
    30_000
  )
})

describePostgres("change feed tests", (url) =>
  describe("change feeds across store instances (postgres)", () => {
    it.live("PostgreSQL: LISTEN/NOTIFY wakes another instance's subscriber on a commit", () =>
      Effect.gen(function*() {
        const schemaUrl = yield* pgSchema(url)
        const instance = () =>
          open(
            SqlApprovalStore.layer({ clock: "caller" }).pipe(
              Layer.provide(
                SqlApprovalStore.layerNotifyFeed(PgClient.PgClient, {
                  channel: "toolgate_feed_test",
                  fallbackInterval: noFallback
                })
              ),
              Layer.provideMerge(pgClient(schemaUrl))
            )
          )
        yield* wokenAcross(Effect.all([instance(), instance()]))
      }), 30_000)
  }))
