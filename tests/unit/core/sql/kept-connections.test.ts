/**
 * On PostgreSQL the approval store keeps a connection of the pool for its writes and one for its
 * reads (`keepConnections`), which `@tool-gate/pg` turns on only when its pool has room for them:
 * with a pool of 2 both would be kept and every other statement would wait for a connection.
 */
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { expect } from "bun:test"
import { Effect, Redacted } from "effect"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgSchema } from "../../../support/sqlStores.js"

const policy = Policy.unsafeMake({ requireApproval: ["bash"] })
const call = (id: string) => ({ id, name: "bash", sessionKey: "kept", args: { command: `make ${id}` } })

/** A pause, an answer and the resume that runs the call, for `calls` calls at once. */
const roundTrips = (calls: number) =>
  Effect.forEach(
    Array.from({ length: calls }, (_, i) => `call-${i}`),
    (id) =>
      Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const paused = yield* gate.authorize(call(id))
        if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.dieMessage("expected a pause")
        yield* gate.respond(paused.requestId, { decision: "approve_once", respondedBy: "ana" })
        return yield* gate.gate(call(id), () => Effect.succeed(id))
      }),
    { concurrency: "unbounded" }
  )

describePostgres("kept connections", (url) =>
  describe("ToolGatePg and kept connections", () => {
    for (const maxConnections of [2, 3, 4, undefined]) {
      it.live(`a pool of ${maxConnections ?? "the default"} connections serves calls in flight at once`, () =>
        Effect.gen(function*() {
          const schemaUrl = yield* pgSchema(url)
          const ran = yield* roundTrips(40).pipe(
            Effect.provide(ToolGatePg.layer({
              url: Redacted.make(schemaUrl),
              policy,
              client: maxConnections === undefined ? undefined : { maxConnections }
            })),
            // a pool whose every connection is kept idle would leave the other statements waiting
            Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => "the calls did not finish" })
          )
          expect([...ran].sort()).toEqual(Array.from({ length: 40 }, (_, i) => `call-${i}`).sort())
        }))
    }
  }))
