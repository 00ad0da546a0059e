/**
 * `authorize` reads its call when its effect runs, as any effect does, not when the effect is
 * made: an effect made once and run later (or run again, as `gate` runs it after a wait) judges
 * the call as it is then, and a call that cannot even be read fails the run instead of throwing
 * at the caller who made the effect.
 */
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Cause, Effect, Exit } from "effect"
import { describe, it } from "../../../support/effectTest.js"

const policy = Policy.unsafeMake({ allow: ["ls"], deny: ["rm"] })

describe("authorize reads its call when it runs", () => {
  it.scoped("an effect made before the call changed judges the call as it is when the effect runs", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const input = { id: "c1", name: "rm", sessionKey: "s1" }
      const authorized = gate.authorize(input)
      input.name = "ls"
      const result = yield* authorized
      if (PauseSignal.isPauseSignal(result)) throw new Error("expected the call allowed")
      expect(result.call.name).toBe("ls")
      expect(yield* gate.authorize({ id: "c1", name: "ls", sessionKey: "s1" })).toEqual(result)
    }).pipe(Effect.provide(ToolGate.layerMemory({ policy }))))

  it.scoped("a call whose fields cannot be read fails the run, and making the effect does not throw", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const hostile = {
        id: "c2",
        sessionKey: "s1",
        get name(): string {
          throw new Error("unreadable")
        }
      }
      const authorized = gate.authorize(hostile)
      const exit = yield* Effect.exit(authorized)
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(Cause.pretty(exit.cause)).toContain("unreadable")
    }).pipe(Effect.provide(ToolGate.layerMemory({ policy }))))
})
