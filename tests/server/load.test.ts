/**
 * The load test (bench/load.ts) in small: 200 requests answered through autocannon (plus 20
 * conflicting second answers) while pending lists are read and 4 SSE clients stream the audit
 * log (two of them reconnecting with Last-Event-ID every 100 events), against a real server on a
 * SQLite file. Correctness only; no timing is asserted.
 */
import { ApprovalStore } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect } from "effect"
import { createPending, runLoad } from "../../bench/load.js"
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
