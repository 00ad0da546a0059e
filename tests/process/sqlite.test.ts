/**
 * Real Node processes sharing one SQLite file: answers from another process, recovery after
 * SIGKILL, racing responders, and expiry of requests whose TTL passed while nothing ran.
 */
import { type ApprovalRequest, ApprovalStore } from "@tool-gate/core"
import { afterAll, describe, expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sqliteClient, storeOver } from "../support/sqlStores.js"
import { pastDeadline, runWorker, spawnWorker } from "./support/nodeProcess.js"

const dir = mkdtempSync(join(tmpdir(), "toolgate-process-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshDb = () => join(dir, `gate-${files++}.db`)

/** Reads the file as the test's own (Bun) process: the store's view of what the workers did. */
const inspect = <A>(db: string, f: (store: ApprovalStore.Service) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(
    Effect.flatMap(ApprovalStore.ApprovalStore, f).pipe(
      Effect.provide(storeOver(sqliteClient(db)))
    )
  ))

describe("processes sharing a SQLite file (Node, better-sqlite3)", () => {
  test("a waiter in one process is answered from another, and runs the tool", async () => {
    const db = freshDb()
    const waiter = await spawnWorker(["wait", db, "s1", "call-1"])
    const paused = await waiter.next("paused")
    const answer = await runWorker(["answer", db, String(paused.requestId), "approve_once", "ana"])
    expect(answer).toMatchObject({ event: "answered", status: "approved" })
    expect(await waiter.next("resolved")).toMatchObject({ status: "approved" })
    expect(await waiter.next("gate")).toMatchObject({ result: "ran" })
    expect(await waiter.exited).toBe(0)
    const events = await inspect(db, (store) => store.events())
    expect(events.map((e) => e.type)).toEqual(["approval.requested", "approval.resolved"])
    expect(events[1]!.actor).toBe("ana")
  })

  test(
    "what a waiter returns when another process answers is the request the store holds, for each kind of answer",
    async () => {
      const answers: ReadonlyArray<readonly [ApprovalRequest.ApprovalResponse["decision"], string | undefined]> = [
        ["approve_once", undefined],
        ["approve_session", JSON.stringify({ sessionTtlMs: 60_000, reason: "for the afternoon" })],
        ["approve_session", JSON.stringify({ scope: "tool" })],
        ["deny", JSON.stringify({ reason: "not on a Friday" })]
      ]
      for (const [i, [decision, more]] of answers.entries()) {
        const db = freshDb()
        const waiter = await spawnWorker(["wait", db, "s1", `call-${i}`])
        const paused = await waiter.next("paused")
        const answer = await runWorker([
          "answer",
          db,
          String(paused.requestId),
          decision,
          "ana",
          ...(more ? [more] : [])
        ])
        const resolved = await waiter.next("resolved")
        expect(await waiter.exited).toBe(0)
        const stored = await inspect(db, (store) => store.getRequest(paused.requestId as ApprovalRequest.RequestId))
        expect(resolved["request"]).toEqual(answer["request"])
        // as the answer left it (the waiter then ran the call: an approval once is spent)
        const { consumedAt: _, ...row } = Option.getOrThrow(stored)
        expect(row).toEqual(resolved["request"] as ApprovalRequest.ApprovalRequest)
        expect((resolved["request"] as ApprovalRequest.ApprovalRequest).resolution?.decision).toBe(decision)
      }
    },
    120_000
  )

  test("a process killed with SIGKILL loses nothing: another lists and answers, a third resumes", async () => {
    const db = freshDb()
    const holder = await spawnWorker(["create", db, "s1", "3"])
    await holder.next("ready")
    holder.kill("SIGKILL")
    expect(await holder.exited).not.toBe(0)

    const listed = await runWorker(["pending", db, "s1"])
    expect(listed.callIds).toEqual(["call-0", "call-1", "call-2"])
    const ids = listed.requestIds as Array<string>
    await runWorker(["answer", db, ids[0]!, "approve_once"])
    await runWorker(["answer", db, ids[1]!, "deny"])

    // The replacement asks again with the same call ids: it gets the recorded answers, no new prompt.
    expect(await runWorker(["rerun", db, "s1", "call-0"])).toMatchObject({ result: "ran call-0" })
    expect(await runWorker(["rerun", db, "s1", "call-0"])).toMatchObject({ result: "CallAlreadyExecuted" })
    expect(await runWorker(["rerun", db, "s1", "call-1"])).toMatchObject({ result: "ToolDenied" })
    expect((await runWorker(["pending", db])).callIds).toEqual(["call-2"])
    const requested = await inspect(db, (store) => store.events({ sessionKey: "s1" }))
    expect(requested.filter((e) => e.type === "approval.requested")).toHaveLength(3)
  })

  test("four responder processes race on the same 200 requests: each answered exactly once, audited once", async () => {
    const db = freshDb()
    const holder = await spawnWorker(["create", db, "race", "200"])
    await holder.next("ready", 60_000)
    const ids = holder.lines.filter((l) => l.event === "paused").map((l) => String(l.requestId))
    expect(ids).toHaveLength(200)
    const results = await Promise.all(
      ["r1", "r2", "r3", "r4"].map((who) => runWorker(["race", db, who, JSON.stringify(ids)]))
    )
    holder.kill("SIGKILL")

    const won = results.flatMap((r) => r.won as Array<string>)
    expect(new Set(won).size).toBe(200)
    expect(won).toHaveLength(200)
    for (const r of results) {
      const tally = r.tally as Record<string, number>
      expect(Object.keys(tally).every((k) => ["ours", "sameAsWinner", "AlreadyResolved"].includes(k))).toBe(true)
    }
    const { events, pending } = await inspect(
      db,
      (store) => Effect.all({ events: store.events(), pending: store.listPending() })
    )
    expect(pending).toHaveLength(0)
    const resolved = events.filter((e) => e.type === "approval.resolved")
    expect(resolved).toHaveLength(200)
    expect(new Set(resolved.map((e) => e.requestId)).size).toBe(200)
    for (const [i, e] of events.entries()) expect(e.seq).toBe(events[0]!.seq + i)
    const winners = new Map<string, string>(resolved.map((e) => [e.requestId!, e.actor!]))
    for (const [i, r] of results.entries()) {
      for (const id of r.won as Array<string>) expect(winners.get(id)).toBe(["r1", "r2", "r3", "r4"][i])
    }
  }, 120_000)

  test("requests whose TTL passed while no process ran are expired on the next start, once", async () => {
    const db = freshDb()
    const holder = await spawnWorker(["create", db, "s1", "2", "300"])
    await holder.next("ready")
    holder.kill("SIGKILL")
    await holder.exited
    await pastDeadline(Math.max(...holder.lines.filter((l) => l.event === "paused").map((l) => Number(l.expiresAt))))
    const before = await inspect(db, (store) => store.listPending())
    expect(before).toHaveLength(2)

    expect((await runWorker(["pending", db])).requestIds).toEqual([])
    await runWorker(["pending", db])
    const events = await inspect(db, (store) => store.events())
    const expired = events.filter((e) => e.type === "approval.expired")
    expect(expired).toHaveLength(2)
    expect(expired.every((e) => e.outcome === "expired" && e.actor === "system")).toBe(true)
  })
})
