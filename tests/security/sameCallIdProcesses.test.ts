/**
 * Issue 10, critical, across real processes: two Node processes on one SQLite file (and on one
 * PostgreSQL schema, with `TOOLGATE_PG_URL`) call the same 500 tool-call ids at the same time, one
 * with `ls`, the other with `rm -rf /` (denied by policy). Per id exactly one of them is judged and
 * the other is refused as a reused id; `rm -rf /` never runs; the log has one decision and one
 * `call.refused` per id and no hole in `seq`.
 */
import { ApprovalStore } from "@tool-gate/core"
import { afterAll, describe, expect, test } from "bun:test"
import { Effect, type Layer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { spawnWorker } from "../process/support/nodeProcess.js"
import { postgresUrl } from "../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver } from "../support/sqlStores.js"
import { holesIn } from "./support/outcomes.js"

const IDS = 500

const dir = mkdtempSync(join(tmpdir(), "toolgate-same-id-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let runs = 0

interface Result {
  readonly id: string
  readonly result: string
  readonly ran?: string
}

/** Reads (and, first, creates) the store as the test's own process sees it. */
const inspect = <A, E>(
  store: Layer.Layer<ApprovalStore.ApprovalStore, E>,
  f: (store: ApprovalStore.Service) => Effect.Effect<A, unknown>
) => Effect.runPromise(Effect.scoped(Effect.flatMap(ApprovalStore.ApprovalStore, f).pipe(Effect.provide(store))))

const race = async <E>(db: string, store: Layer.Layer<ApprovalStore.ApprovalStore, E>) => {
  // the tables exist before the racers start: opening a fresh file at once is another finding
  await inspect(store, (s) => s.lastSeq)
  const go = join(dir, `go-${runs++}`)
  const workers = await Promise.all(
    ["ls", "rm -rf /"].map((command) =>
      spawnWorker(["race", db, "s1", command, String(IDS), go], { entry: "sameIdWorker" })
    )
  )
  await Promise.all(workers.map((w) => w.next("ready", 60_000)))
  writeFileSync(go, "")
  const [ls, rm] = await Promise.all(workers.map((w) => w.next("done", 120_000)))
  const byId = (line: typeof ls) => new Map((line!.results as Array<Result>).map((r) => [r.id, r]))
  const lsResults = byId(ls)
  const rmResults = byId(rm)

  // the attack: the denied command never reached the tool, in either process
  const leaked = [...lsResults.values(), ...rmResults.values()].filter((r) => r.ran === "rm -rf /")
  expect({ rmRanForIds: leaked.length, of: IDS }).toEqual({ rmRanForIds: 0, of: IDS })
  for (const r of lsResults.values()) if (r.result === "ran") expect(r.ran).toBe("ls")
  // per id: one judged (ls ran, or rm denied), the other refused
  const shapes = new Map<string, number>()
  for (let i = 0; i < IDS; i++) {
    const shape = `${lsResults.get(`id-${i}`)!.result}/${rmResults.get(`id-${i}`)!.result}`
    shapes.set(shape, (shapes.get(shape) ?? 0) + 1)
  }
  const unexpected = [...shapes].filter(([shape]) =>
    !["ran/InvalidToolCall:id", "InvalidToolCall:id/ToolDenied"].includes(shape)
  )
  expect(unexpected).toEqual([])

  const events = await inspect(store, (s) => s.events())
  expect(holesIn(events)).toEqual([])
  const count = (type: string) => {
    const perId = new Map<string, number>()
    for (const e of events) if (e.type === type) perId.set(e.toolCallId!, (perId.get(e.toolCallId!) ?? 0) + 1)
    return perId
  }
  const decisions = count("decision")
  const refused = count("call.refused")
  for (let i = 0; i < IDS; i++) {
    expect({ id: `id-${i}`, decisions: decisions.get(`id-${i}`) ?? 0, refused: refused.get(`id-${i}`) ?? 0 })
      .toEqual({ id: `id-${i}`, decisions: 1, refused: 1 })
  }
}

describe("two processes reuse each other's tool-call ids at the same time", () => {
  test(
    `SQLite (Node, better-sqlite3), ${IDS} ids: rm -rf / never runs, one judged and one refused per id`,
    async () => {
      const db = join(dir, "race.db")
      await race(db, storeOver(sqliteClient(db)))
    },
    240_000
  )

  const url = postgresUrl("tests in tests/security/sameCallIdProcesses.test.ts")
  ;(url === undefined ? test.skip : test)(
    `PostgreSQL, ${IDS} ids: rm -rf / never runs, one judged and one refused per id`,
    () =>
      Effect.runPromise(
        Effect.scoped(Effect.flatMap(pgSchema(url!), (schemaUrl) =>
          Effect.promise(() =>
            race(schemaUrl, pgStoreOver(pgClient(schemaUrl), "toolgate_changes"))
          )))
      ),
    240_000
  )
})
