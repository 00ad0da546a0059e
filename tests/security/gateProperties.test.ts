/**
 * Issue 10, "proof that stays": the gate's promise as properties. fast-check draws a policy
 * (allow / deny / requireApproval over a few tools and argument globs) and a list of steps: calls
 * (few ids, two sessions, so they collide; `authorize` or a waiting `gate`), answers (approve once,
 * approve for the session exact or tool-wide, deny, some with edited arguments or a short session
 * TTL), revocations (`revokeApproval`, `clearApprovals`, `recordApproval(false)`), grants, extensions
 * and sweeps. The steps run in three concurrent lanes across TWO gates on ONE store, on the real
 * clock with TTLs of tens of milliseconds, so requests expire while others answer them. Afterwards
 * the invariants are checked from what the tools were handed and from the audit log:
 *
 * - no call runs unless its own call (name, canonical args, agent, intent, working directory,
 *   session) was allowed by the policy, approved by a human (the approved arguments being the
 *   edit when there was one, which the policy does not deny), or covered by a session approval of
 *   its own session; an approval runs once;
 * - no approval crosses sessions: every `decision` with `via: "sessionApproval"` cites an approval
 *   granted in the same session, active when the decision was made;
 * - after a revocation commits, no `decision` with a later `seq` cites the revoked approval;
 * - every request resolves at most once, and every resolved request has exactly one resolution event;
 * - every decision a caller observed has exactly one audit event (with the caller's arguments when
 *   the event carries them), replays add none, and every refused reuse of an id one `call.refused`;
 * - `seq` has no holes.
 *
 * Memory (one store shared), SQLite (two connections on one file) and PostgreSQL (two pools on one
 * schema; skipped without `TOOLGATE_PG_URL`). On failure fast-check prints the seed and the steps;
 * replay with TOOLGATE_FC_SEED=<seed>; TOOLGATE_FC_SHRINK=1 shrinks the counterexample (slow on SQL).
 */
import {
  ApprovalRequest,
  type AuditEvent,
  PauseSignal,
  Policy,
  type SessionApproval,
  ToolCall,
  type ToolGate
} from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Effect, FastCheck as fc, Option } from "effect"
import { argsOf, classify, holesIn, type Outcome, type Run, toolRun } from "./support/outcomes.js"
import { type Backend, backends, type Gates } from "./support/twoGates.js"

const TOOLS = ["bash", "deploy", "read"] as const
const COMMANDS = ["ls", "rm -rf /", "cat x"] as const
const SESSIONS = ["s1", "s2"] as const
const IDS = ["c1", "c2", "c3"] as const

const policyArb = fc.record({
  default: fc.constantFrom("allow" as const, "deny" as const, "requireApproval" as const),
  ttlMs: fc.constantFrom(60, 150),
  deny: fc.subarray<Policy.Matcher>([
    { tool: "bash", args: { command: "rm *" } },
    "deploy",
    { tool: "*", agent: "evil" },
    "read"
  ], { maxLength: 2 }),
  requireApproval: fc.subarray<Policy.Matcher>([
    "bash",
    "deploy",
    { tool: "deploy", sessionScope: "tool" },
    { tool: "bash", args: { command: "cat*" }, ttlMs: 40 },
    "read"
  ], { maxLength: 3 }),
  allow: fc.subarray<Policy.Matcher>(["read", "bash", { tool: "bash", args: { command: "ls" } }], { maxLength: 2 })
})

const gateIx = fc.constantFrom(0 as const, 1 as const)
const lane = fc.nat({ max: 2 })
const maybe = <A>(arb: fc.Arbitrary<A>) => fc.option(arb, { nil: undefined, freq: 2 })

const callStep = fc.record({
  _tag: fc.constant("call" as const),
  via: fc.constantFrom("authorize" as const, "gate" as const),
  gate: gateIx,
  lane,
  session: fc.constantFrom(...SESSIONS),
  id: fc.constantFrom(...IDS),
  tool: fc.constantFrom(...TOOLS),
  command: fc.constantFrom(...COMMANDS),
  agent: maybe(fc.constantFrom("good", "evil")),
  wd: maybe(fc.constantFrom("/w", "/")),
  toolCase: fc.boolean()
})

const respondStep = fc.record({
  _tag: fc.constant("respond" as const),
  gate: gateIx,
  lane,
  pick: fc.nat({ max: 7 }),
  decision: fc.constantFrom("approve_once" as const, "approve_session" as const, "deny" as const),
  scope: maybe(fc.constantFrom("exact" as const, "tool" as const)),
  sessionTtlMs: maybe(fc.constant(30)),
  edit: maybe(fc.constantFrom(...COMMANDS))
})

const revokeStep = fc.record({ _tag: fc.constant("revoke" as const), gate: gateIx, lane, pick: fc.nat({ max: 7 }) })
const clearStep = fc.record({
  _tag: fc.constant("clear" as const),
  gate: gateIx,
  lane,
  session: maybe(fc.constantFrom(...SESSIONS))
})
const recordStep = fc.record({
  _tag: fc.constant("record" as const),
  gate: gateIx,
  lane,
  tool: fc.constantFrom(...TOOLS),
  session: fc.constantFrom(...SESSIONS),
  approved: fc.boolean(),
  ttlMs: maybe(fc.constant(30))
})
const extendStep = fc.record({
  _tag: fc.constant("extend" as const),
  gate: gateIx,
  lane,
  pick: fc.nat({ max: 7 }),
  ms: fc.constantFrom(20, 80)
})
const sweepStep = fc.record({ _tag: fc.constant("sweep" as const), gate: gateIx, lane })

const stepsArb = fc.array(
  fc.oneof(
    { arbitrary: callStep, weight: 8 },
    { arbitrary: respondStep, weight: 4 },
    { arbitrary: revokeStep, weight: 1 },
    { arbitrary: clearStep, weight: 1 },
    { arbitrary: recordStep, weight: 2 },
    { arbitrary: extendStep, weight: 1 },
    { arbitrary: sweepStep, weight: 1 }
  ),
  { minLength: 3, maxLength: 14 }
)

type Step = typeof stepsArb extends fc.Arbitrary<ReadonlyArray<infer S>> ? S : never
type CallStep = Extract<Step, { _tag: "call" }>

const toInput = (step: CallStep): ToolCall.ToolCallInput => ({
  id: step.id,
  name: step.toolCase ? step.tool.toUpperCase() : step.tool,
  sessionKey: step.session,
  args: { command: step.command },
  ...(step.agent !== undefined ? { agentId: step.agent } : {}),
  ...(step.wd !== undefined ? { workingDirectory: step.wd } : {})
})

interface Observed {
  readonly input: ToolCall.ToolCallInput
  readonly outcome: Outcome
  readonly run: Run | undefined
}

/** Runs the steps in their lanes, concurrently, over the two gates; returns what callers saw. */
const execute = (gates: Gates, steps: ReadonlyArray<Step>) =>
  Effect.gen(function*() {
    const observed: Array<Observed> = []
    const runs: Array<Run> = []
    const known = new Set<string>()
    const pick = <A>(items: ReadonlyArray<A>, i: number): A | undefined => items[i % Math.max(1, items.length)]

    const call = (gate: ToolGate.Service, step: CallStep) => {
      const input = toInput(step)
      let run: Run | undefined
      const runTool = (allowed: ToolGate.Allowed) =>
        Effect.sync(() => {
          run = toolRun(input, allowed)
          runs.push(run)
        })
      const asked = step.via === "gate"
        ? gate.gate(input, runTool)
        : Effect.tap(
          gate.authorize(input),
          (result) => PauseSignal.isPauseSignal(result) ? Effect.void : runTool(result)
        )
      return Effect.map(Effect.either(asked), (result) => {
        const outcome = classify(result)
        if (outcome._tag === "paused") known.add(outcome.requestId)
        observed.push({ input, outcome, run })
      })
    }

    const step = (s: Step): Effect.Effect<unknown, unknown> => {
      const gate = s.gate === 0 ? gates.a : gates.b
      switch (s._tag) {
        case "call":
          return call(gate, s)
        case "respond":
          return Effect.gen(function*() {
            const pending = (yield* gate.pending()).map((r) => r.requestId)
            pending.forEach((id) => known.add(id))
            const target = pending.length > 0 ? pick(pending, s.pick) : pick([...known], s.pick)
            if (target === undefined) return
            const approving = s.decision !== "deny"
            yield* gate.respond(ApprovalRequest.RequestId.make(target), {
              decision: s.decision,
              respondedBy: `op-${s.gate}`,
              ...(s.decision === "approve_session" && s.scope !== undefined ? { scope: s.scope } : {}),
              ...(s.decision === "approve_session" && s.sessionTtlMs !== undefined
                ? { sessionTtlMs: s.sessionTtlMs }
                : {}),
              ...(approving && s.edit !== undefined ? { editedArgs: { command: s.edit } } : {})
            })
          })
        case "revoke":
          return Effect.flatMap(gate.sessionApprovals(), (active) => {
            const target = pick(active, s.pick)
            return target === undefined
              ? Effect.void
              : Effect.asVoid(gate.revokeApproval(target.id, { actor: `op-${s.gate}` }))
          })
        case "clear":
          return gate.clearApprovals(
            s.session === undefined ? undefined : ToolCall.SessionKey.make(s.session),
            `op-${s.gate}`
          )
        case "record":
          return gate.recordApproval(s.tool, ToolCall.SessionKey.make(s.session), s.approved, {
            grantedBy: `op-${s.gate}`,
            ...(s.ttlMs !== undefined ? { ttl: s.ttlMs } : {})
          })
        case "extend":
          return Effect.flatMap(gate.pending(), (pending) => {
            const target = pick(pending, s.pick)
            return target === undefined
              ? Effect.void
              : Effect.asVoid(gate.extend(target.requestId, s.ms, `op-${s.gate}`))
          })
        case "sweep":
          return gate.sweep
      }
    }

    const lanes = [0, 1, 2].map((l) => steps.filter((s) => s.lane === l))
    yield* Effect.forEach(
      lanes,
      (lane) => Effect.forEach(lane, (s) => Effect.ignore(step(s)), { discard: true }),
      { concurrency: "unbounded", discard: true }
    ).pipe(
      Effect.timeoutFail({
        duration: "30 seconds",
        onTimeout: () => new Error("the steps did not finish in 30 s (a hang)")
      })
    )
    return { observed, runs, known }
  })

const show = (call: ToolCall.ToolCallInput) =>
  JSON.stringify({
    id: call.id,
    session: call.sessionKey,
    name: call.name,
    args: call.args,
    agent: call.agentId,
    intent: call.intentId,
    wd: call.workingDirectory
  })

const sameIdentity = (a: ToolCall.ToolCallInput, b: ToolCall.ToolCall) =>
  a.id === b.id && a.sessionKey === b.sessionKey && a.name.toLowerCase() === b.name.toLowerCase() &&
  (a.agentId ?? null) === (b.agentId ?? null) && (a.intentId ?? null) === (b.intentId ?? null) &&
  (a.workingDirectory ?? null) === (b.workingDirectory ?? null)

const sameCall = (a: ToolCall.ToolCallInput, b: ToolCall.ToolCall) => sameIdentity(a, b) && argsOf(a) === argsOf(b)

const keyOf = (sessionKey: string | undefined, toolCallId: string | undefined) => `${sessionKey}\u0000${toolCallId}`

/** Every broken promise, as a sentence; empty when the run kept them all. */
const violations = (
  policy: Policy.Policy,
  seen: { readonly observed: ReadonlyArray<Observed>; readonly runs: ReadonlyArray<Run> },
  events: ReadonlyArray<AuditEvent.AuditEvent>,
  grants: ReadonlyArray<SessionApproval.SessionApproval>,
  requests: ReadonlyMap<string, ApprovalRequest.ApprovalRequest>
): Array<string> => {
  const out: Array<string> = []
  const grantById = new Map(grants.map((g) => [g.id as string, g]))

  // no call runs unless its own call was allowed or approved
  const spent = new Map<string, number>()
  for (const run of seen.runs) {
    if (!sameIdentity(run.asked, run.got)) out.push(`the tool got ${show(run.got)} for the call ${show(run.asked)}`)
    if (run.requestId !== undefined) {
      spent.set(run.requestId, (spent.get(run.requestId) ?? 0) + 1)
      const request = requests.get(run.requestId)
      if (request === undefined || request.status !== "approved") {
        out.push(`${show(run.asked)} ran through request ${run.requestId}, which is ${request?.status ?? "missing"}`)
      } else {
        if (!sameCall(run.asked, request.toolCall)) {
          out.push(`${show(run.asked)} ran through the approval of another call ${show(request.toolCall)}`)
        }
        const approved = request.resolution?.editedArgs ?? request.toolCall.args
        if (argsOf(run.got) !== argsOf({ args: approved })) {
          out.push(`${show(run.asked)} ran with ${argsOf(run.got)}, approved were ${argsOf({ args: approved })}`)
        }
        if (policy.evaluate(run.got)._tag === "Deny") {
          out.push(`${show(run.got)} ran (approved edit) although the policy denies it`)
        }
      }
    } else {
      if (argsOf(run.got) !== argsOf(run.asked)) out.push(`${show(run.asked)} ran with ${argsOf(run.got)}`)
      const verdict = policy.evaluate(run.asked as ToolCall.ToolCall)
      if (verdict._tag === "Deny") out.push(`${show(run.asked)} ran although the policy denies it (${verdict.rule.id})`)
      if (verdict._tag === "RequireApproval") {
        const grant = run.decision?.via === "sessionApproval"
          ? grantById.get(run.decision.sessionApprovalId ?? "")
          : undefined
        if (grant === undefined) {
          out.push(
            `${show(run.asked)} needs approval and ran with no session approval on record (${
              JSON.stringify(run.decision)
            })`
          )
        } else if (grant.sessionKey !== run.asked.sessionKey) {
          out.push(`${show(run.asked)} ran through session approval ${grant.id} of session ${grant.sessionKey}`)
        } else if (
          grant.toolName !== run.asked.name.toLowerCase() ||
          (grant.scope === "exact" &&
            (grant.argsDigest !== ToolCall.argsDigest(run.asked.args ?? {}) ||
              // the working directory binds always: a grant made without one covers only calls without one
              grant.workingDirectory !== run.asked.workingDirectory))
        ) {
          out.push(
            `${show(run.asked)} ran through session approval ${grant.id}, which does not cover it (${
              JSON.stringify(grant)
            })`
          )
        }
      }
    }
  }
  for (const [requestId, times] of spent) if (times > 1) out.push(`approved request ${requestId} ran ${times} times`)

  // no approval crosses sessions; none is used after its revocation committed or after it expired
  for (const e of events) {
    if (e.type !== "decision" || e.via !== "sessionApproval") continue
    const grant = grantById.get(e.sessionApprovalId ?? "")
    if (grant === undefined) out.push(`decision ${e.seq} cites session approval ${e.sessionApprovalId}, never granted`)
    else if (grant.sessionKey !== e.sessionKey) {
      out.push(`decision ${e.seq} in session ${e.sessionKey} cites ${grant.id} of session ${grant.sessionKey}`)
    } else if (grant.revokedAt !== undefined && e.seq > grant.seq) {
      out.push(`decision ${e.seq} cites ${grant.id}, revoked at seq ${grant.seq}`)
    } else if (grant.expiresAt !== undefined && e.at >= grant.expiresAt) {
      out.push(`decision ${e.seq} at ${e.at} cites ${grant.id}, expired at ${grant.expiresAt}`)
    }
  }

  // every request resolves once, with one event
  const resolutions = new Map<string, number>()
  for (const e of events) {
    if (e.type === "approval.resolved" || e.type === "approval.expired") {
      resolutions.set(e.requestId!, (resolutions.get(e.requestId!) ?? 0) + 1)
    }
  }
  for (const [requestId, n] of resolutions) if (n > 1) out.push(`request ${requestId} resolved ${n} times`)
  for (const request of requests.values()) {
    const n = resolutions.get(request.requestId) ?? 0
    if (request.status !== "pending" && n !== 1) {
      out.push(`request ${request.requestId} is ${request.status} with ${n} resolution events`)
    }
    if (request.status === "pending" && n !== 0) {
      out.push(`request ${request.requestId} is pending with ${n} resolution events`)
    }
  }

  // every observed decision has exactly one audit event; a call id has one record
  const byKey = new Map<string, Array<AuditEvent.AuditEvent>>()
  for (const e of events) {
    if (e.type !== "decision" && e.type !== "approval.requested") continue
    const key = keyOf(e.sessionKey, e.toolCallId)
    byKey.set(key, [...(byKey.get(key) ?? []), e])
  }
  // a policy decision and a request for one id (two racing calls, each judged) would make the id name two calls
  for (const [key, records] of byKey) {
    if (records.length > 1) {
      out.push(
        `call id ${JSON.stringify(key)} names ${records.length} calls: ${
          records.map((e) => `${e.seq}:${e.type}:${e.outcome}:${e.args}`).join(", ")
        }`
      )
    }
  }
  for (const { input, outcome, run } of seen.observed) {
    const records = byKey.get(keyOf(input.sessionKey, input.id)) ?? []
    const expectRecord = (type: string, outcomeWord: string | undefined) => {
      const found = records.filter((e) => e.type === type && (outcomeWord === undefined || e.outcome === outcomeWord))
      if (found.length !== 1) {
        out.push(
          `${show(input)} saw ${JSON.stringify(outcome)}; ${found.length} ${type} events (${
            outcomeWord ?? "any"
          }) on record`
        )
      } else if (found[0]!.args !== undefined && found[0]!.args !== argsOf(input)) {
        out.push(`${show(input)} saw ${outcome._tag}; the ${type} event on record has args ${found[0]!.args}`)
      }
    }
    if (outcome._tag === "ran" && run?.requestId === undefined) expectRecord("decision", "allow")
    else if (outcome._tag === "denied" && outcome.requestId === undefined) expectRecord("decision", "deny")
    else if (outcome._tag === "ran" || outcome._tag === "denied" || outcome._tag === "paused") {
      expectRecord("approval.requested", undefined)
    }
  }
  const refusedSeen = seen.observed.filter((o) => o.outcome._tag === "refused").length
  const refusedEvents = events.filter((e) => e.type === "call.refused").length
  if (refusedSeen !== refusedEvents) {
    out.push(`${refusedSeen} calls were refused as reused ids; ${refusedEvents} call.refused events`)
  }

  const holes = holesIn(events)
  if (holes.length > 0) out.push(`seq has holes: ${holes.join(", ")}`)
  return out
}

const property = (backend: Backend) =>
  fc.asyncProperty(policyArb, stepsArb, (input, steps) =>
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const policy = Policy.unsafeMake(input)
      // no background sweeps: expiry happens in waiters and in the steps' sweeps, so the log is
      // still once the steps are done
      const gates = yield* backend({ policy, sweepInterval: "1 hour" })
      const seen = yield* execute(gates, steps)
      const events = yield* gates.store.events()
      const grants = yield* gates.store.sessionApprovals()
      const ids = new Set([
        ...seen.known,
        ...seen.runs.flatMap((r) => (r.requestId !== undefined ? [r.requestId] : []))
      ])
      for (const e of events) if (e.type === "approval.requested") ids.add(e.requestId!)
      const requests = new Map<string, ApprovalRequest.ApprovalRequest>()
      for (const id of ids) {
        const found = yield* gates.store.getRequest(ApprovalRequest.RequestId.make(id))
        if (Option.isSome(found)) requests.set(id, found.value)
      }
      expect(violations(policy, seen, events, grants, requests)).toEqual([])
    }))))

const RUNS: Record<string, number> = { memory: 50, sqlite: 40, postgres: 30 }
const seed = process.env.TOOLGATE_FC_SEED !== undefined ? Number(process.env.TOOLGATE_FC_SEED) : undefined

for (const { name, backend, skip } of backends("tests/security/gateProperties.test.ts")) {
  ;(skip ? describe.skip : describe)(
    `the gate's promise under random policies, answers and interleavings (${name})`,
    () => {
      test(
        `two gates on one ${name} store: nothing runs unapproved, nothing crosses sessions or revocations, once each, audited, no holes`,
        async () => {
          await fc.assert(property(backend), {
            numRuns: RUNS[name]!,
            ...(seed !== undefined ? { seed } : {}),
            endOnFailure: process.env.TOOLGATE_FC_SHRINK === undefined,
            verbose: 1
          })
        },
        180_000
      )
    }
  )
}
