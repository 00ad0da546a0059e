/**
 * The load test (bench/load.ts) in small: 200 requests answered through autocannon (plus 20
 * conflicting second answers) while pending lists are read and 4 SSE clients stream the audit
 * log (two of them reconnecting with Last-Event-ID every 100 events), against a real server on a
 * SQLite file. Correctness only; no timing is asserted.
 */
import { ApprovalStore } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { runLoad, startServer as startBenchServer } from "../../bench/load.js"
import { createPending, token } from "../../bench/loadServer.js"
import { describe, it } from "../support/effectTest.js"
import { startServer, tokens } from "./support/server.js"

describe("load", () => {
  it.live(
    "200 answers through autocannon, 4 SSE clients: no error, no event lost or repeated, each answered once",
    () =>
      Effect.gen(function*() {
        const server = yield* startServer()
        const requestIds = yield* createPending(server.gate, 200, 10)
        const afterSeq = yield* server.store.lastSeq
        const figures = yield* runLoad({
          url: server.url,
          token: tokens.approver,
          requestIds,
          sessions: 10,
          afterSeq,
          sseClients: 4,
          answerConnections: 8,
          readConnections: 2
        }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, server.store))
        expect(figures).toMatchObject({
          requests: 200,
          conflictsSent: 20,
          conflicts409: 20,
          errors: 0,
          lostEvents: 0,
          duplicateEvents: 0,
          outOfOrderEvents: 0,
          unanswered: 0,
          doubleApplied: 0,
          answeredExactlyOnce: true
        })
        expect(figures.sseReconnects).toBeGreaterThan(0)
        expect(yield* server.gate.pending()).toEqual([])
      }),
    60_000
  )
})

describe("the benches' server process", () => {
  it.live(
    "bundled for Node (LOAD_SERVER_RUNTIME=node): listens on better-sqlite3 with its pending requests, and answers",
    () =>
      Effect.gen(function*() {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "tool-gate-load-node-"))),
          (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
        )
        const server = yield* Effect.acquireRelease(
          Effect.promise(() => startBenchServer("sqlite", join(dir, "gate.db"), 100, "node")),
          (server) => Effect.promise(() => server.stop())
        )
        // the process runs Node, not Bun
        expect(readFileSync(`/proc/${server.pid}/cmdline`, "utf8").split("\0")[0]).toBe("node")
        expect(server.requestIds).toHaveLength(100)
        const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
        const pending = yield* Effect.promise(() =>
          fetch(`${server.url}/approvals/pending?sessionKey=load-0`, { headers }).then((r) => r.json())
        )
        // 100 requests round 50 sessions: load-0 holds the 1st and the 51st
        expect(pending).toHaveLength(2)
        const answered = yield* Effect.promise(() =>
          fetch(`${server.url}/approvals/${server.requestIds[0]}/respond`, {
            method: "POST",
            headers,
            body: JSON.stringify({ decision: "approve_once", respondedBy: "load-test" })
          })
        )
        expect(answered.status).toBe(200)
        const afterAnswer = yield* Effect.promise(() =>
          fetch(`${server.url}/approvals/pending?sessionKey=load-0`, { headers }).then((r) => r.json())
        )
        expect(afterAnswer).toHaveLength(1)
      }).pipe(Effect.scoped),
    60_000
  )
})
