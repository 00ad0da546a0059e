/**
 * Issue 10, critical: a tool-call id names one call within a session. Whenever a record exists
 * for `(session, call id)`, whether found by a sequential replay or hit by a racing insert of a
 * decision or of a request, or met by `createApprovalRequest`, the whole call is compared (tool
 * name case-insensitively, canonical arguments, agent, intent, working directory). A mismatch is
 * `InvalidToolCall` at `id`, audited as `call.refused`; it never borrows the other call's
 * decision or request, and its tool never runs.
 *
 * Every scenario runs on memory, SQLite and PostgreSQL (skipped, and said so, without
 * `TOOLGATE_PG_URL`), with one gate and with two gates (two connections) on one store.
 */
import { ApprovalRequest, PauseSignal, Policy, ToolCall, type ToolGate } from "@tool-gate/core"
import { describe, expect } from "bun:test"
import { Effect, Either } from "effect"
import { it } from "../support/effectTest.js"
import { argsOf, eventsOf, isIdReuse, type Outcome, recorder, tagOf } from "./support/outcomes.js"
import { type Backend, backends, type Gates } from "./support/twoGates.js"

const denyRm = Policy.unsafeMake({ deny: [{ tool: "bash", args: { command: "rm *" } }], allow: ["bash"] })
const askBash = Policy.unsafeMake({ requireApproval: ["bash"] })

const bash = (id: string, command: string, extra: Partial<ToolCall.ToolCallInput> = {}): ToolCall.ToolCallInput => ({
  id,
  name: "bash",
  sessionKey: "s1",
  args: { command },
  ...extra
})

/** The `call.refused` event a refused call must leave, with the refused call's own fields. */
const expectRefusedEvent = (events: ReadonlyArray<{ readonly type: string }>, refused: ToolCall.ToolCallInput) => {
  const found = (events as ReadonlyArray<Record<string, unknown>>).filter((e) => e.type === "call.refused")
  expect(found).toHaveLength(1)
  expect(found[0]).toMatchObject({
    type: "call.refused",
    outcome: "deny",
    sessionKey: refused.sessionKey,
    toolCallId: refused.id,
    args: argsOf(refused)
  })
  expect(String(found[0]!.toolName).toLowerCase()).toBe(refused.name.toLowerCase())
}

const ROUNDS = { memory: 50, sqlite: 50, postgres: 30 } as Record<string, number>

const raceSuite = (backend: Backend, rounds: number) => {
  const open = (policy: Policy.Policy) => backend({ policy, sweepInterval: "50 millis" })

  for (const gates of ["one gate", "two gates on one store"] as const) {
    const pick = (g: { a: ToolGate.Service; b: ToolGate.Service }) => gates === "one gate" ? [g.a, g.a] : [g.a, g.b]

    it.live(
      `${gates}: a concurrent call reusing an allowed call's id never runs "rm -rf /" and is refused, audited (${rounds} rounds)`,
      () =>
        Effect.gen(function*() {
          const g = yield* open(denyRm)
          const [first, second] = pick(g)
          const rec = recorder()
          const played: Array<{ id: string; ls: Outcome; rm: Outcome }> = []
          for (let i = 0; i < rounds; i++) {
            const id = `c${i}`
            const ls = bash(id, "ls")
            const rm = bash(id, "rm -rf /")
            // alternate who starts first, so either side can win the insert
            const [lsOut, rmOut] = i % 2 === 0
              ? yield* Effect.all([rec.gate(first!, ls), rec.gate(second!, rm)], { concurrency: "unbounded" })
              : yield* Effect.map(
                Effect.all([rec.gate(second!, rm), rec.gate(first!, ls)], { concurrency: "unbounded" }),
                ([r, l]) => [l, r] as const
              )
            played.push({ id, ls: lsOut, rm: rmOut })
          }
          // the attack: how many rounds ran the denied command
          const leaked = rec.runs.filter((r) => r.got.args.command === "rm -rf /")
          expect({ rmRanInRounds: leaked.length, of: rounds }).toEqual({ rmRanInRounds: 0, of: rounds })
          // whatever ran is exactly the call that asked for it
          for (const run of rec.runs) expect(argsOf(run.got)).toBe(argsOf(run.asked))
          // exactly one of the two is judged; the other is refused as a reused id
          const shapes = played.map((r) => `${r.ls._tag}/${r.rm._tag}`)
          for (const shape of shapes) expect(["ran/refused", "refused/denied"]).toContain(shape)
          const events = yield* g.store.events({ sessionKey: "s1" })
          for (const r of played) {
            const own = eventsOf(events, "s1", r.id)
            const decisions = own.filter((e) => e.type === "decision")
            expect(decisions).toHaveLength(1)
            expect(decisions[0]!.outcome).toBe(r.ls._tag === "ran" ? "allow" : "deny")
            expectRefusedEvent(own, r.ls._tag === "refused" ? bash(r.id, "ls") : bash(r.id, "rm -rf /"))
          }
        }),
      120_000
    )

    it.live(
      `${gates}: under requireApproval two concurrent callers with one id and different args never share a PauseSignal`,
      () =>
        Effect.gen(function*() {
          const g = yield* open(askBash)
          const [first, second] = pick(g)
          const rec = recorder()
          const n = Math.min(rounds, 20)
          for (let i = 0; i < n; i++) {
            const id = `p${i}`
            const ls = bash(id, "ls")
            const rm = bash(id, "rm -rf /")
            const [lsOut, rmOut] = yield* Effect.all([rec.authorize(first!, ls), rec.authorize(second!, rm)], {
              concurrency: "unbounded"
            })
            const shape = `${lsOut._tag}/${rmOut._tag}`
            expect(["paused/refused", "refused/paused"]).toContain(shape)
            const [winner, paused] = lsOut._tag === "paused" ? [ls, lsOut] : [rm, rmOut as Outcome]
            const loser = winner === ls ? rm : ls
            const request = yield* g.a.getRequest(
              ApprovalRequest.RequestId.make((paused as { requestId: string }).requestId)
            )
            expect(argsOf(request.toolCall)).toBe(argsOf(winner))
            const pending = (yield* g.a.pending({ sessionKey: ToolCall.SessionKey.make("s1") })).filter((r) =>
              r.toolCall.id === id
            )
            expect(pending.map((r) => r.requestId)).toEqual([request.requestId])
            const own = eventsOf(yield* g.store.events({ sessionKey: "s1" }), "s1", id)
            expect(own.filter((e) => e.type === "approval.requested")).toHaveLength(1)
            expectRefusedEvent(own, loser)
          }
          expect(rec.runs).toHaveLength(0)
        }),
      120_000
    )
    it.live(
      `${gates}: a call racing a request insert with a policy decision for the same id: one is judged, the other refused`,
      () =>
        Effect.gen(function*() {
          const g = yield* open(
            Policy.unsafeMake({ requireApproval: [{ tool: "bash", agent: "new" }], allow: ["bash"] })
          )
          const [first, second] = pick(g)
          const rec = recorder()
          const n = Math.min(rounds, 30)
          for (let i = 0; i < n; i++) {
            const id = `x${i}`
            const asking = bash(id, "ls", { agentId: "new" })
            const allowed = bash(id, "ls", { agentId: "old" })
            const [askOut, allowOut] = yield* Effect.all([
              rec.authorize(first!, asking),
              rec.authorize(second!, allowed)
            ], {
              concurrency: "unbounded"
            })
            expect(["paused/refused", "refused/ran"]).toContain(`${askOut._tag}/${allowOut._tag}`)
            const own = eventsOf(yield* g.store.events({ sessionKey: "s1" }), "s1", id)
            expect(own.filter((e) => e.type === "decision" || e.type === "approval.requested")).toHaveLength(1)
            expectRefusedEvent(own, askOut._tag === "refused" ? asking : allowed)
          }
          for (const run of rec.runs) expect(run.got.agentId).toBe(run.asked.agentId)
        }),
      120_000
    )
  }

  const scenario = (title: string, policy: Policy.Policy, body: (g: Gates) => Effect.Effect<unknown, unknown>) =>
    it.live(title, () => Effect.flatMap(open(policy), body), 60_000)

  for (
    const [field, policy, trusted, intruder] of [
      [
        "agentId",
        Policy.unsafeMake({ deny: [{ tool: "bash", agent: "intruder" }], allow: ["bash"] }),
        { agentId: "trusted" },
        { agentId: "intruder" }
      ],
      [
        "intentId",
        Policy.unsafeMake({ deny: [{ tool: "bash", intent: "exfiltrate" }], allow: ["bash"] }),
        { intentId: "build" },
        { intentId: "exfiltrate" }
      ],
      ["workingDirectory", denyRm, { workingDirectory: "/tmp/sandbox" }, { workingDirectory: "/" }],
      ["tool name", denyRm, {}, { name: "deploy" }],
      ["agentId absent", Policy.unsafeMake({ deny: [{ tool: "bash", agent: "intruder" }], allow: ["bash"] }), {
        agentId: "trusted"
      }, {}]
    ] as const
  ) {
    scenario(
      `replaying an allowed call's id with another ${field} is InvalidToolCall, audited, not Allowed`,
      policy,
      (g) =>
        Effect.gen(function*() {
          const rec = recorder()
          const allowed = bash("c1", "ls", trusted)
          const other = bash("c1", "ls", intruder)
          expect(yield* rec.gate(g.a, allowed)).toEqual({ _tag: "ran" })
          const before = yield* g.store.lastSeq
          for (const gate of [g.a, g.b]) {
            const again = yield* Effect.either(gate.gate(other, () => Effect.die("the refused call ran")))
            expect(Either.isLeft(again) && isIdReuse(again.left)).toBe(true)
          }
          expect(rec.runs).toHaveLength(1)
          const own = eventsOf(yield* g.store.events({ afterSeq: before }), "s1", "c1")
          expect(own.filter((e) => e.type === "decision")).toHaveLength(0)
          expect(own.filter((e) => e.type === "call.refused")).toHaveLength(2)
          expect(own[0]).toMatchObject({ type: "call.refused", outcome: "deny", args: argsOf(other) })
        })
    )
  }

  scenario(
    "64 calls in flight over 16 ids (the SQL stores write them in merged batches): one judgement per id, repeats of the same call replay it, other calls are refused",
    denyRm,
    (g) =>
      Effect.gen(function*() {
        const rec = recorder()
        // ids m0..m15, each asked four times: twice as "ls" (the same call), then "rm -rf /" and "pwd"
        const calls = Array.from({ length: 64 }, (_, i) => bash(`m${i % 16}`, ["ls", "ls", "rm -rf /", "pwd"][i >> 4]!))
        const outcomes = yield* Effect.forEach(
          calls,
          (call, i) => Effect.zipRight(Effect.yieldNow(), rec.authorize(i % 2 === 0 ? g.a : g.b, call)),
          { concurrency: "unbounded" }
        )
        const events = yield* g.store.events({ sessionKey: "s1" })
        for (let id = 0; id < 16; id++) {
          const own = eventsOf(events, "s1", `m${id}`)
          const decisions = own.filter((e) => e.type === "decision")
          expect(decisions).toHaveLength(1)
          const winner = calls.find((call, i) => i % 16 === id && argsOf(call) === decisions[0]!.args)!
          for (let i = id; i < 64; i += 16) {
            const same = argsOf(calls[i]!) === argsOf(winner)
            const expected = !same ? "refused" : winner.args!.command === "rm -rf /" ? "denied" : "ran"
            expect({ i, outcome: outcomes[i]!._tag }).toEqual({ i, outcome: expected })
          }
          expect(own.filter((e) => e.type === "call.refused")).toHaveLength(
            calls.filter((call, i) => i % 16 === id && argsOf(call) !== argsOf(winner)).length
          )
        }
        for (const run of rec.runs) expect(argsOf(run.got)).toBe(argsOf(run.asked))
        expect(rec.runs.some((run) => run.got.args.command === "rm -rf /")).toBe(false)
      })
  )

  scenario(
    "16 approved calls, each resumed four times at once (the SQL stores spend them in merged batches): each runs exactly once",
    askBash,
    (g) =>
      Effect.gen(function*() {
        const rec = recorder()
        const calls = Array.from({ length: 16 }, (_, i) => bash(`a${i}`, `make ${i}`))
        for (const call of calls) {
          const paused = yield* g.a.authorize(call)
          if (!PauseSignal.isPauseSignal(paused)) throw new Error("expected a pause")
          yield* g.a.respond(paused.requestId, { decision: "approve_once", respondedBy: "op" })
        }
        const outcomes = yield* Effect.forEach(
          Array.from({ length: 64 }, (_, i) => i),
          (i) => Effect.zipRight(Effect.yieldNow(), rec.authorize(i % 2 === 0 ? g.a : g.b, calls[i % 16]!)),
          { concurrency: "unbounded" }
        )
        for (let id = 0; id < 16; id++) {
          const own = outcomes.filter((_, i) => i % 16 === id).map((outcome) => outcome._tag)
          expect({ id, ran: own.filter((tag) => tag === "ran").length }).toEqual({ id, ran: 1 })
        }
        expect(rec.runs.map((run) => run.asked.id).sort()).toEqual(calls.map((call) => call.id).sort())
      })
  )

  scenario(
    "replaying a policy-denied call's id with other arguments is InvalidToolCall, never the denied call's decision",
    denyRm,
    (g) =>
      Effect.gen(function*() {
        const denied = yield* Effect.either(g.a.authorize(bash("c1", "rm -rf /")))
        expect(Either.isLeft(denied) && tagOf(denied.left)).toBe("ToolDenied")
        const other = yield* Effect.either(g.b.authorize(bash("c1", "ls")))
        expect(Either.isLeft(other) && isIdReuse(other.left)).toBe(true)
        expectRefusedEvent(eventsOf(yield* g.store.events(), "s1", "c1"), bash("c1", "ls"))
      })
  )

  scenario(
    "the same call asked again (tool name in other case, keys in other order) replays the decision with no new event",
    denyRm,
    (g) =>
      Effect.gen(function*() {
        const rec = recorder()
        const call = {
          ...bash("c1", "ls", { agentId: "a", intentId: "i", workingDirectory: "/w" }),
          args: { command: "ls", flags: "-l" }
        }
        expect(yield* rec.gate(g.a, call)).toEqual({ _tag: "ran" })
        const before = yield* g.store.lastSeq
        const same = { ...call, name: "BASH", args: { flags: "-l", command: "ls" } }
        expect(yield* rec.gate(g.a, same)).toEqual({ _tag: "ran" })
        expect(yield* rec.gate(g.b, same)).toEqual({ _tag: "ran" })
        expect(yield* g.store.lastSeq).toBe(before)
        for (const run of rec.runs) expect(argsOf(run.got)).toBe(argsOf(call))
      })
  )

  scenario(
    "an approved request's id reused by another agent is InvalidToolCall and leaves the approval unspent",
    askBash,
    (g) =>
      Effect.gen(function*() {
        const mine = bash("c1", "ls", { agentId: "a" })
        const paused = yield* g.a.authorize(mine)
        if (!PauseSignal.isPauseSignal(paused)) throw new Error("expected a pause")
        yield* g.a.respond(paused.requestId, { decision: "approve_once", respondedBy: "op" })
        for (const other of [bash("c1", "ls", { agentId: "b" }), bash("c1", "rm -rf /", { agentId: "a" })]) {
          const stolen = yield* Effect.either(g.b.authorize(other))
          expect(Either.isLeft(stolen) && isIdReuse(stolen.left)).toBe(true)
        }
        const refused = eventsOf(yield* g.store.events(), "s1", "c1").filter((e) => e.type === "call.refused")
        expect(refused.map((e) => e.args)).toEqual([argsOf(bash("c1", "ls")), argsOf(bash("c1", "rm -rf /"))])
        // the approval is still the asker's, once
        const rec = recorder()
        expect(yield* rec.authorize(g.a, mine)).toEqual({ _tag: "ran" })
        expect(rec.runs[0]!.got.agentId).toBe("a")
      })
  )

  scenario(
    "createApprovalRequest for a reused id with another call is InvalidToolCall, never the existing (approved) request",
    askBash,
    (g) =>
      Effect.gen(function*() {
        const mine = bash("c1", "ls")
        const decision = yield* g.a.evaluate(mine)
        const request = yield* g.a.createApprovalRequest(decision, mine)
        expect(request).toBeDefined()
        yield* g.a.respond(request!.requestId, { decision: "approve_once" })
        expect((yield* g.b.createApprovalRequest(decision, mine))?.requestId).toBe(request!.requestId)
        const before = yield* g.store.lastSeq
        for (
          const other of [
            bash("c1", "rm -rf /"),
            bash("c1", "ls", { agentId: "b" }),
            bash("c1", "ls", { intentId: "i" }),
            bash("c1", "ls", { workingDirectory: "/" }),
            { ...mine, name: "deploy" }
          ]
        ) {
          // the caller hands in the decision it was given for the first call: the record must still be compared
          const found = yield* Effect.either(g.b.createApprovalRequest(decision, other))
          if (Either.isRight(found)) {
            throw new Error(`createApprovalRequest returned ${found.right?.requestId} for ${JSON.stringify(other)}`)
          }
          expect(isIdReuse(found.left)).toBe(true)
        }
        const refused = (yield* g.store.events({ afterSeq: before })).filter((e) => e.type === "call.refused")
        expect(refused).toHaveLength(5)
        expect(refused[0]).toMatchObject({ sessionKey: "s1", toolCallId: "c1", args: argsOf(bash("c1", "rm -rf /")) })
      })
  )
}

for (const { name, backend, skip } of backends("tests/security/sameCallId.test.ts")) {
  ;(skip ? describe.skip : describe)(`a tool-call id names one call (${name})`, () => {
    raceSuite(backend, ROUNDS[name]!)
  })
}
