/**
 * Issue 10, the contract beside the critical finding, on memory, SQLite and PostgreSQL:
 * - every `decision` event carries the canonical JSON of the call's arguments (high 8);
 * - a second `approve_session` that differs from the first in scope or session TTL is refused
 *   as `AlreadyResolved`; only the identical answer is "the same answer" (medium 9);
 * - non-finite or out-of-range durations are refused with a typed error and change nothing
 *   (high 2): `extend`, `recordApproval({ ttl })`, `respond({ sessionTtlMs })`.
 */
import { type AuditEvent, PauseSignal, Policy, ToolCall, type ToolGate } from "@tool-gate/core"
import { describe, expect } from "bun:test"
import { Duration, Effect, Either } from "effect"
import { it } from "../support/effectTest.js"
import { argsOf, tagOf } from "./support/outcomes.js"
import { type Backend, backends } from "./support/twoGates.js"

const policy = Policy.unsafeMake({
  deny: [{ tool: "bash", args: { command: "rm *" } }],
  requireApproval: [{ tool: "deploy" }, { tool: "write_file", sessionScope: "exact" }],
  allow: ["bash"]
})

const failureOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (result) => {
    if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
    return result.left
  })

const pause = (gate: ToolGate.Service, id: string, name = "deploy", args: Record<string, unknown> = { env: "prod" }) =>
  Effect.map(gate.authorize({ id, name, sessionKey: "s1", args }), (result) => {
    if (!PauseSignal.isPauseSignal(result)) throw new Error(`expected a pause for ${id}`)
    return result
  })

const suite = (backend: Backend) => {
  const test = (
    title: string,
    body: (
      gate: ToolGate.Service,
      lastSeq: Effect.Effect<number, unknown>,
      events: Effect.Effect<ReadonlyArray<AuditEvent.AuditEvent>, unknown>
    ) => Effect.Effect<unknown, unknown>
  ) =>
    it.scoped(
      title,
      () => Effect.flatMap(backend({ policy }), (g) => body(g.a, g.store.lastSeq, g.store.events())),
      60_000
    )

  describe("decision events carry the arguments", () => {
    test(
      "policy allow, policy deny, allow through a session approval, and evaluate: args is the canonical JSON",
      (gate, _, events) =>
        Effect.gen(function*() {
          const ls = { id: "c1", name: "bash", sessionKey: "s1", args: { command: "ls", flags: { b: 1, a: [2, "x"] } } }
          const rm = { id: "c2", name: "bash", sessionKey: "s1", args: { command: "rm -rf /" } }
          const deploy = { id: "c3", name: "deploy", sessionKey: "s1", args: { env: "prod", replicas: 3 } }
          yield* gate.authorize(ls)
          yield* Effect.either(gate.authorize(rm))
          yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true)
          yield* gate.authorize(deploy)
          yield* gate.evaluate({ ...ls, id: "c4" })
          const decisions = (yield* events).filter((e) => e.type === "decision")
          const byId = new Map<string, (typeof decisions)[number]>(decisions.map((e) => [e.toolCallId, e]))
          expect(byId.get("c1")).toMatchObject({ outcome: "allow", via: "policy", args: argsOf(ls) })
          expect(byId.get("c2")).toMatchObject({ outcome: "deny", args: argsOf(rm) })
          expect(byId.get("c3")).toMatchObject({ outcome: "allow", via: "sessionApproval", args: argsOf(deploy) })
          expect(byId.get("c3")!.sessionApprovalId).toBeDefined()
          expect(byId.get("c4")).toMatchObject({ outcome: "allow", args: argsOf(ls) })
        })
    )
  })

  describe("a different second answer is a conflict", () => {
    test(
      "after approve_session scope tool, approve_session scope exact with sessionTtlMs 1000 is AlreadyResolved; the identical answer succeeds",
      (gate, lastSeq) =>
        Effect.gen(function*() {
          const paused = yield* pause(gate, "c1")
          const first = { decision: "approve_session", scope: "tool", respondedBy: "ana" } as const
          yield* gate.respond(paused.requestId, first)
          const before = yield* lastSeq
          const grants = yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))
          for (
            const second of [
              { decision: "approve_session", scope: "exact", sessionTtlMs: 1000, respondedBy: "ana" },
              { decision: "approve_session", scope: "exact", respondedBy: "ana" },
              { decision: "approve_session", scope: "tool", sessionTtlMs: 1000, respondedBy: "ana" },
              { decision: "approve_once", respondedBy: "ana" }
            ] as const
          ) {
            const error = yield* failureOf(gate.respond(paused.requestId, second))
            expect({ second, error: tagOf(error) }).toEqual({ second, error: "AlreadyResolved" })
          }
          const again = yield* gate.respond(paused.requestId, first)
          expect(again.status).toBe("approved")
          expect(yield* lastSeq).toBe(before)
          expect(yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))).toEqual(grants)
          expect(grants).toHaveLength(1)
          expect(grants[0]).toMatchObject({ scope: "tool", toolName: "deploy" })
          expect(grants[0]!.expiresAt).toBeUndefined()
        })
    )

    test(
      "after approve_session with sessionTtlMs 1000, the same answer without it (or with another) is AlreadyResolved",
      (gate, lastSeq) =>
        Effect.gen(function*() {
          const paused = yield* pause(gate, "c1", "write_file", { path: "/tmp/a" })
          const first = { decision: "approve_session", scope: "exact", sessionTtlMs: 1000 } as const
          yield* gate.respond(paused.requestId, first)
          const before = yield* lastSeq
          for (
            const second of [{ decision: "approve_session", scope: "exact" }, { ...first, sessionTtlMs: 2000 }] as const
          ) {
            expect(tagOf(yield* failureOf(gate.respond(paused.requestId, second)))).toBe("AlreadyResolved")
          }
          expect((yield* gate.respond(paused.requestId, first)).status).toBe("approved")
          expect(yield* lastSeq).toBe(before)
        })
    )
  })

  describe("non-finite and out-of-range durations are refused and change nothing", () => {
    test(
      "extend(id, Duration.infinity) and extend by more than a year fail with InvalidDuration",
      (gate, lastSeq) =>
        Effect.gen(function*() {
          const paused = yield* pause(gate, "c1")
          const request = yield* gate.getRequest(paused.requestId)
          const before = yield* lastSeq
          for (const ttl of [Duration.infinity, Duration.days(366)]) {
            const error = yield* failureOf(gate.extend(paused.requestId, ttl, "op"))
            expect(tagOf(error)).toBe("InvalidDuration")
          }
          expect(yield* lastSeq).toBe(before)
          expect(yield* gate.getRequest(paused.requestId)).toEqual(request)
          // the log stays readable for every reader
          expect((yield* gate.pending()).map((r) => r.requestId)).toEqual([paused.requestId])
        })
    )

    test(
      "recordApproval(tool, session, true, { ttl: Duration.infinity }) fails with InvalidDuration and grants nothing",
      (gate, lastSeq) =>
        Effect.gen(function*() {
          const before = yield* lastSeq
          for (const ttl of [Duration.infinity, Duration.days(366)]) {
            const error = yield* failureOf(gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true, { ttl }))
            expect(tagOf(error)).toBe("InvalidDuration")
          }
          expect(yield* lastSeq).toBe(before)
          expect(yield* gate.sessionApprovals()).toEqual([])
          expect(yield* gate.hasApproval("deploy", ToolCall.SessionKey.make("s1"))).toBe(false)
          expect(PauseSignal.isPauseSignal(yield* gate.authorize({ id: "c1", name: "deploy", sessionKey: "s1" }))).toBe(
            true
          )
        })
    )

    test(
      "respond with sessionTtlMs Infinity (or NaN, 0, more than a year) fails with InvalidResponse and leaves the request pending",
      (gate, lastSeq) =>
        Effect.gen(function*() {
          const paused = yield* pause(gate, "c1")
          const before = yield* lastSeq
          for (const sessionTtlMs of [Number.POSITIVE_INFINITY, Number.NaN, 0, 366 * 24 * 3600 * 1000]) {
            const error = yield* failureOf(
              gate.respond(paused.requestId, { decision: "approve_session", sessionTtlMs })
            )
            expect({ sessionTtlMs, error: tagOf(error) }).toEqual({ sessionTtlMs, error: "InvalidResponse" })
          }
          expect(yield* lastSeq).toBe(before)
          expect((yield* gate.getRequest(paused.requestId)).status).toBe("pending")
          expect(yield* gate.sessionApprovals()).toEqual([])
        })
    )
  })
}

for (const { name, backend, skip } of backends("tests/security/answersAndDurations.test.ts")) {
  ;(skip ? describe.skip : describe)(`answers and durations (${name})`, () => suite(backend))
}
