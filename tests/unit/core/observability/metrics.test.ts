/**
 * The gate's metrics in Effect's metric registry, on the memory store and on a SQLite file: each
 * moves by exactly what the gate did. The registry is the process's, shared by every test of the
 * run, so each test compares values before and after what it does.
 */
import { ApprovalStore, PauseSignal, Policy, ToolGate, ToolGateError, ToolGateMetrics } from "@tool-gate/core"
import { expect } from "bun:test"
import { Context, Effect, Exit, Layer, Metric, Scope, Stream, TestClock } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"

const policy = Policy.unsafeMake({
  allow: ["ls"],
  deny: ["rm"],
  requireApproval: [{ id: "ask-bash", tool: "bash", ttlMs: 120_000 }]
})

/** A way to open the same store again (a second gate, or the gate after a restart). */
type Opener = Effect.Effect<Layer.Layer<ApprovalStore.ApprovalStore>, never, Scope.Scope>

const stores: ReadonlyArray<readonly [string, Opener]> = [
  ["memory", Effect.map(Layer.memoize(ApprovalStore.layerMemory), (shared) => shared)],
  [
    "SQLite file",
    Effect.map(tempDir, (dir) => storeOver(sqliteClient(join(dir, "gate.db"))).pipe(Layer.orDie))
  ]
]

const gateOn = (store: Layer.Layer<ApprovalStore.ApprovalStore>, storeMetrics = false, hooks?: ToolGate.Hooks) =>
  Effect.map(
    Layer.build(
      ToolGate.layer({ policy, sweepInterval: "1 hour", storeMetrics, hooks }).pipe(Layer.provide(store), Layer.orDie)
    ),
    (context) => Context.get(context, ToolGate.ToolGate)
  )

const count = (metric: Metric.Metric.Counter<number>) => Effect.map(Metric.value(metric), (state) => state.count)
const decisions = (operation: ToolGateMetrics.Operation, outcome: ToolGateMetrics.Outcome) =>
  count(ToolGateMetrics.decisionsOf(operation, outcome))
const pendingGauge = Effect.map(Metric.value(ToolGateMetrics.pendingRequests), (state) => state.value)

/** The change of each named figure over `body`. */
const deltas = <A, E, R>(
  figures: Record<string, Effect.Effect<number>>,
  body: Effect.Effect<A, E, R>
): Effect.Effect<readonly [A, Record<string, number>], E, R> =>
  Effect.gen(function*() {
    const before = yield* Effect.all(figures)
    const result = yield* body
    const after = yield* Effect.all(figures)
    return [result, Object.fromEntries(Object.keys(figures).map((k) => [k, after[k]! - before[k]!]))] as const
  })

/** Runs `body` and returns once the gate's audit stream has delivered `events` events. */
const heard = <A, E, R>(gate: ToolGate.ToolGate["Type"], events: number, body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const listening = yield* Effect.fork(Stream.runDrain(Stream.take(gate.audit, events)))
    // the subscription is taken when the stream starts: let it start before anything is committed
    yield* Effect.yieldNow()
    const result = yield* body
    yield* listening.await
    return result
  })

/** `store` with bash calls `ids` pending, asked through a gate that is closed again; their answers. */
const backlog = (store: Layer.Layer<ApprovalStore.ApprovalStore>, ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const gate = yield* gateOn(store).pipe(Scope.extend(scope))
    const asked = yield* heard(
      gate,
      ids.length,
      Effect.forEach(ids, (id) => gate.authorize({ id, name: "bash", sessionKey: "s1" }))
    )
    yield* Scope.close(scope, Exit.void)
    return asked
  })

/** `store` with some of its operations replaced by `change`, given the store's own. */
const changed = (
  store: Layer.Layer<ApprovalStore.ApprovalStore>,
  change: (inner: ApprovalStore.ApprovalStore["Type"]) => Partial<ApprovalStore.ApprovalStore["Type"]>
) =>
  Layer.effect(
    ApprovalStore.ApprovalStore,
    Effect.map(ApprovalStore.ApprovalStore, (inner) => ({ ...inner, ...change(inner) }))
  )
    .pipe(Layer.provide(store))

for (const [storeName, open] of stores) {
  describe(`the gate's metrics (${storeName})`, () => {
    it.scoped("toolgate.decisions counts each answer of authorize and evaluate by outcome", () =>
      Effect.gen(function*() {
        const gate = yield* gateOn(yield* open)
        const [, moved] = yield* deltas(
          {
            allow: decisions("authorize", "allow"),
            deny: decisions("authorize", "deny"),
            pending: decisions("authorize", "pending"),
            approved: decisions("authorize", "approved"),
            denied: decisions("authorize", "denied"),
            evaluatedAllow: decisions("evaluate", "allow"),
            evaluatedPending: decisions("evaluate", "pending")
          },
          Effect.gen(function*() {
            yield* gate.authorize({ id: "l1", name: "ls", sessionKey: "s1" })
            yield* gate.authorize({ id: "l2", name: "ls", sessionKey: "s1" })
            yield* Effect.flip(gate.authorize({ id: "r1", name: "rm", sessionKey: "s1" }))
            const asked = yield* gate.authorize({ id: "b1", name: "bash", sessionKey: "s1" })
            const refused = yield* gate.authorize({ id: "b2", name: "bash", sessionKey: "s1" })
            if (!PauseSignal.isPauseSignal(asked) || !PauseSignal.isPauseSignal(refused)) {
              throw new Error("expected pauses")
            }
            yield* gate.respond(asked.requestId, { decision: "approve_once" })
            yield* gate.respond(refused.requestId, { decision: "deny", reason: "no" })
            yield* gate.authorize({ id: "b1", name: "bash", sessionKey: "s1" })
            yield* Effect.flip(gate.authorize({ id: "b2", name: "bash", sessionKey: "s1" }))
            yield* gate.evaluate({ id: "e1", name: "ls", sessionKey: "s1" })
            yield* gate.evaluate({ id: "e2", name: "bash", sessionKey: "s1" })
            // a call the gate refuses as invalid is no decision
            yield* Effect.flip(gate.authorize({ id: "", name: "ls", sessionKey: "s1" }))
          })
        )
        expect(moved).toEqual({
          allow: 2,
          deny: 1,
          pending: 2,
          approved: 1,
          denied: 1,
          evaluatedAllow: 1,
          evaluatedPending: 1
        })
      }))

    for (const hooked of [false, true]) {
      it.scoped(
        `toolgate.decisions: a call asked again counts again, with the caller's metric labels (${
          hooked ? "with hooks" : "no hooks"
        })`,
        () =>
          Effect.gen(function*() {
            const gate = yield* gateOn(
              yield* open,
              false,
              hooked ? { afterPolicyDecision: () => Effect.void } : undefined
            )
            // a label of this test alone: the registry is the process's
            const tenant = `${storeName}-${hooked}`
            const labelled = (outcome: ToolGateMetrics.Outcome) =>
              count(Metric.tagged(ToolGateMetrics.decisionsOf("authorize", outcome), "tenant", tenant))
            const [, moved] = yield* deltas(
              { allow: labelled("allow"), deny: labelled("deny"), unlabelled: decisions("authorize", "allow") },
              Effect.gen(function*() {
                // each recorded, then replayed from its record
                yield* gate.authorize({ id: "l1", name: "ls", sessionKey: "s1" })
                yield* gate.authorize({ id: "l1", name: "ls", sessionKey: "s1" })
                yield* Effect.flip(gate.authorize({ id: "r1", name: "rm", sessionKey: "s1" }))
                yield* Effect.flip(gate.authorize({ id: "r1", name: "rm", sessionKey: "s1" }))
                // another call under a known id is refused: no decision
                yield* Effect.flip(gate.authorize({ id: "l1", name: "ls", sessionKey: "s1", args: { path: "/" } }))
              }).pipe(Effect.tagMetrics("tenant", tenant))
            )
            expect(moved).toEqual({ allow: 2, deny: 2, unlabelled: 0 })
          })
      )
    }

    it.scoped("time to answer: one observation per answer committed here, of the time since the request", () =>
      Effect.gen(function*() {
        const gate = yield* gateOn(yield* open)
        const approved = ToolGateMetrics.timeToAnswerOf("approved")
        const before = yield* Metric.value(approved)
        const pause = yield* gate.authorize({ id: "b1", name: "bash", sessionKey: "s1" })
        if (!PauseSignal.isPauseSignal(pause)) throw new Error("expected a pause")
        yield* TestClock.adjust("45 seconds")
        yield* gate.respond(pause.requestId, { decision: "approve_once", respondedBy: "ana" })
        // the same answer again returns the first resolution: no second observation
        yield* gate.respond(pause.requestId, { decision: "approve_once", respondedBy: "ana" })
        const after = yield* Metric.value(approved)
        expect(after.count - before.count).toBe(1)
        expect(after.sum - before.sum).toBe(45_000)
      }))

    it.scoped("expiries: a request expired by the sweep counts once, however often it is swept or read", () =>
      Effect.gen(function*() {
        const gate = yield* gateOn(yield* open)
        const [, moved] = yield* deltas(
          { expired: count(ToolGateMetrics.expiredRequests), deniedByTimeout: decisions("authorize", "expired") },
          Effect.gen(function*() {
            yield* gate.authorize({ id: "b1", name: "bash", sessionKey: "s1" })
            yield* TestClock.adjust("121 seconds")
            expect(yield* gate.sweep).toHaveLength(1)
            expect(yield* gate.sweep).toHaveLength(0)
            yield* Effect.flip(gate.authorize({ id: "b1", name: "bash", sessionKey: "s1" }))
          })
        )
        expect(moved).toEqual({ expired: 1, deniedByTimeout: 1 })
      }))

    it.scoped("pending requests: the gauge follows requests and answers, counts those pending at start-up, and gives its share back when the gate closes", () =>
      Effect.gen(function*() {
        const store = yield* open
        const start = yield* pendingGauge
        const first = yield* Scope.make()
        const gate = yield* gateOn(store).pipe(Scope.extend(first))
        const asked = yield* heard(
          gate,
          3,
          Effect.forEach(["b1", "b2", "b3"], (id) => gate.authorize({ id, name: "bash", sessionKey: "s1" }))
        )
        expect((yield* pendingGauge) - start).toBe(3)
        const [one] = asked
        if (!PauseSignal.isPauseSignal(one)) throw new Error("expected a pause")
        yield* heard(gate, 1, gate.respond(one.requestId, { decision: "deny" }))
        expect((yield* pendingGauge) - start).toBe(2)
        yield* Scope.close(first, Exit.void)
        expect((yield* pendingGauge) - start).toBe(0)

        // a gate opened on the store later finds the two still pending
        const reopened = yield* gateOn(store)
        yield* heard(reopened, 1, reopened.authorize({ id: "b4", name: "bash", sessionKey: "s2" }))
        expect((yield* pendingGauge) - start).toBe(3)
      }))

    it.scoped("pending requests: a gate opening a store with a backlog counts it without reading a request, and follows it from there", () =>
      Effect.gen(function*() {
        const store = yield* open
        const start = yield* pendingGauge
        const [one] = yield* backlog(store, ["b1", "b2", "b3", "b4"])
        expect((yield* pendingGauge) - start).toBe(0)

        // the reopened gate's store lists nothing: what it lists is read and decoded, request by request
        let listed = 0
        const reopened = yield* gateOn(changed(store, (inner) => ({
          listPending: (options) => {
            listed++
            return inner.listPending(options)
          }
        })))
        if (!PauseSignal.isPauseSignal(one)) throw new Error("expected a pause")
        yield* heard(reopened, 1, reopened.respond(one.requestId, { decision: "deny" }))
        expect((yield* pendingGauge) - start).toBe(3)
        yield* heard(reopened, 1, reopened.authorize({ id: "b5", name: "bash", sessionKey: "s2" }))
        expect((yield* pendingGauge) - start).toBe(4)
        expect(listed).toBe(0)
      }))

    it.scoped("pending requests: a count that fails is tried again before the next events, and the gauge is exact from there", () =>
      Effect.gen(function*() {
        const store = yield* open
        const start = yield* pendingGauge
        yield* backlog(store, ["b1", "b2"])
        let counts = 0
        const reopened = yield* gateOn(changed(store, (inner) => ({
          countPending: Effect.suspend(() =>
            counts++ === 0
              ? Effect.fail(new ToolGateError.PersistenceError({ operation: "countPending", cause: "down" }))
              : inner.countPending
          )
        })))
        yield* heard(reopened, 1, reopened.authorize({ id: "b3", name: "bash", sessionKey: "s2" }))
        expect(counts).toBe(2)
        expect((yield* pendingGauge) - start).toBe(3)
        yield* heard(reopened, 1, reopened.authorize({ id: "b4", name: "bash", sessionKey: "s2" }))
        expect((yield* pendingGauge) - start).toBe(4)
      }))

    it.scoped("store latency: with storeMetrics, each store operation of the gate is timed under its name", () =>
      Effect.gen(function*() {
        const untimed = yield* gateOn(yield* open)
        const recorded = ToolGateMetrics.storeDurationOf("recordDecision")
        const unmeasured = yield* Metric.value(recorded)
        yield* untimed.authorize({ id: "u1", name: "ls", sessionKey: "s1" })
        // without the option nothing is timed
        expect((yield* Metric.value(recorded)).count).toBe(unmeasured.count)
        const gate = yield* gateOn(yield* open, true)
        const created = ToolGateMetrics.storeDurationOf("createRequest")
        const before = yield* Effect.all([Metric.value(recorded), Metric.value(created)])
        yield* gate.authorize({ id: "l1", name: "ls", sessionKey: "s1" })
        yield* gate.authorize({ id: "l2", name: "ls", sessionKey: "s1" })
        yield* gate.authorize({ id: "b1", name: "bash", sessionKey: "s1" })
        const after = yield* Effect.all([Metric.value(recorded), Metric.value(created)])
        expect([after[0].count - before[0].count, after[1].count - before[1].count]).toEqual([2, 1])
      }))
  })
}
