/**
 * Lease renewal under real transient store errors: a SQLite write lock held by another connection
 * (busy), a PostgreSQL connection terminated mid-renewal. The renewal logs each failure and retries
 * with backoff; the fence before each act retries too; a renewal refused because another owner
 * took the checkpoint over is logged and stops the turn before its next act. On the TestClock; the
 * log lines are collected by a Logger.
 */
import { SqlClient } from "@effect/sql"
import { AgentLoop, ScriptedModel } from "@tool-gate/ai"
import { Checkpoint, SqlCheckpointStore, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Deferred, Effect, Fiber, HashMap, Layer, Logger, TestClock } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { describePostgres } from "../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, tempDir } from "../../support/sqlStores.js"
import { deploy, policy, reportSeen, seen, Tools } from "./fixtures.js"
import type { Stores } from "./stores.js"

const agent = AgentLoop.make({ toolkit: Tools })
const session = { sessionKey: "s-1", agentId: "release-bot" }

const completed = (result: AgentLoop.Result) => {
  if (result._tag !== "Completed") throw new Error(`expected Completed, got ${result._tag}`)
  return result
}

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

/** A logger that keeps the loop's lease lines. */
const collector = () => {
  const lines: Array<Line> = []
  const logger = Logger.make<unknown, void>(({ annotations, logLevel, message }) => {
    const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
    if (text.startsWith("AgentLoop:") && text.includes("lease")) {
      lines.push({
        level: logLevel.label,
        message: text,
        annotations: Object.fromEntries(HashMap.toEntries(annotations))
      })
    }
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

/** Lets real I/O (the store's driver) happen while the TestClock stands still. */
const realPause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
const until = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000 && !done(); i++) yield* realPause
    if (!done()) throw new Error("condition not reached")
  })

/**
 * The world: deploys wait for `release` (each reports `started`); `ran` lists handler runs.
 */
const world = (stores: Stores, script: ReadonlyArray<ScriptedModel.Step>) => {
  const ran: Array<string> = []
  let started = 0
  const release = Effect.runSync(Deferred.make<void>())
  const layer = Layer.mergeAll(
    Tools.toLayer({
      read_file: ({ path }) => Effect.sync(() => (ran.push(`read_file ${path}`), `contents of ${path}`)),
      deploy: ({ env }) =>
        Effect.sync(() => started++).pipe(
          Effect.zipRight(Deferred.await(release)),
          Effect.as(`deployed to ${env}`),
          Effect.tap(() => ran.push(`deploy ${env}`))
        ),
      drop_database: ({ name }) => Effect.sync(() => (ran.push(`drop ${name}`), `dropped ${name}`))
    }),
    ScriptedModel.layer(script),
    Checkpoint.layerWithGate({ policy, sweepInterval: "1 hour" }).pipe(Layer.provideMerge(stores()))
  )
  return { ran, layer, started: () => started, release: Deferred.succeed(release, undefined) }
}

/** Pauses on `calls`, approves every request, starts worker-a's resume (lease 1 minute) with the collector. */
const pausedAndResuming = (lines: ReturnType<typeof collector>) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const paused = yield* agent.run("ship it", session)
    if (paused._tag !== "Paused") throw new Error(`expected Paused, got ${paused._tag}`)
    for (const request of paused.requests) yield* gate.respond(request.requestId, { decision: "approve_once" })
    const resuming = yield* Effect.fork(
      agent.resume(paused.token, { owner: "worker-a", lease: "1 minute" }).pipe(Effect.provide(lines.layer))
    )
    return { token: paused.token, resuming }
  })

/** A SQLite file whose store gives up on a lock at once, and a second connection that can hold its write lock. */
const sqliteWithLock = () => {
  let filename = ""
  let other: Database | undefined
  const stores: Stores = () =>
    Layer.unwrapScoped(Effect.map(tempDir, (dir) => {
      filename = join(dir, "gate.db")
      return ToolGateSqlite.layerStore({ filename, clock: "caller", busyTimeoutMs: 0 })
    }))
  const lock = Effect.sync(() => {
    other = new Database(filename)
    other.run("BEGIN IMMEDIATE")
  })
  const unlock = Effect.sync(() => {
    other?.run("ROLLBACK")
    other?.close()
    other = undefined
  })
  return { stores, lock, unlock }
}

describe("AgentLoop lease renewal on a busy SQLite store", () => {
  it.scoped("a renewal that finds the database locked is logged and retried with backoff until it succeeds", () => {
    const { lock, stores, unlock } = sqliteWithLock()
    const lines = collector()
    const { layer, ran, release, started } = world(stores, [{ toolCalls: [deploy("c1", "production")] }, reportSeen])
    return Effect.gen(function*() {
      const { resuming, token } = yield* pausedAndResuming(lines)
      yield* until(() => started() === 1)
      yield* lock
      yield* TestClock.adjust("20 seconds")
      yield* until(() => lines.lines.length === 1)
      yield* TestClock.adjust("100 millis")
      yield* until(() => lines.lines.length === 2)
      expect(lines.lines.map((line) => [line.level, line.message, line.annotations.retryIn])).toEqual([
        ["WARN", "AgentLoop: lease renewal failed; retrying", "100ms"],
        ["WARN", "AgentLoop: lease renewal failed; retrying", "200ms"]
      ])
      expect(lines.lines[0]!.annotations).toMatchObject({ token, owner: "worker-a" })
      expect(String(lines.lines[0]!.annotations.error)).toContain("renew checkpoint lease")
      yield* unlock
      yield* TestClock.adjust("200 millis")
      // renewed at 20.3 s: past the first lease's end (60 s) another owner is still refused
      yield* TestClock.adjust("20 seconds")
      yield* TestClock.adjust("20 seconds")
      yield* TestClock.adjust("1 second")
      const other = yield* Effect.flip(agent.resume(token, { owner: "worker-b" }))
      expect(other).toMatchObject({ _tag: "CheckpointClaimed", owner: "worker-a" })
      expect(lines.lines).toHaveLength(2)
      yield* release
      const [result] = seen(completed(yield* Fiber.join(resuming)).text)
      expect(result).toMatchObject({ id: "c1", isFailure: false })
      expect(ran).toEqual(["deploy production"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("the fence before a tool call retries a locked database, then the call runs", () => {
    const { lock, stores, unlock } = sqliteWithLock()
    const lines = collector()
    const { layer, ran, release, started } = world(stores, [
      { toolCalls: [deploy("c1", "production"), deploy("c2", "staging")] },
      reportSeen
    ])
    return Effect.gen(function*() {
      const { resuming } = yield* pausedAndResuming(lines)
      yield* until(() => started() === 1)
      yield* lock
      // c1 finishes; the fence before c2 finds the database locked
      yield* release
      yield* until(() => lines.lines.length === 1)
      expect(lines.lines[0]).toMatchObject({ level: "WARN", message: "AgentLoop: lease check failed before an act" })
      yield* unlock
      yield* TestClock.adjust("100 millis")
      const results = seen(completed(yield* Fiber.join(resuming)).text)
      expect(results.map((result) => [result.id, result.isFailure])).toEqual([["c1", false], ["c2", false]])
      expect(ran).toEqual(["deploy production", "deploy staging"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("renewals failing past the lease's end are logged; once another owner took over, the refusal is logged and the turn stops before its next act", () => {
    const { lock, stores, unlock } = sqliteWithLock()
    const lines = collector()
    const { layer, ran, release, started } = world(stores, [
      { toolCalls: [deploy("c1", "production"), deploy("c2", "staging")] },
      reportSeen
    ])
    return Effect.gen(function*() {
      const { resuming, token } = yield* pausedAndResuming(lines)
      yield* until(() => started() === 1)
      yield* lock
      // each failed retry sleeps on the TestClock: step it until the lease's end has passed
      for (let i = 0; i < 120 && !lines.lines.some((line) => line.level === "ERROR"); i++) {
        yield* TestClock.adjust("1 second")
        yield* realPause
      }
      const levels = lines.lines.map((line) => line.level)
      expect(levels).toContain("WARN")
      expect(lines.lines.at(-1)).toMatchObject({
        level: "ERROR",
        message: "AgentLoop: the lease ran out while its renewal kept failing; retrying"
      })
      yield* unlock
      // worker-b takes the lapsed lease over before worker-a's next retry
      const taken = yield* Effect.fork(agent.resume(token, { owner: "worker-b", lease: "1 minute" }))
      yield* until(() => started() === 2)
      yield* TestClock.adjust("5 seconds")
      yield* until(() => lines.lines.some((line) => line.message.startsWith("AgentLoop: lease renewal refused")))
      // worker-a's deploy of c1 ends: it stops before c2, with the refusal
      yield* release
      expect(yield* Effect.flip(Fiber.join(resuming))).toMatchObject({ _tag: "CheckpointClaimed", owner: "worker-b" })
      const results = seen(completed(yield* Fiber.join(taken)).text)
      expect(results.map((result) => result.id)).toEqual(["c1", "c2"])
      expect(ran.filter((run) => run === "deploy staging")).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })
})

describePostgres("AgentLoop lease tests", (url) =>
  describe("AgentLoop lease renewal on PostgreSQL", () => {
    /**
     * A renewal that waits on a row another connection locks, cut on the server by `cut`: the
     * renewal's statement cancelled (the store's call fails: the loop logs it and tries again), or
     * its connection terminated (the store runs it again on another connection, as it would after
     * a dropped one: nothing to log). Either way the lease holds and the call runs once.
     */
    const renewalCut = (cut: "pg_cancel_backend" | "pg_terminate_backend") => {
      let schemaUrl = ""
      const stores: Stores = () =>
        Layer.unwrapScoped(Effect.map(pgSchema(url), (schema) => {
          schemaUrl = schema
          return SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStoreOver(pgClient(schema), "toolgate_lease")))
        }))
      const lines = collector()
      const { layer, ran, release, started } = world(stores, [{ toolCalls: [deploy("c1", "production")] }, reportSeen])
      return Effect.gen(function*() {
        const { resuming, token } = yield* pausedAndResuming(lines)
        yield* until(() => started() === 1)
        // another connection locks the checkpoint's row, so the renewal waits on it and can be cut
        const admin = yield* Layer.build(pgClient(schemaUrl))
        const sql = (effect: Effect.Effect<unknown, unknown, SqlClient.SqlClient>) => Effect.provide(effect, admin)
        const locked = yield* Deferred.make<void>()
        const unlocked = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(sql(Effect.flatMap(SqlClient.SqlClient, (client) =>
          client.withTransaction(
            Effect.zipRight(
              client`SELECT token FROM toolgate_checkpoints WHERE token = ${token} FOR UPDATE`,
              Effect.zipRight(Deferred.succeed(locked, undefined), Deferred.await(unlocked))
            )
          ))))
        // the row is locked before the renewal is due: else the renewal could run first, wait on nothing
        yield* Deferred.await(locked)
        yield* TestClock.adjust("20 seconds")
        /** The backends whose renewal waits on the row now. */
        const waiting = Effect.map(
          sql(Effect.flatMap(SqlClient.SqlClient, (client) =>
            client<{ pid: number }>`SELECT pid FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE%claimed_until%'`)),
          (rows) => (rows as ReadonlyArray<{ pid: number }>).map((row) => row.pid)
        )
        let renewal: ReadonlyArray<number> = []
        for (let i = 0; i < 2000 && renewal.length === 0; i++) {
          renewal = yield* waiting
          if (renewal.length === 0) yield* realPause
        }
        expect(renewal).toHaveLength(1)
        yield* sql(
          Effect.flatMap(SqlClient.SqlClient, (client) => client`SELECT ${client.literal(cut)}(${renewal[0]!})`)
        )
        if (cut === "pg_cancel_backend") {
          yield* until(() => lines.lines.length === 1)
          expect(lines.lines[0]).toMatchObject({
            level: "WARN",
            message: "AgentLoop: lease renewal failed; retrying",
            annotations: { token, owner: "worker-a", retryIn: "100ms" }
          })
        } else {
          // run again by the store, on another connection: it waits on the row again
          let again: ReadonlyArray<number> = []
          for (let i = 0; i < 2000 && !(again.length === 1 && again[0] !== renewal[0]); i++) {
            again = yield* waiting
            yield* realPause
          }
          expect(again).toHaveLength(1)
          expect(again[0]).not.toBe(renewal[0])
        }
        yield* Deferred.succeed(unlocked, undefined)
        yield* Fiber.join(holder)
        yield* TestClock.adjust("100 millis")
        yield* TestClock.adjust("20 seconds")
        yield* TestClock.adjust("20 seconds")
        yield* TestClock.adjust("1 second")
        const other = yield* Effect.flip(agent.resume(token, { owner: "worker-b" }))
        expect(other).toMatchObject({ _tag: "CheckpointClaimed", owner: "worker-a" })
        expect(lines.lines).toHaveLength(cut === "pg_cancel_backend" ? 1 : 0)
        yield* release
        const [result] = seen(completed(yield* Fiber.join(resuming)).text)
        expect(result).toMatchObject({ id: "c1", isFailure: false })
        expect(ran).toEqual(["deploy production"])
      }).pipe(Effect.provide(layer))
    }

    it.scoped("a renewal the server cancels is logged and tried again: the lease holds", () =>
      renewalCut("pg_cancel_backend"))

    it.scoped("a renewal whose connection is terminated runs again on another connection: nothing to log, the lease holds", () =>
      renewalCut("pg_terminate_backend"))
  }))
