import { ApprovalStore, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Layer } from "effect"
import { describe, it } from "../../../support/effectTest.js"

// The session guard of `revokeApproval`: a caller limited to one session (an HTTP token, the CLI
// naming a session) reaches only that session's approvals; ids are global, so it is the gate's rule.
const Gate = ToolGate.layer({ policy: Policy.unsafeMake({ requireApproval: ["bash"] }) }).pipe(
  Layer.provideMerge(ApprovalStore.layerMemory)
)

describe("revokeApproval with a session", () => {
  it.scoped("refuses an approval of another session as not found, and revokes nothing", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      yield* gate.recordApproval("bash", ToolCall.SessionKey.make("victim"), true)
      const [held] = yield* gate.sessionApprovals(ToolCall.SessionKey.make("victim"))
      const refused = yield* Effect.flip(
        gate.revokeApproval(held!.id, { actor: "mallory", sessionKey: ToolCall.SessionKey.make("attacker") })
      )
      expect(refused._tag).toBe("SessionApprovalNotFound")
      expect((yield* gate.sessionApprovals(ToolCall.SessionKey.make("victim"))).map((a) => a.id)).toEqual([held!.id])
      expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("victim"))).toBe(true)
      expect((yield* store.events()).map((e) => e.type)).toEqual(["session.granted"])
    }).pipe(Effect.provide(Gate)))

  it.scoped("revokes an approval of the named session, recording the actor", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
      const [held] = yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))
      const revoked = yield* gate.revokeApproval(held!.id, { actor: "ops", sessionKey: ToolCall.SessionKey.make("s1") })
      expect(revoked.id).toBe(held!.id)
      expect(yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))).toHaveLength(0)
      const events = yield* store.events()
      expect(events.map((e) => [e.type, e.actor, e.sessionKey])).toEqual([
        ["session.granted", undefined, "s1"],
        ["session.revoked", "ops", "s1"]
      ])
    }).pipe(Effect.provide(Gate)))

  it.scoped("without a session, any approval by id, as before", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
      const [held] = yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))
      expect((yield* gate.revokeApproval(held!.id, { actor: "ops" })).id).toBe(held!.id)
      expect((yield* Effect.flip(gate.revokeApproval(held!.id)))._tag).toBe("SessionApprovalNotFound")
    }).pipe(Effect.provide(Gate)))
})
