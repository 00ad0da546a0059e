/**
 * Two copies of a workflow app on one SQLite file, each with its own in-memory engine and bridge,
 * the second in another process (Node): every workflow approved on the first wakes on the first.
 * Before wait points were kept per engine, the other copy's bridge could take a wait point, wake
 * an execution its engine does not run and close the checkpoint: the workflow never woke.
 */
import { ToolGate } from "@tool-gate/core"
import { afterAll, expect, test } from "bun:test"
import { Effect, Exit, Layer, Schedule } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { spawnWorker } from "./support/nodeProcess.js"
import { Release, replica, sessionOf } from "./support/releaseWorkflow.js"

const dir = mkdtempSync(join(tmpdir(), "toolgate-workflow-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

type Polled = Effect.Effect.Success<ReturnType<typeof Release.poll>>

const completed = (
  executionId: string
): Effect.Effect<Polled, never, Effect.Effect.Context<ReturnType<typeof Release.poll>>> =>
  Effect.flatMap(Release.poll(executionId), (result) =>
    result?._tag === "Complete"
      ? Effect.succeed(result)
      : Effect.delay(Effect.suspend(() => completed(executionId)), "10 millis"))

test("another process's bridge never strands a workflow approved here", async () => {
  const db = join(dir, "replicas.db")
  const other = await spawnWorker([db], { entry: "workflowWorker" })
  try {
    await other.next("ready")
    const ran: Array<string> = []
    const envs = Array.from({ length: 24 }, (_, i) => `region-${i}`)
    const results = await Effect.runPromise(
      Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const executions = yield* Effect.forEach(envs, (env) => Release.execute({ env }, { discard: true }))
        for (const executionId of executions) {
          const requests = yield* gate.pending({ sessionKey: sessionOf(executionId) }).pipe(
            Effect.filterOrFail((found) => found.length === 1),
            Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 1_000 })
          )
          yield* gate.respond(requests[0]!.requestId, { decision: "approve_once" })
        }
        return yield* Effect.forEach(
          executions,
          (executionId) => completed(executionId).pipe(Effect.timeout("15 seconds"))
        )
      }).pipe(Effect.provide(Layer.fresh(replica(db, ran))), Effect.scoped)
    )
    expect(results.map((result) => result?._tag === "Complete" ? result.exit : undefined)).toEqual(
      envs.map((env) => Exit.succeed(`deployed to ${env}`))
    )
    expect(ran.sort()).toEqual([...envs].sort())
    expect(other.lines.filter((line) => line.event === "ran")).toEqual([])
  } finally {
    other.kill()
  }
}, 60_000)
