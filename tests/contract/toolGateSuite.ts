/**
 * The ToolGate scenario suite: one set of behaviours every store must give (memory, SQLite,
 * PostgreSQL). Each test builds a fresh store and gate on the TestClock, so TTLs are driven by
 * `TestClock.adjust`, never by sleeping.
 */
import {
  ApprovalRequest,
  ApprovalStore,
  AuditChain,
  AuditEvent,
  PauseSignal,
  Policy,
  ToolCall,
  ToolGate
} from "@tool-gate/core"
import { expect } from "bun:test"
import { Chunk, type Duration, Effect, Either, Fiber, Layer, Option, type Scope, Stream, TestClock } from "effect"
import { describe, it } from "../support/effectTest.js"

export const policy = Policy.unsafeMake({
  deny: [
    "rm",
    { tool: "write_file", args: { path: "/etc/*" }, reason: "system files are off limits" }
  ],
  requireApproval: [
    "bash",
    { tool: "deploy", ttlMs: 60_000, sessionScope: "tool" },
    { tool: "write_file" },
    "mcp__github__*"
  ],
  allow: ["read_file", "ls"]
})

const call = (id: string, name: string, sessionKey = "s1", args: Record<string, unknown> = {}, extra = {}) => ({
  id,
  name,
  sessionKey,
  args,
  ...extra
})

const expectFailure = <A, E>(effect: Effect.Effect<A, E, ToolGate.ToolGate>) =>
  Effect.map(Effect.either(effect), (result) => {
    if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
    return result.left
  })

const callId = (request: ApprovalRequest.ApprovalRequest): string => request.toolCall.id

const asPause = (u: unknown): PauseSignal.PauseSignal => {
  if (!PauseSignal.isPauseSignal(u)) throw new Error(`expected a PauseSignal, got ${JSON.stringify(u)}`)
  return u
}

/**
 * Moves the TestClock, then sweeps once. `adjust` returns when every fiber is suspended, and a
 * fiber waiting on a database round trip counts as suspended: with a store whose calls take real
 * time (PostgreSQL), the background sweeper may still be mid-sweep, and misses the ticks it had
 * not yet scheduled. An explicit sweep settles expiry and warnings as of the new time.
 */
const advance = (duration: Duration.DurationInput) =>
  Effect.zipRight(TestClock.adjust(duration), Effect.flatMap(ToolGate.ToolGate, (gate) => gate.sweep))

/** Everything the store holds that a failed call must not have changed. */
const snapshot = Effect.gen(function*() {
  const store = yield* ApprovalStore.ApprovalStore
  return {
    seq: yield* store.lastSeq,
    pending: (yield* store.listPending()).map((r) => `${r.requestId}:${r.status}`),
    approvals: (yield* store.sessionApprovals()).map((a) => `${a.id}:${a.seq}`)
  }
})

export const toolGateSuite = <E>(
  name: string,
  storeLayer: () => Layer.Layer<ApprovalStore.ApprovalStore, E>,
  options: { readonly gatePolicy?: Policy.Policy } = {}
) => {
  const GateLayer = () => {
    const store = storeLayer()
    return Layer.merge(ToolGate.layer({ policy: options.gatePolicy ?? policy }).pipe(Layer.provide(store)), store)
  }
  const test = (
    title: string,
    body: () => Effect.Effect<unknown, unknown, ToolGate.ToolGate | ApprovalStore.ApprovalStore | Scope.Scope>
  ) => it.scoped(title, () => Effect.provide(Effect.suspend(body), GateLayer()))

  describe(`ToolGate scenarios (${name})`, () => {
    describe("seed plan", () => {
      test("createApprovalRequest returns a request for a requireApproval decision, with tool, session, intent, agent", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const c = call("c1", "bash", "s1", { command: "ls" }, { intentId: "i-7", agentId: "agent-a" })
          const decision = yield* gate.evaluate(c)
          expect(decision._tag).toBe("RequireApproval")
          const request = yield* gate.createApprovalRequest(decision, c)
          expect(request).toBeDefined()
          expect(request!.toolCall.name).toBe("bash")
          expect<string>(request!.toolCall.sessionKey).toBe("s1")
          expect(request!.toolCall.intentId).toBe("i-7")
          expect(request!.toolCall.agentId).toBe("agent-a")
          expect(request!.status).toBe("pending")
          expect(request!.rule.id).toBe("requireApproval[0]")
          // asking twice returns the same request
          const again = yield* gate.createApprovalRequest(decision, c)
          expect(again!.requestId).toBe(request!.requestId)
        }))

      test("createApprovalRequest returns undefined for an already-approved tool and for allow decisions", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const c = call("c1", "bash", "s1", { command: "ls" })
          const decision = yield* gate.evaluate(c)
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
          expect(yield* gate.createApprovalRequest(decision, c)).toBeUndefined()
          const allowed = yield* gate.evaluate(call("c2", "ls"))
          expect(yield* gate.createApprovalRequest(allowed, call("c2", "ls"))).toBeUndefined()
          expect(yield* gate.pending()).toHaveLength(0)
        }))

      test("hasApproval: false before, true after recordApproval(true), false after recordApproval(false)", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s1"))).toBe(false)
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s1"))).toBe(true)
          expect(yield* gate.hasApproval("BASH", ToolCall.SessionKey.make("s1"))).toBe(true)
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), false)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s1"))).toBe(false)
          expect((yield* gate.evaluate(call("c1", "bash")))._tag).toBe("RequireApproval")
        }))

      test("clearApprovals clears one session, then all", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
          yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true)
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s2"), true)
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s3"), true)
          expect(yield* gate.clearApprovals(ToolCall.SessionKey.make("s1"))).toBe(2)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s1"))).toBe(false)
          expect(yield* gate.hasApproval("deploy", ToolCall.SessionKey.make("s1"))).toBe(false)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s2"))).toBe(true)
          expect(yield* gate.clearApprovals()).toBe(2)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s2"))).toBe(false)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s3"))).toBe(false)
          expect(yield* gate.sessionApprovals()).toHaveLength(0)
          const cleared = (yield* gate.auditLog().pipe(Stream.take(6), Stream.runCollect)).pipe(Chunk.toArray)
            .filter((e) => e.type === "approvals.cleared")
          expect(cleared.map((e) => e.sessionKey)).toEqual<unknown>(["s1", undefined])
        }))

      test("an approval does not carry across sessions", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          yield* gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
          expect((yield* gate.evaluate(call("c1", "bash", "s1")))._tag).toBe("Allow")
          expect((yield* gate.evaluate(call("c1", "bash", "s2")))._tag).toBe("RequireApproval")
          const pause = asPause(yield* gate.authorize(call("c2", "bash", "s2", { command: "x" })))
          yield* gate.respond(pause.requestId, { decision: "approve_session", scope: "tool" })
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s2"))).toBe(true)
          expect(yield* gate.hasApproval("bash", ToolCall.SessionKey.make("s3"))).toBe(false)
          expect((yield* gate.evaluate(call("c3", "bash", "s3")))._tag).toBe("RequireApproval")
        }))

      test("a requireApproval tool yields a PauseSignal with approval metadata and ttlMs 300000 by default", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(
            yield* gate.authorize(
              call("c1", "bash", "s1", { command: "make" }, { intentId: "build", agentId: "coder" })
            )
          )
          expect(pause.__pause).toBe(true)
          expect(pause.ttlMs).toBe(300_000)
          expect(pause.expiresAt - (yield* TestClock.currentTimeMillis)).toBe(300_000)
          expect(pause.metadata).toEqual({
            toolId: "bash",
            toolCallId: "c1",
            intentId: "build",
            agentId: "coder",
            sessionKey: "s1",
            rule: "requireApproval[0]",
            approvalRequest: true
          })
          expect(pause.prompt).toContain("bash")
          // a rule's own ttlMs wins over the policy's
          const deploy = asPause(yield* gate.authorize(call("c2", "deploy")))
          expect(deploy.ttlMs).toBe(60_000)
        }))

      test("timeout denies: gate waits up to the TTL, then fails with ToolDenied(expired), never a human denial", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          let ran = false
          const fiber = yield* Effect.fork(
            gate.gate(call("c1", "bash", "s1", { command: "x" }), () => Effect.sync(() => (ran = true)))
          )
          // paused (its request written) before the clock moves: on PostgreSQL the write takes real time
          const [pending] = yield* waitForPending(gate, 1)
          yield* TestClock.adjust("299 seconds")
          expect(fiber.unsafePoll()).toBeNull()
          yield* TestClock.adjust("2 seconds")
          const error = yield* expectFailure(Fiber.join(fiber))
          expect(error._tag).toBe("ToolDenied")
          expect((error as { outcome: string }).outcome).toBe("expired")
          expect(ran).toBe(false)
          const request = yield* gate.getRequest(pending!.requestId)
          expect(request.status).toBe("expired")
          expect(request.resolution?.respondedBy).toBeUndefined()
          const late = yield* expectFailure(gate.respond(pending!.requestId, { decision: "approve_once" }))
          expect(late._tag).toBe("RequestExpired")
          const events = yield* collect
          expect(events.filter((e) => e.type === "approval.expired")).toHaveLength(1)
          expect(events.filter((e) => e.type === "approval.resolved")).toHaveLength(0)
        }))

      test("countPending: the requests pending and the log's last seq, as of one moment; answered and expired ones leave", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const store = yield* ApprovalStore.ApprovalStore
          expect(yield* store.countPending).toEqual({ pending: 0, seq: yield* store.lastSeq })
          const [answered, kept] = (yield* Effect.forEach(
            [call("c1", "bash", "s1"), call("c2", "bash", "s2"), call("c3", "mcp__github__x", "s1")],
            (c) => gate.authorize(c)
          )).map(asPause)
          const expiring = asPause(yield* gate.authorize(call("c4", "deploy", "s3")))
          expect(yield* store.countPending).toEqual({ pending: 4, seq: yield* store.lastSeq })
          yield* gate.respond(answered!.requestId, { decision: "deny" })
          yield* gate.extend(kept!.requestId, "10 minutes")
          yield* advance("61 seconds")
          expect((yield* gate.getRequest(expiring.requestId)).status).toBe("expired")
          const counted = yield* store.countPending
          expect(counted).toEqual({ pending: 2, seq: yield* store.lastSeq })
          expect(counted.pending).toBe((yield* store.listPending()).length)
        }))
    })

    describe("answers", () => {
      test("gate waits for a human and runs the tool once approved", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const fiber = yield* Effect.fork(
            gate.gate(call("c1", "bash", "s1", { command: "make" }), (allowed) => Effect.succeed(allowed.call.args))
          )
          const request = yield* waitForPending(gate, 1)
          const resolved = yield* gate.respond(request[0]!.requestId, { decision: "approve_once", respondedBy: "ana" })
          expect(resolved.status).toBe("approved")
          expect(yield* Fiber.join(fiber)).toEqual({ command: "make" })
          // approve_once is spent: a new call with the same arguments asks again
          expect((yield* gate.evaluate(call("c2", "bash", "s1", { command: "make" })))._tag).toBe("RequireApproval")
        }))

      test("deny feeds the human's reason back; a deny is not remembered as a rule", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const fiber = yield* Effect.fork(gate.gate(call("c1", "bash"), () => Effect.void))
          const [request] = yield* waitForPending(gate, 1)
          yield* gate.respond(request!.requestId, {
            decision: "deny",
            reason: "use the staging box",
            respondedBy: "bo"
          })
          const error = yield* expectFailure(Fiber.join(fiber))
          expect(error).toMatchObject({ _tag: "ToolDenied", outcome: "denied", reason: "use the staging box" })
          const again = asPause(yield* gate.authorize(call("c2", "bash")))
          expect(again.requestId).not.toBe(request!.requestId)
        }))

      test("exactly once: the same answer twice returns the first resolution; a conflicting one fails", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "bash")))
          const first = yield* gate.respond(pause.requestId, { decision: "approve_once", respondedBy: "ana" })
          const before = yield* snapshot
          const repeat = yield* gate.respond(pause.requestId, { decision: "approve_once", respondedBy: "bo" })
          expect(repeat).toEqual(first)
          const conflict = yield* expectFailure(gate.respond(pause.requestId, { decision: "deny", respondedBy: "bo" }))
          expect(conflict).toMatchObject({ _tag: "AlreadyResolved", status: "approved", respondedBy: "ana" })
          expect(yield* snapshot).toEqual(before)
          const resolved = (yield* collect).filter((e) => e.type === "approval.resolved")
          expect(resolved).toHaveLength(1)
          expect(resolved[0]!.actor).toBe("ana")
        }))

      test("racing answers: of many concurrent conflicting answers exactly one wins", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "bash")))
          const answers = Array.from({ length: 20 }, (_, i) => ({
            decision: i % 2 === 0 ? "approve_once" as const : "deny" as const,
            respondedBy: `op-${i}`
          }))
          const results = yield* Effect.forEach(answers, (a) => Effect.either(gate.respond(pause.requestId, a)), {
            concurrency: "unbounded"
          })
          const winner = (yield* gate.getRequest(pause.requestId)).resolution!
          for (const [i, result] of results.entries()) {
            if (answers[i]!.decision === winner.decision) expect(Either.isRight(result)).toBe(true)
            else expect(Either.getLeft(result).pipe((l) => l._tag === "Some" && l.value._tag)).toBe("AlreadyResolved")
          }
          expect((yield* collect).filter((e) => e.type === "approval.resolved")).toHaveLength(1)
        }))

      test("several pending requests, in one session and across sessions, answered in any order", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const fibers = yield* Effect.forEach(
            [["a1", "s1"], ["a2", "s1"], ["a3", "s2"], ["a4", "s3"], ["a5", "s1"]] as const,
            ([id, session], i) =>
              Effect.zipRight(
                TestClock.adjust(i === 0 ? 0 : 10),
                Effect.fork(
                  gate.gate(call(id, "bash", session, { n: i }), (allowed) => Effect.succeed<string>(allowed.call.id))
                )
              )
          )
          const all = yield* waitForPending(gate, 5)
          expect(all.map(callId)).toEqual(["a1", "a2", "a3", "a4", "a5"])
          expect((yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("s1") })).map(callId)).toEqual([
            "a1",
            "a2",
            "a5"
          ])
          expect((yield* gate.pending({ sessionKey: ToolCall.SessionKey.make("s2") })).map(callId)).toEqual(["a3"])
          const byId = new Map(all.map((r) => [callId(r), r.requestId]))
          yield* gate.respond(byId.get("a4")!, { decision: "approve_once" })
          yield* gate.respond(byId.get("a2")!, { decision: "deny", reason: "no" })
          expect(yield* Fiber.join(fibers[3]!)).toBe("a4")
          expect((yield* expectFailure(Fiber.join(fibers[1]!)))._tag).toBe("ToolDenied")
          expect((yield* gate.pending()).map(callId)).toEqual(["a1", "a3", "a5"])
          yield* gate.respond(byId.get("a5")!, { decision: "approve_once" })
          yield* gate.respond(byId.get("a1")!, { decision: "approve_once" })
          yield* gate.respond(byId.get("a3")!, { decision: "approve_once" })
          expect(yield* Effect.all([fibers[0]!, fibers[2]!, fibers[4]!].map(Fiber.join))).toEqual(["a1", "a3", "a5"])
          expect(yield* gate.pending()).toHaveLength(0)
        }))

      test("extend gives a pending request more time; the waiter keeps waiting", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const fiber = yield* Effect.fork(gate.gate(call("c1", "bash"), () => Effect.succeed("ran")))
          const [request] = yield* waitForPending(gate, 1)
          yield* TestClock.adjust("4 minutes")
          const extended = yield* gate.extend(request!.requestId, "10 minutes", "ops")
          expect(extended.expiresAt).toBe((yield* TestClock.currentTimeMillis) + 600_000)
          yield* TestClock.adjust("5 minutes")
          expect(fiber.unsafePoll()).toBeNull()
          expect((yield* gate.getRequest(request!.requestId)).status).toBe("pending")
          yield* gate.respond(request!.requestId, { decision: "approve_once" })
          expect(yield* Fiber.join(fiber)).toBe("ran")
          const resolved = yield* gate.getRequest(request!.requestId)
          expect((yield* expectFailure(gate.extend(resolved.requestId, "1 minute")))._tag).toBe("AlreadyResolved")
        }))

      test("extend never brings a deadline forward: a shorter TTL keeps the request as it is, with no event", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const store = yield* ApprovalStore.ApprovalStore
          const pause = asPause(yield* gate.authorize(call("c1", "bash")))
          const before = yield* gate.getRequest(pause.requestId)
          const seq = yield* store.lastSeq
          const kept = yield* gate.extend(pause.requestId, "1 minute", "ops")
          expect(kept).toEqual(before)
          expect(yield* gate.getRequest(pause.requestId)).toEqual(before)
          expect(yield* store.lastSeq).toBe(seq)
          // the deadline the operator did not shorten still holds: at 4 minutes the request waits
          yield* advance("4 minutes")
          expect((yield* gate.getRequest(pause.requestId)).status).toBe("pending")
          // a TTL that ends later than the deadline moves it
          const later = yield* gate.extend(pause.requestId, "2 minutes", "ops")
          expect(later.expiresAt).toBe((yield* TestClock.currentTimeMillis) + 120_000)
          expect(later.expiresAt).toBeGreaterThan(before.expiresAt)
        }))

      test("extend with allowShorten brings the deadline forward; the request expires then", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const store = yield* ApprovalStore.ApprovalStore
          const pause = asPause(yield* gate.authorize(call("c1", "bash")))
          const shortened = yield* gate.extend(pause.requestId, "1 minute", "ops", { allowShorten: true })
          expect(shortened.expiresAt).toBe((yield* TestClock.currentTimeMillis) + 60_000)
          const [event] = (yield* store.events()).filter((e) => e.type === "approval.extended")
          expect([event?.actor, event?.expiresAt]).toEqual(["ops", shortened.expiresAt])
          yield* advance("61 seconds")
          expect((yield* gate.getRequest(pause.requestId)).status).toBe("expired")
        }))

      test("a warning event is emitted before expiry, once", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "bash")))
          yield* advance("3 minutes")
          expect((yield* collect).filter((e) => e.type === "approval.expiring")).toHaveLength(0)
          yield* advance("90 seconds")
          yield* advance("10 seconds")
          const warnings = (yield* collect).filter((e) => e.type === "approval.expiring")
          expect(warnings).toHaveLength(1)
          expect(warnings[0]!.requestId).toBe(pause.requestId)
        }))

      test("the sweeper expires overdue requests with nobody waiting, exactly once", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          yield* gate.authorize(call("c1", "bash"))
          yield* gate.authorize(call("c2", "deploy"))
          yield* advance("61 seconds")
          expect((yield* gate.pending()).map(callId)).toEqual(["c1"])
          yield* advance("5 minutes")
          expect(yield* gate.pending()).toHaveLength(0)
          expect(yield* gate.sweep).toHaveLength(0)
          expect((yield* collect).filter((e) => e.type === "approval.expired")).toHaveLength(2)
        }))

      test("resume reads the resolution; refuses while pending; reports expiry as expired", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const a = asPause(yield* gate.authorize(call("c1", "bash")))
          expect((yield* expectFailure(gate.resume(a.requestId)))._tag).toBe("RequestPending")
          yield* gate.respond(a.requestId, { decision: "deny", reason: "nope" })
          expect((yield* gate.resume(a.requestId)).resolution).toMatchObject({ status: "denied", reason: "nope" })
          const b = asPause(yield* gate.authorize(call("c2", "deploy")))
          yield* TestClock.adjust("2 minutes")
          expect((yield* gate.resume(b.requestId)).status).toBe("expired")
        }))
    })

    describe("session approvals and matching", () => {
      test("tool names match case-insensitively", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          expect((yield* gate.evaluate(call("c0", "RM")))._tag).toBe("Deny")
          const pause = asPause(yield* gate.authorize(call("c1", "Bash", "s1", { command: "ls" })))
          yield* gate.respond(pause.requestId, { decision: "approve_session" })
          expect(yield* gate.evaluate(call("c2", "BASH", "s1", { command: "ls" }))).toMatchObject({
            _tag: "Allow",
            via: "sessionApproval"
          })
        }))

      test("exact scope: deep-equal args in any key order match; different args ask again", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const args = { command: "make", env: { A: 1, B: [1, { c: true }] } }
          const pause = asPause(yield* gate.authorize(call("c1", "bash", "s1", args)))
          const resolved = yield* gate.respond(pause.requestId, { decision: "approve_session" })
          const reordered = { env: { B: [1, { c: true }], A: 1 }, command: "make" }
          const allowed = yield* gate.evaluate(call("c2", "bash", "s1", reordered))
          expect(allowed).toMatchObject({ _tag: "Allow", via: "sessionApproval" })
          expect((allowed as { sessionApprovalId: string }).sessionApprovalId).toBe(
            resolved.resolution!.sessionApprovalId!
          )
          expect((yield* gate.evaluate(call("c3", "bash", "s1", { ...args, command: "make install" })))._tag).toBe(
            "RequireApproval"
          )
          expect(
            (yield* gate.evaluate(call("c4", "bash", "s1", { command: "make", env: { A: 1, B: [{ c: true }, 1] } })))
              ._tag
          )
            .toBe("RequireApproval")
        }))

      test("exact scope: the working directory must match when the approval recorded one", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(
            yield* gate.authorize(call("c1", "bash", "s1", { command: "ls" }, { workingDirectory: "/repo/a" }))
          )
          yield* gate.respond(pause.requestId, { decision: "approve_session" })
          expect(
            (yield* gate.evaluate(call("c2", "bash", "s1", { command: "ls" }, { workingDirectory: "/repo/a" })))._tag
          )
            .toBe("Allow")
          expect(
            (yield* gate.evaluate(call("c3", "bash", "s1", { command: "ls" }, { workingDirectory: "/repo/b" })))._tag
          )
            .toBe("RequireApproval")
          expect((yield* gate.evaluate(call("c4", "bash", "s1", { command: "ls" })))._tag).toBe("RequireApproval")
        }))

      test("tool scope (from the approver or the rule) covers any arguments", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const a = asPause(yield* gate.authorize(call("c1", "bash", "s1", { command: "ls" })))
          yield* gate.respond(a.requestId, { decision: "approve_session", scope: "tool" })
          expect((yield* gate.evaluate(call("c2", "bash", "s1", { command: "anything" })))._tag).toBe("Allow")
          // deploy's rule says sessionScope: tool
          const b = asPause(yield* gate.authorize(call("c3", "deploy", "s1", { env: "staging" })))
          yield* gate.respond(b.requestId, { decision: "approve_session" })
          expect((yield* gate.evaluate(call("c4", "deploy", "s1", { env: "prod" })))._tag).toBe("Allow")
        }))

      test("session approvals are listed and revoked one by one; revoked ones stop allowing", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const a = asPause(yield* gate.authorize(call("c1", "bash", "s1", { command: "ls" })))
          yield* gate.respond(a.requestId, { decision: "approve_session", respondedBy: "ana" })
          yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true, { grantedBy: "bo" })
          yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s2"), true)
          const listed = yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))
          expect(listed.map((x) => [x.toolName, x.scope, x.grantedBy])).toEqual([["bash", "exact", "ana"], [
            "deploy",
            "tool",
            "bo"
          ]])
          const revoked = yield* gate.revokeApproval(listed[0]!.id, { actor: "ops" })
          expect(revoked.revokedAt).toBeDefined()
          expect((yield* gate.evaluate(call("c2", "bash", "s1", { command: "ls" })))._tag).toBe("RequireApproval")
          expect((yield* gate.sessionApprovals(ToolCall.SessionKey.make("s1"))).map((x) => x.toolName)).toEqual([
            "deploy"
          ])
          expect((yield* expectFailure(gate.revokeApproval(listed[0]!.id)))._tag).toBe("SessionApprovalNotFound")
          expect(yield* gate.sessionApprovals()).toHaveLength(2)
        }))

      test("session approvals may expire", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const a = asPause(yield* gate.authorize(call("c1", "bash", "s1", { command: "ls" })))
          yield* gate.respond(a.requestId, { decision: "approve_session", sessionTtlMs: 60_000 })
          expect((yield* gate.evaluate(call("c2", "bash", "s1", { command: "ls" })))._tag).toBe("Allow")
          yield* TestClock.adjust("61 seconds")
          expect((yield* gate.evaluate(call("c3", "bash", "s1", { command: "ls" })))._tag).toBe("RequireApproval")
        }))

      test("a deny rule wins over a session approval", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          yield* gate.recordApproval("write_file", ToolCall.SessionKey.make("s1"), true)
          expect((yield* gate.evaluate(call("c1", "write_file", "s1", { path: "/tmp/x" })))._tag).toBe("Allow")
          expect(yield* gate.evaluate(call("c2", "write_file", "s1", { path: "/etc/passwd" }))).toMatchObject({
            _tag: "Deny",
            reason: "system files are off limits"
          })
        }))
    })

    describe("edited arguments", () => {
      test("approve with edited args: the tool runs with the edit, the audit keeps both", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const fiber = yield* Effect.fork(
            gate.gate(call("c1", "write_file", "s1", { path: "/tmp/a", text: "x" }), (allowed) =>
              Effect.succeed(allowed.call.args))
          )
          const [request] = yield* waitForPending(gate, 1)
          const resolved = yield* gate.respond(request!.requestId, {
            decision: "approve_once",
            editedArgs: { path: "/tmp/b", text: "x" },
            respondedBy: "ana"
          })
          expect(resolved.resolution!.editedArgs).toEqual({ path: "/tmp/b", text: "x" })
          expect(yield* Fiber.join(fiber)).toEqual({ path: "/tmp/b", text: "x" })
          const event = (yield* collect).find((e) =>
            e.type === "approval.resolved"
          )!
          expect(JSON.parse(event.args!)).toEqual({ path: "/tmp/a", text: "x" })
          expect(JSON.parse(event.editedArgs!)).toEqual({ path: "/tmp/b", text: "x" })
        }))

      test("an edit the policy denies ends denied (a deny rule still denies)", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const fiber = yield* Effect.fork(
            gate.gate(call("c1", "write_file", "s1", { path: "/tmp/a" }), () => Effect.succeed("ran"))
          )
          const [request] = yield* waitForPending(gate, 1)
          const resolved = yield* gate.respond(request!.requestId, {
            decision: "approve_once",
            editedArgs: { path: "/etc/shadow" }
          })
          expect(resolved.status).toBe("denied")
          expect(resolved.resolution!.reason).toContain("deny[1]")
          const error = yield* expectFailure(Fiber.join(fiber))
          expect(error).toMatchObject({ _tag: "ToolDenied", outcome: "denied" })
        }))

      test("approve_session with edited args grants the edited call, not the original", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "bash", "s1", { command: "rm -rf build" })))
          yield* gate.respond(pause.requestId, { decision: "approve_session", editedArgs: { command: "make clean" } })
          expect((yield* gate.evaluate(call("c2", "bash", "s1", { command: "make clean" })))._tag).toBe("Allow")
          expect((yield* gate.evaluate(call("c3", "bash", "s1", { command: "rm -rf build" })))._tag).toBe(
            "RequireApproval"
          )
        }))
    })

    describe("replay safety", () => {
      test("asking again for the same call id returns the same request, then runs the approved call once", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const c = call("c1", "bash", "s1", { command: "deploy.sh" })
          const first = asPause(yield* gate.authorize(c))
          const second = asPause(yield* gate.authorize(c))
          expect(second.requestId).toBe(first.requestId)
          expect(yield* gate.pending()).toHaveLength(1)
          yield* gate.respond(first.requestId, { decision: "approve_once" })
          let runs = 0
          yield* gate.gate(c, () => Effect.sync(() => runs++))
          const replay = yield* expectFailure(gate.gate(c, () => Effect.sync(() => runs++)))
          expect(replay._tag).toBe("CallAlreadyExecuted")
          expect(runs).toBe(1)
        }))

      test("a denied call id stays denied without asking again", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const c = call("c1", "bash")
          const pause = asPause(yield* gate.authorize(c))
          yield* gate.respond(pause.requestId, { decision: "deny", reason: "no" })
          const error = yield* expectFailure(gate.authorize(c))
          expect(error).toMatchObject({ _tag: "ToolDenied", outcome: "denied", requestId: pause.requestId })
          expect(yield* gate.pending()).toHaveLength(0)
        }))

      test("the same call id with other arguments is refused, not approved by the earlier answer", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "bash", "s1", { command: "ls" })))
          yield* gate.respond(pause.requestId, { decision: "approve_once" })
          const error = yield* expectFailure(gate.authorize(call("c1", "bash", "s1", { command: "rm -rf /" })))
          expect(error._tag).toBe("InvalidToolCall")
        }))

      test("a policy decision is on record per call id: asking again replays it, with no second judgement or event, even under a changed policy", () =>
        Effect.gen(function*() {
          const store = yield* ApprovalStore.ApprovalStore
          const gate = yield* ToolGate.ToolGate
          const from = yield* store.lastSeq
          const ls = call("c1", "ls", "s1", { path: "/tmp" })
          const first = yield* gate.authorize(ls)
          const again = yield* gate.authorize(ls)
          expect(again).toEqual(first)
          const denied = yield* expectFailure(gate.authorize(call("c2", "rm", "s1", { path: "/" })))
          expect(yield* expectFailure(gate.authorize(call("c2", "rm", "s1", { path: "/" })))).toEqual(denied)
          expect((yield* store.events({ afterSeq: from })).map((e) => [e.type, e.toolCallId, e.outcome])).toEqual<
            unknown
          >([
            ["decision", "c1", "allow"],
            ["decision", "c2", "deny"]
          ])
          // the same id with other arguments is another call in disguise
          expect((yield* expectFailure(gate.authorize(call("c1", "ls", "s1", { path: "/etc" }))))._tag).toBe(
            "InvalidToolCall"
          )
          expect((yield* expectFailure(gate.authorize(call("c2", "RM", "s1", { path: "/" }))))._tag).toBe("ToolDenied")
          // a gate with a new policy (a restart with other rules) replays what was decided...
          const relaxed = yield* ToolGate.make({
            policy: Policy.unsafeMake({ allow: ["rm"], requireApproval: ["ls"] })
          }).pipe(
            Effect.provideService(ApprovalStore.ApprovalStore, store)
          )
          expect((yield* expectFailure(relaxed.authorize(call("c2", "rm", "s1", { path: "/" }))))._tag).toBe(
            "ToolDenied"
          )
          expect(yield* relaxed.authorize(ls)).toEqual(first)
          // ...and judges new call ids by its own rules
          const fresh = yield* relaxed.authorize(call("c3", "rm", "s1", { path: "/" }))
          expect(PauseSignal.isPauseSignal(fresh) ? "paused" : fresh._tag).toBe("Allowed")
          asPause(yield* relaxed.authorize(call("c4", "ls")))
          // the record is per session
          expect(PauseSignal.isPauseSignal(yield* relaxed.authorize(call("c1", "ls", "s2", { path: "/tmp" })))).toBe(
            true
          )
        }))

      test("call ids are per session: the same id in another session is another call", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const a = asPause(yield* gate.authorize(call("c1", "bash", "s1")))
          const b = asPause(yield* gate.authorize(call("c1", "bash", "s2")))
          expect(a.requestId).not.toBe(b.requestId)
          yield* gate.respond(a.requestId, { decision: "approve_once" })
          expect(asPause(yield* gate.authorize(call("c1", "bash", "s2"))).requestId).toBe(b.requestId)
        }))
    })

    describe("bad input: a typed error, nothing changed", () => {
      test("malformed tool calls", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const before = yield* snapshot
          for (
            const bad of [
              { id: "", name: "bash", sessionKey: "s1" },
              { id: "c1", name: "bash" },
              { id: "c1", name: 7, sessionKey: "s1" },
              { id: "c1", name: "bash", sessionKey: "s1", args: { n: Number.NaN } },
              { id: "c1", name: "bash", sessionKey: "s1", args: "ls" }
            ]
          ) {
            const error = yield* expectFailure(gate.authorize(bad as never))
            expect(error._tag).toBe("InvalidToolCall")
            expect((error as unknown as { problems: Array<unknown> }).problems.length).toBeGreaterThan(0)
            expect((yield* expectFailure(gate.evaluate(bad as never)))._tag).toBe("InvalidToolCall")
          }
          expect(yield* snapshot).toEqual(before)
        }))

      test("unknown request ids", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const nope = ApprovalRequest.RequestId.make("req_nope")
          const before = yield* snapshot
          expect((yield* expectFailure(gate.respond(nope, { decision: "approve_once" })))._tag).toBe(
            "RequestNotFound"
          )
          expect((yield* expectFailure(gate.awaitDecision(nope)))._tag).toBe("RequestNotFound")
          expect((yield* expectFailure(gate.resume(nope)))._tag).toBe("RequestNotFound")
          expect((yield* expectFailure(gate.extend(nope, "1 minute")))._tag).toBe("RequestNotFound")
          expect(yield* snapshot).toEqual(before)
        }))

      test("malformed answers", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "bash")))
          const before = yield* snapshot
          for (
            const bad of [
              { decision: "maybe" },
              {},
              { decision: "approve_once", scope: "tool" },
              { decision: "deny", editedArgs: { a: 1 } },
              { decision: "approve_once", editedArgs: "rm" },
              { decision: "approve_session", sessionTtlMs: -5 }
            ]
          ) {
            const error = yield* expectFailure(gate.respond(pause.requestId, bad as never))
            expect(error._tag).toBe("InvalidResponse")
          }
          expect(yield* snapshot).toEqual(before)
          expect((yield* gate.getRequest(pause.requestId)).status).toBe("pending")
        }))

      test("an answer after expiry is refused and nothing changes", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const pause = asPause(yield* gate.authorize(call("c1", "deploy")))
          yield* advance("61 seconds")
          const before = yield* snapshot
          const error = yield* expectFailure(gate.respond(pause.requestId, { decision: "approve_session" }))
          expect(error._tag).toBe("RequestExpired")
          expect(yield* snapshot).toEqual(before)
          expect(yield* gate.hasApproval("deploy", ToolCall.SessionKey.make("s1"))).toBe(false)
        }))
    })

    describe("audit", () => {
      test("every decision emits exactly one event with rule, policy version, via, actor and timing", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          yield* gate.evaluate(call("c1", "ls"))
          yield* gate.evaluate(call("c2", "unknown_tool"))
          yield* Effect.either(gate.authorize(call("c3", "rm")))
          const pause = asPause(yield* gate.authorize(call("c4", "bash")))
          yield* TestClock.adjust("5 seconds")
          yield* gate.respond(pause.requestId, { decision: "approve_session", respondedBy: "ana" })
          yield* gate.evaluate(call("c5", "bash"))
          const events = yield* collect
          expect(events.map((e) => [e.type, e.outcome, e.rule, e.via])).toEqual([
            ["decision", "allow", "allow[1]", "policy"],
            ["decision", "allow", undefined, "default"],
            ["decision", "deny", "deny[0]", undefined],
            ["approval.requested", "pending", "requireApproval[0]", undefined],
            ["approval.resolved", "approved", "requireApproval[0]", undefined],
            ["decision", "allow", "requireApproval[0]", "sessionApproval"]
          ])
          expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6].map((n) => n + events[0]!.seq - 1))
          for (const e of events.filter((e) => e.type !== "approvals.cleared")) {
            expect(e.policyVersion).toBe(policy.version)
          }
          expect(events[4]).toMatchObject({ actor: "ana", elapsedMs: 5000, requestId: pause.requestId })
          expect(events[5]!.sessionApprovalId).toBe(events[4]!.sessionApprovalId!)
        }))

      test("several subscribers each receive every event in order", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const subscribers = yield* Effect.forEach([1, 2, 3], () =>
            Effect.fork(gate.audit.pipe(Stream.take(5), Stream.runCollect)))
          yield* Effect.yieldNow()
          yield* Effect.forEach(["c1", "c2", "c3", "c4", "c5"], (id) =>
            gate.evaluate(call(id, "ls")))
          const seen = yield* Effect.forEach(subscribers, (f) => Effect.map(Fiber.join(f), Chunk.toArray))
          const first = seen[0]!.map((e) => e.toolCallId)
          expect(first).toEqual<unknown>(["c1", "c2", "c3", "c4", "c5"])
          for (const s of seen) expect(s.map((e) => e.toolCallId)).toEqual(first)
        }))

      test("auditLog replays from a sequence number, then tails live, with no gap and no duplicate", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          yield* Effect.forEach(["c1", "c2", "c3"], (id) => gate.evaluate(call(id, "ls")))
          const afterSeq = (yield* collect)[0]!.seq
          const fiber = yield* Effect.fork(gate.auditLog({ afterSeq }).pipe(Stream.take(4), Stream.runCollect))
          yield* Effect.forEach(["c4", "c5"], (id) => gate.evaluate(call(id, "ls")))
          const events = Chunk.toArray(yield* Fiber.join(fiber))
          expect(events.map((e) => e.toolCallId)).toEqual<unknown>(["c2", "c3", "c4", "c5"])
          const sessionOnly = yield* gate.auditLog({ sessionKey: "s2" }).pipe(
            Stream.take(1),
            Stream.runCollect,
            Effect.fork
          )
          yield* gate.evaluate(call("c6", "ls", "s1"))
          yield* gate.evaluate(call("c7", "ls", "s2"))
          expect(Chunk.toArray(yield* Fiber.join(sessionOnly)).map((e) => e.toolCallId)).toEqual<unknown>(["c7"])
        }))

      test("live events carry their links in the hash chain, as the log reads them back", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const store = yield* ApprovalStore.ApprovalStore
          const from = yield* store.lastSeq
          const live = yield* Effect.fork(gate.audit.pipe(Stream.take(4), Stream.runCollect))
          yield* Effect.yieldNow()
          yield* Effect.forEach(["c1", "c2", "c3", "c4"], (id) => gate.evaluate(call(id, "ls")))
          const seen = Chunk.toArray(yield* Fiber.join(live))
          const read = yield* store.events({ afterSeq: from })
          expect(seen.every((e) => typeof e.hash === "string" && e.hash.length === 64)).toBe(true)
          expect(seen.map((e) => [e.seq, e.prevHash, e.hash])).toEqual(read.map((e) => [e.seq, e.prevHash, e.hash]))
          for (let i = 1; i < seen.length; i++) expect(seen[i]!.prevHash).toBe(seen[i - 1]!.hash)
          expect((yield* AuditChain.verify()).valid).toBe(true)
        }))

      test("beforePolicyDecision / afterPolicyDecision hooks see every decision", () =>
        Effect.gen(function*() {
          const seen: Array<string> = []
          const store = yield* ApprovalStore.ApprovalStore
          const gate = yield* ToolGate.make({
            policy,
            hooks: {
              beforePolicyDecision: (c) => Effect.sync(() => seen.push(`before:${c.id}`)),
              afterPolicyDecision: (c, d) => Effect.sync(() => seen.push(`after:${c.id}:${d._tag}`))
            }
          }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))
          yield* gate.evaluate(call("c1", "ls"))
          yield* Effect.either(gate.authorize(call("c2", "rm")))
          yield* gate.authorize(call("c3", "bash"))
          expect(seen).toEqual([
            "before:c1",
            "after:c1:Allow",
            "before:c2",
            "after:c2:Deny",
            "before:c3",
            "after:c3:RequireApproval"
          ])
        }))

      test("hooks never see a call answered from its record (the same call id asked again judges nothing)", () =>
        Effect.gen(function*() {
          const seen: Array<string> = []
          const store = yield* ApprovalStore.ApprovalStore
          const gate = yield* ToolGate.make({
            policy,
            hooks: {
              beforePolicyDecision: (c) => Effect.sync(() => seen.push(`before:${c.id}`)),
              afterPolicyDecision: (c, d) => Effect.sync(() => seen.push(`after:${c.id}:${d._tag}`))
            }
          }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))
          yield* gate.authorize(call("c1", "ls"))
          yield* gate.authorize(call("c1", "ls"))
          yield* Effect.either(gate.authorize(call("c2", "rm")))
          yield* Effect.either(gate.authorize(call("c2", "rm")))
          expect(seen).toEqual(["before:c1", "after:c1:Allow", "before:c2", "after:c2:Deny"])
        }))

      test("a shadow (candidate) policy is never enforced; each call it would decide differently is audited as policy.shadow", () =>
        Effect.gen(function*() {
          const store = yield* ApprovalStore.ApprovalStore
          // the candidate lets bash through, asks before ls, denies deploy; agrees on rm
          const candidate = Policy.unsafeMake({
            deny: ["rm", "deploy"],
            requireApproval: ["ls"],
            allow: ["bash", "read_file"]
          })
          const gate = yield* ToolGate.make({ policy, shadowPolicy: candidate }).pipe(
            Effect.provideService(ApprovalStore.ApprovalStore, store)
          )
          expect(gate.shadowPolicy?.version).toBe(candidate.version)
          const from = yield* store.lastSeq
          // enforced: allow, deny, pause, pause, allow
          expect((yield* gate.evaluate(call("c1", "ls")))._tag).toBe("Allow")
          expect((yield* Effect.either(gate.authorize(call("c2", "rm"))))._tag).toBe("Left")
          const paused = asPause(yield* gate.authorize(call("c3", "bash", "s1", { command: "make" })))
          asPause(yield* gate.authorize(call("c4", "deploy")))
          const readFile = yield* gate.authorize(call("c5", "read_file"))
          expect(PauseSignal.isPauseSignal(readFile) ? "paused" : readFile._tag).toBe("Allowed")
          const events = yield* store.events({ afterSeq: from })
          const shadows = events.filter((e) => e.type === "policy.shadow")
          expect(shadows.map((e) => [e.toolCallId, e.enforced, e.outcome, e.rule])).toEqual([
            ["c1", "allow", "pending", "requireApproval[0]"],
            ["c3", "pending", "allow", "allow[0]"],
            ["c4", "pending", "deny", "deny[1]"]
          ])
          expect(shadows.every((e) => e.policyVersion === candidate.version)).toBe(true)
          expect(shadows[1]!.requestId).toBe(paused.requestId)
          expect(shadows[1]!.reason).toContain("candidate policy would allow")
          // enforcement is the enforced policy's alone: one decision event per call, bash still pending
          expect(events.filter((e) => e.type === "decision").map((e) => [e.toolCallId, e.outcome])).toEqual<unknown>([
            ["c1", "allow"],
            ["c2", "deny"],
            ["c5", "allow"]
          ])
          expect((yield* gate.pending()).map(callId)).toEqual(["c3", "c4"])
          // without a candidate, no shadow events
          const plain = yield* ToolGate.make({ policy }).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))
          const before = yield* store.lastSeq
          yield* plain.evaluate(call("c6", "ls"))
          expect((yield* store.events({ afterSeq: before })).map((e) => e.type)).toEqual(["decision"])
        }))

      test("the store commits a request's policy.shadow event with the request, under its id, and only with it", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const store = yield* ApprovalStore.ApprovalStore
          const template = yield* store.getRequest(asPause(yield* gate.authorize(call("c1", "bash"))).requestId).pipe(
            Effect.map((found) => found.pipe(Option.getOrThrow))
          )
          // every store keeps encoded rows and decodes them with the same codecs: what it returns is frozen
          expect(Object.isFrozen(template) && Object.isFrozen(template.toolCall.args)).toBe(true)
          const asked: ApprovalRequest.ApprovalRequest = {
            ...template,
            requestId: ApprovalRequest.RequestId.make("shadowed-request"),
            toolCall: { ...template.toolCall, id: ToolCall.ToolCallId.make("c2") }
          }
          const requested = AuditEvent.approvalRequested(asked, ToolCall.canonicalArgs(asked.toolCall.args))
          const shadow: typeof AuditEvent.ShadowEvent.Type = {
            at: asked.createdAt,
            type: "policy.shadow",
            outcome: "allow",
            sessionKey: asked.toolCall.sessionKey,
            toolCallId: asked.toolCall.id,
            toolName: asked.toolCall.name,
            policyVersion: "candidate",
            reason: "the candidate policy would allow",
            args: ToolCall.canonicalArgs(asked.toolCall.args),
            enforced: "pending"
          }
          const from = yield* store.lastSeq
          const created = yield* store.createRequest(asked, requested, shadow)
          if (created._tag !== "Created") throw new Error(`expected Created, got ${created._tag}`)
          // its links in the hash chain aside
          const { hash: _hash, prevHash: _prevHash, ...written } = created.shadow!
          expect(written).toEqual<unknown>({ ...shadow, requestId: asked.requestId, seq: created.event.seq + 1 })
          const events = yield* store.events({ afterSeq: from })
          expect(events.map((e) => [e.seq, e.type, e.requestId])).toEqual([
            [from + 1, "approval.requested", asked.requestId],
            [from + 2, "policy.shadow", asked.requestId]
          ])
          // asked again: the request exists, so neither event is written again
          const again = yield* store.createRequest(asked, requested, shadow)
          expect(again._tag).toBe("Existing")
          expect(yield* store.lastSeq).toBe(from + 2)
        }))

      test("an event without a field its type carries is refused by the store, and nothing is written", () =>
        Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const store = yield* ApprovalStore.ApprovalStore
          yield* gate.evaluate(call("c1", "ls"))
          const [written] = yield* store.events()
          if (written?.type !== "decision") throw new Error("expected the decision event")
          const { seq: _, toolName: __, ...nameless } = written
          const from = yield* store.lastSeq
          // what a JavaScript caller could pass: the types would not let it through
          const refused = yield* Effect.either(store.append([nameless as unknown as AuditEvent.UnsequencedEvent]))
          expect(Either.isLeft(refused) && refused.left._tag).toBe("PersistenceError")
          const { seq: ___, ...whole } = written
          expect(
            yield* Effect.either(
              store.append([{ ...whole, type: "approval.resolved" } as unknown as AuditEvent.UnsequencedEvent])
            )
          )
            .toMatchObject({ _tag: "Left", left: { _tag: "PersistenceError" } })
          expect(yield* store.lastSeq).toBe(from)
          expect((yield* store.append([whole])).map((e) => e.seq)).toEqual([from + 1])
        }))
    })
  })
}

/** The whole log so far. */
export const collect = Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.events())

/** Lets forked gates reach their pause, then returns the pending requests (oldest first). */
export const waitForPending = (gate: ToolGate.Service, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1000; i++) {
      const pending = yield* gate.pending()
      if (pending.length >= count) return pending as ReadonlyArray<ApprovalRequest.ApprovalRequest>
      yield* Effect.yieldNow()
    }
    throw new Error(`expected ${count} pending requests`)
  })
