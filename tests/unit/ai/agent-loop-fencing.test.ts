/**
 * Leases fence: a resumed turn whose owner stalls past its lease (the whole process: its store
 * access too, so it cannot renew) is taken over by another owner; when the old owner wakes, it
 * stops with `CheckpointClaimed` before its next tool call or model turn, so nothing of the turn
 * runs twice. On every checkpoint store, on the TestClock.
 */
import { AgentLoop, ScriptedModel } from "@tool-gate/ai"
import { ApprovalStore, Checkpoint, CheckpointStore, SqlCheckpointStore, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { describePostgres } from "../../support/postgresSuite.js"
import { pgStore, tempDir } from "../../support/sqlStores.js"
import { call, deploy, policy, reportSeen, seen, Tools } from "./fixtures.js"

const session = { sessionKey: "s-1", agentId: "release-bot" }
const agent = AgentLoop.make({ toolkit: Tools })

/** A store whose every operation waits while `latch` is closed: the process holding it is stalled. */
const stalling = (store: CheckpointStore.Service, latch: Effect.Latch): CheckpointStore.Service =>
  Object.fromEntries(
    Object.entries(store).map(([name, operation]) => [
      name,
      (...args: Array<unknown>) =>
        Effect.zipRight(latch.await, (operation as (...args: Array<unknown>) => Effect.Effect<unknown>)(...args))
    ])
  ) as unknown as CheckpointStore.Service

/**
 * The world: `read_file("slow")` stalls its whole process the first time it runs (closing the
 * latch, then waiting for `release`); `ran` lists every handler run.
 */
const world = (
  stores: () => Layer.Layer<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore, unknown>,
  script: ReadonlyArray<ScriptedModel.Step>
) => {
  const ran: Array<string> = []
  const latch = Effect.runSync(Effect.makeLatch(true))
  const stalled = Effect.runSync(Deferred.make<void>())
  const release = Effect.runSync(Deferred.make<void>())
  let slowRuns = 0
  const layer = Layer.mergeAll(
    Tools.toLayer({
      read_file: ({ path }) =>
        Effect.gen(function*() {
          if (path === "slow" && slowRuns++ === 0) {
            yield* latch.close
            yield* Deferred.succeed(stalled, undefined)
            yield* Deferred.await(release)
          }
          ran.push(`read_file ${path}`)
          return `contents of ${path}`
        }),
      deploy: ({ env }) => Effect.sync(() => (ran.push(`deploy ${env}`), `deployed to ${env}`)),
      drop_database: ({ name }) => Effect.sync(() => (ran.push(`drop ${name}`), `dropped ${name}`))
    }),
    ScriptedModel.layer(script),
    Checkpoint.layerWithGate({ policy, sweepInterval: "30 seconds" }).pipe(Layer.provideMerge(stores()))
  )
  /** Runs `effect` as the stalling process: its checkpoints go through the latch. */
  const asStallingProcess = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const store = yield* CheckpointStore.CheckpointStore
      const checkpoints = yield* Checkpoint.makeService.pipe(
        Effect.provideService(CheckpointStore.CheckpointStore, stalling(store, latch))
      )
      return yield* Effect.provideService(effect, Checkpoint.Checkpoints, checkpoints)
    })
  const wake = Effect.zipRight(latch.open, Deferred.succeed(release, undefined))
  return { ran, layer, asStallingProcess, stalled: Deferred.await(stalled), wake }
}

const fencingSuite = (
  name: string,
  stores: () => Layer.Layer<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore, unknown>
) =>
  describe(`AgentLoop leases fence (${name})`, () => {
    it.scoped("the old owner's next tool call does not run after a new owner took over: CheckpointClaimed", () => {
      const { asStallingProcess, layer, ran, stalled, wake } = world(stores, [
        { toolCalls: [deploy("c1", "production")] },
        { toolCalls: [call("c2", "read_file", { path: "slow" }), call("c3", "read_file", { path: "after" })] },
        reportSeen
      ])
      return Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const paused = yield* agent.run("ship it", session)
        if (paused._tag !== "Paused") throw new Error(`expected Paused, got ${paused._tag}`)
        yield* gate.respond(paused.requests[0]!.requestId, { decision: "approve_once" })
        const old = yield* Effect.fork(
          asStallingProcess(agent.resume(paused.token, { owner: "worker-a", lease: "1 minute" }))
        )
        yield* stalled
        // worker-a stalls past its lease: it cannot renew; worker-b takes the turn over and finishes it
        yield* TestClock.adjust("61 seconds")
        const taken = yield* agent.resume(paused.token, { owner: "worker-b", lease: "1 minute" })
        if (taken._tag !== "Completed") throw new Error(`expected Completed, got ${taken._tag}`)
        expect(seen(taken.text).map((result) => result.id)).toEqual(["c2", "c3"])
        expect(ran).toEqual(["deploy production", "read_file slow", "read_file after"])
        // worker-a wakes inside c2: it stops before c3
        yield* wake
        const stopped = yield* Effect.flip(Fiber.join(old))
        expect(ran.filter((run) => run === "read_file after")).toHaveLength(1)
        expect(stopped).toMatchObject({ _tag: "CheckpointClaimed", owner: "worker-b" })
      }).pipe(Effect.provide(layer))
    })

    it.scoped("the old owner's next model turn does not happen after a new owner took over: CheckpointClaimed", () => {
      let finalTurns = 0
      const { asStallingProcess, layer, ran, stalled, wake } = world(stores, [
        { toolCalls: [deploy("c1", "production")] },
        { toolCalls: [call("c2", "read_file", { path: "slow" })] },
        (prompt) => {
          finalTurns++
          return reportSeen(prompt)
        }
      ])
      return Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const paused = yield* agent.run("ship it", session)
        if (paused._tag !== "Paused") throw new Error(`expected Paused, got ${paused._tag}`)
        yield* gate.respond(paused.requests[0]!.requestId, { decision: "approve_once" })
        const old = yield* Effect.fork(
          asStallingProcess(agent.resume(paused.token, { owner: "worker-a", lease: "1 minute" }))
        )
        yield* stalled
        yield* TestClock.adjust("61 seconds")
        const taken = yield* agent.resume(paused.token, { owner: "worker-b", lease: "1 minute" })
        expect(taken._tag).toBe("Completed")
        expect(finalTurns).toBe(1)
        yield* wake
        const stopped = yield* Effect.flip(Fiber.join(old))
        expect(finalTurns).toBe(1)
        expect(stopped).toMatchObject({ _tag: "CheckpointClaimed", owner: "worker-b" })
        expect(ran).toEqual(["deploy production", "read_file slow", "read_file slow"])
      }).pipe(Effect.provide(layer))
    })
  })

fencingSuite("memory", () => Layer.merge(ApprovalStore.layerMemory, CheckpointStore.layerMemory))
fencingSuite(
  "sqlite",
  () =>
    Layer.unwrapScoped(
      Effect.map(tempDir, (dir) => ToolGateSqlite.layerStore({ filename: join(dir, "gate.db"), clock: "caller" }))
    )
)
describePostgres(
  "AgentLoop fencing tests",
  (url) => fencingSuite("postgres", () => SqlCheckpointStore.layer().pipe(Layer.provideMerge(pgStore(url))))
)
