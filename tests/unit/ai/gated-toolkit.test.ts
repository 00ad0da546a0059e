import { GatedToolkit } from "@tool-gate/ai"
import { ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Fiber } from "effect"
import { describe, it } from "../../support/effectTest.js"
import { Tools, world } from "./fixtures.js"

const session = { sessionKey: "s-1", agentId: "release-bot" }
const deployCall = { id: "c1", name: "deploy", params: { env: "production", version: "1.2.0" } }

/** The deploy call asked once: it waits for a human. */
const pendingDeploy = Effect.gen(function*() {
  const toolkit = yield* Tools
  const pending = yield* GatedToolkit.authorize(toolkit, deployCall, session)
  if (pending._tag !== "Pending") throw new Error(`expected Pending, got ${pending._tag}`)
  return { toolkit, gate: yield* ToolGate.ToolGate, requestId: pending.signal.requestId }
})

describe("GatedToolkit", () => {
  it.scoped("authorize never waits: a call that needs a human comes back Pending, and runs once answered", () => {
    const { layer, ran } = world([])
    return Effect.gen(function*() {
      const { gate, requestId, toolkit } = yield* pendingDeploy
      yield* gate.respond(requestId, { decision: "approve_once" })
      expect(yield* GatedToolkit.authorize(toolkit, deployCall, session)).toMatchObject({
        _tag: "Ran",
        result: { id: "c1", name: "deploy", isFailure: false, result: "deployed 1.2.0 to production" }
      })
      expect(ran).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("gate waits in-process for the human's answer, then runs", () => {
    const { layer, ran } = world([])
    return Effect.gen(function*() {
      const { gate, requestId, toolkit } = yield* pendingDeploy
      const waiting = yield* Effect.fork(GatedToolkit.gate(toolkit, deployCall, session))
      yield* Effect.repeat(Fiber.status(waiting), { until: (status) => status._tag === "Suspended" })
      expect(waiting.unsafePoll()).toBeNull()
      expect(ran).toEqual([])
      yield* gate.respond(requestId, { decision: "approve_once", respondedBy: "ana" })
      expect((yield* Fiber.join(waiting)).result.result).toBe("deployed 1.2.0 to production")
      expect(ran).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })
})
