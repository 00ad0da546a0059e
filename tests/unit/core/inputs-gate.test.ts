/**
 * The gate applies its own call limits and refuses ill-formed session keys at every entry that
 * writes, changing nothing; a read for a key no call can have finds nothing (a lone surrogate
 * would otherwise read another session's rows in SQLite, where it becomes U+FFFD).
 */
import { ApprovalStore, PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Either, Layer } from "effect"
import { describe, it } from "../../support/effectTest.js"
import { sqliteStore } from "../../support/sqlStores.js"

const policy = Policy.unsafeMake({ requireApproval: ["bash"], allow: ["ls"] })

const stores = [
  ["memory", () => ApprovalStore.layerMemory],
  ["sqlite", () => sqliteStore().pipe(Layer.orDie)]
] as const

const lastSeq = Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.lastSeq)

for (const [name, store] of stores) {
  const Gate = () => {
    const shared = store()
    return Layer.merge(
      ToolGate.layer({ policy, limits: { maxArgsBytes: 64, maxDepth: 3 } }).pipe(Layer.provide(shared), Layer.orDie),
      shared
    )
  }
  describe(`a gate's own limits and session keys (${name})`, () => {
    it.scoped("calls over the gate's limits are InvalidToolCall and write nothing", () =>
      Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const before = yield* lastSeq
        const big = yield* Effect.either(
          gate.authorize({ id: "c1", name: "ls", sessionKey: "s", args: { text: "x".repeat(100) } })
        )
        expect(Either.isLeft(big) && big.left._tag).toBe("InvalidToolCall")
        const deep = yield* Effect.either(
          gate.authorize({ id: "c2", name: "ls", sessionKey: "s", args: { a: [[[[1]]]] } })
        )
        expect(Either.isLeft(deep) && deep.left._tag).toBe("InvalidToolCall")
        expect(yield* lastSeq).toBe(before)
        // within the limits the same call goes through
        const small = yield* gate.authorize({ id: "c3", name: "ls", sessionKey: "s", args: { text: "x" } })
        expect(PauseSignal.isPauseSignal(small)).toBe(false)
      }).pipe(Effect.provide(Gate())))

    it.scoped("an approver's edit over the gate's limits is InvalidResponse; the request stays pending", () =>
      Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const pause = yield* gate.authorize({ id: "c1", name: "bash", sessionKey: "s", args: { command: "ls" } })
        if (!PauseSignal.isPauseSignal(pause)) throw new Error("expected a pause")
        const answer = yield* Effect.either(
          gate.respond(pause.requestId, { decision: "approve_once", editedArgs: { command: "y".repeat(100) } })
        )
        expect(Either.isLeft(answer) && answer.left._tag).toBe("InvalidResponse")
        expect((yield* gate.getRequest(pause.requestId)).status).toBe("pending")
      }).pipe(Effect.provide(Gate())))

    it.scoped("session keys with control characters or lone surrogates: writes refused, reads find nothing", () =>
      Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        const pause = yield* gate.authorize({ id: "c1", name: "bash", sessionKey: "team-b\ufffd", args: {} })
        expect(PauseSignal.isPauseSignal(pause)).toBe(true)
        yield* gate.recordApproval("bash", ToolCall.SessionKey.make("team-b\ufffd"), true)
        const before = yield* lastSeq
        // keys no call can have, as an untyped caller would pass them
        for (
          const key of ["team-b\ud800", "team-b\udc00", "team\u0001", "team\u001b[2J", "team\u009b"] as Array<never>
        ) {
          const grant = yield* Effect.either(gate.recordApproval("bash", key, true))
          expect(Either.isLeft(grant) && grant.left._tag).toBe("InvalidToolCall")
          const clear = yield* Effect.either(gate.clearApprovals(key))
          expect(Either.isLeft(clear) && clear.left._tag).toBe("InvalidToolCall")
          expect(yield* gate.pending({ sessionKey: key })).toEqual([])
          expect(yield* gate.sessionApprovals(key)).toEqual([])
          expect(yield* gate.hasApproval("bash", key)).toBe(false)
        }
        expect(yield* lastSeq).toBe(before)
        expect(yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("team-b\ufffd") })).toHaveLength(1)
      }).pipe(Effect.provide(Gate())))
  })
}
