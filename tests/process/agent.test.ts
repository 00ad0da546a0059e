/**
 * The release agent across real processes sharing a SQLite file: it pauses and exits in one
 * process (Node, better-sqlite3), a human answers from another (Bun, bun:sqlite), and a third
 * (Node) resumes it from the checkpoint to the model's final answer.
 */
import { ApprovalStore } from "@tool-gate/core"
import { afterAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sqliteClient, storeOver } from "../support/sqlStores.js"
import { pastDeadline, runWorker, spawnWorker } from "./support/nodeProcess.js"

const dir = mkdtempSync(join(tmpdir(), "toolgate-agent-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshDb = () => join(dir, `agent-${files++}.db`)

const node = { entry: "agentWorker" } as const
const bun = { entry: "agentWorker", runtime: "bun" } as const

const eventTypes = (db: string) =>
  Effect.runPromise(Effect.scoped(
    Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.events()).pipe(
      Effect.provide(storeOver(sqliteClient(db)))
    )
  )).then((events) => events.map((e) => `${e.type} ${e.outcome} ${e.toolName}`))

const policyDenial = "drop_database: not done (policy: Databases are dropped by a person, after a backup.)"

describe("an agent paused in one process, answered from another, resumed in a third", () => {
  test(
    "approved: the third process runs the deploy once and the model answers; a second resume is refused",
    async () => {
      const db = freshDb()
      const paused = await runWorker(["run", db], node)
      expect(paused).toMatchObject({ event: "paused", ttlMs: [600_000] })
      const [requestId] = paused.requestIds as Array<string>
      const token = String(paused.token)

      // Nobody has answered: the checkpoint refuses to resume, and stays.
      expect(await runWorker(["resume", db, token], node)).toMatchObject({ event: "refused", error: "RequestPending" })

      expect(await runWorker(["answer", db, requestId!, "approve_once"], bun)).toMatchObject({ status: "approved" })
      const done = await runWorker(["resume", db, token], node)
      expect(done).toMatchObject({ event: "completed", turns: 2 })
      expect(done.text).toBe(
        "Release report. read_file: ## 1.2.0 - faster builds, login redirect fixed; deploy: deployed 1.2.0 to production; " +
          `${policyDenial}.`
      )
      expect(await runWorker(["resume", db, token], node)).toMatchObject({ event: "refused", error: "AlreadyResumed" })
      expect(await eventTypes(db)).toEqual([
        "decision allow read_file",
        "approval.requested pending deploy",
        "decision deny drop_database",
        "approval.resolved approved deploy"
      ])
    },
    60_000
  )

  test(
    "a resume killed right after the deploy ran: refused to others while its lease runs, retried by its owner without deploying twice",
    async () => {
      const db = freshDb()
      const paused = await runWorker(["run", db], node)
      const [requestId] = paused.requestIds as Array<string>
      const token = String(paused.token)
      await runWorker(["answer", db, requestId!, "approve_once"], bun)
      const crashing = await spawnWorker(["crash", db, token, "worker-a"], node)
      expect(await crashing.next("ran")).toMatchObject({ tool: "deploy" })
      expect(await crashing.exited).not.toBe(0)

      expect(await runWorker(["resume", db, token, "worker-b"], node)).toMatchObject({
        event: "refused",
        error: "CheckpointClaimed"
      })
      const done = await runWorker(["resume", db, token, "worker-a"], node)
      expect(done).toMatchObject({ event: "completed", turns: 2 })
      // the deploy ran in the process that died; the retry tells the model so instead of deploying again
      expect(done.text).toContain("read_file: ## 1.2.0")
      expect(done.text).not.toContain("deployed")
      expect(await runWorker(["resume", db, token, "worker-a"], node)).toMatchObject({
        event: "refused",
        error: "AlreadyResumed"
      })
    },
    60_000
  )

  test("denied: the human's reason reaches the model, and the deploy never runs", async () => {
    const db = freshDb()
    const paused = await runWorker(["run", db], node)
    const [requestId] = paused.requestIds as Array<string>
    await runWorker(["answer", db, requestId!, "deny", "Release freeze until Monday."], bun)
    const done = await runWorker(["resume", db, String(paused.token)], node)
    expect(done.text).toContain("deploy: not done (denied: Release freeze until Monday.)")
    expect(done.text).toContain(policyDenial)
    expect(done.text).not.toContain("deployed")
  }, 60_000)

  test("expired: nobody answered within the TTL; the resumed model reads that approval timed out", async () => {
    const db = freshDb()
    const paused = await runWorker(["run", db, "300"], node)
    expect(paused).toMatchObject({ event: "paused", ttlMs: [300] })
    // No process runs while the TTL passes: expiry is settled on the next read.
    await pastDeadline(Math.max(...paused.expiresAt as Array<number>))
    const [requestId] = paused.requestIds as Array<string>
    expect(await runWorker(["answer", db, requestId!, "approve_once"], bun)).toMatchObject({
      event: "refused",
      error: "RequestExpired"
    })
    const done = await runWorker(["resume", db, String(paused.token)], node)
    expect(done.text).toContain("deploy: not done (expired: approval timed out after 300 ms)")
    expect(await eventTypes(db)).toContain("approval.expired expired deploy")
  }, 60_000)
})
