import { ApprovalStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Layer, TestClock } from "effect"
import { describe, it } from "../../../support/effectTest.js"

// The scenario suite also sweeps explicitly after moving the clock (a database round trip may
// straddle `TestClock.adjust`); here, on the memory store, only the background sweeper runs.
const policy = Policy.unsafeMake({ requireApproval: ["bash"], ttlMs: 120_000 })

describe("the background sweeper", () => {
  it.scoped("expires overdue requests and warns before expiry, with nobody waiting and no explicit sweep", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      const pause = yield* gate.authorize({ id: "c1", name: "bash", sessionKey: "s1" })
      expect(PauseSignal.isPauseSignal(pause)).toBe(true)
      yield* TestClock.adjust("59 seconds")
      expect((yield* store.events()).map((e) => e.type)).toEqual(["approval.requested"])
      yield* TestClock.adjust("2 seconds")
      expect((yield* store.events()).map((e) => e.type)).toEqual(["approval.requested", "approval.expiring"])
      yield* TestClock.adjust("60 seconds")
      expect(yield* gate.pending()).toHaveLength(0)
      expect((yield* store.events()).map((e) => e.type)).toEqual([
        "approval.requested",
        "approval.expiring",
        "approval.expired"
      ])
    }).pipe(Effect.provide(ToolGate.layer({ policy }).pipe(Layer.provideMerge(ApprovalStore.layerMemory)))))
})
