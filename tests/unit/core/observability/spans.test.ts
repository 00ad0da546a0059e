/**
 * The gate's spans under a recording tracer, on the memory store and on a SQLite file: each
 * operation makes its `toolgate.*` span, a child of the caller's span (`gate`'s authorizations and
 * wait are children of its span), with the call and what the gate answered; the call's arguments
 * never appear unless the gate's options ask for them. With Effect's built-in tracer (nothing
 * installed), no span is made at all.
 */
import { ApprovalStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Context, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { describe, it } from "../../../support/effectTest.js"
import { sqliteStore } from "../../../support/sqlStores.js"
import * as Recording from "./recordingTracer.js"

const policy = Policy.unsafeMake({
  allow: [{ id: "reads", tool: "ls" }],
  deny: [{ id: "no-rm", tool: "rm", reason: "no deletions" }],
  requireApproval: [{ id: "ask-bash", tool: "bash", ttlMs: 120_000 }]
})

// a value that must never reach a span unless arguments are asked for
const secret = "s3cr3t-token-value"
const bash = { id: "b1", name: "bash", sessionKey: "s1", agentId: "agent-7", args: { command: `curl -H ${secret}` } }

const stores: ReadonlyArray<readonly [string, () => Layer.Layer<ApprovalStore.ApprovalStore>]> = [
  ["memory", () => ApprovalStore.layerMemory],
  ["SQLite file", () => sqliteStore().pipe(Layer.orDie)]
]

const gateOn = (store: Layer.Layer<ApprovalStore.ApprovalStore>, options?: Partial<ToolGate.Options>) =>
  Effect.map(
    Layer.build(ToolGate.layer({ policy, ...options }).pipe(Layer.provide(store), Layer.orDie)),
    (context) => Context.get(context, ToolGate.ToolGate)
  )

/** Lets other fibers run (and the store's I/O complete) until `done`, within a bound. */
const until = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 10_000 && !done(); turn++) {
      yield* turn % 10 === 9 ? Effect.promise(() => new Promise((resolve) => setImmediate(resolve))) : Effect.yieldNow()
    }
    expect(done()).toBe(true)
  })

const noArgumentsIn = (recording: Recording.Recording) => {
  for (const span of recording.spans) {
    expect(JSON.stringify(Recording.attributes(span))).not.toContain(secret)
    expect(Recording.attributes(span)["toolgate.args"]).toBeUndefined()
  }
}

for (const [storeName, store] of stores) {
  describe(`the gate's spans (${storeName})`, () => {
    it.scoped("authorize and evaluate: one span each, under the caller's, with the call and the decision", () => {
      const recording = Recording.make()
      return Effect.gen(function*() {
        const gate = yield* gateOn(store())
        const [allowed, caller] = yield* Effect.zip(
          gate.authorize({ id: "l1", name: "ls", sessionKey: "s1", args: { path: secret } }),
          Effect.currentSpan
        ).pipe(Effect.withSpan("agent step"))
        expect(PauseSignal.isPauseSignal(allowed)).toBe(false)
        const decision = yield* gate.evaluate({ id: "e1", name: "bash", sessionKey: "s2", args: { command: secret } })
        expect(decision._tag).toBe("RequireApproval")

        const [authorize] = Recording.named(recording, "toolgate.authorize")
        expect(Recording.isChildOf(authorize!, caller)).toBe(true)
        expect(Recording.ended(authorize!)).toBe(true)
        expect(Recording.attributes(authorize!)).toEqual({
          "toolgate.tool": "ls",
          "toolgate.session": "s1",
          "toolgate.call_id": "l1",
          "toolgate.outcome": "allow",
          "toolgate.decision": "allow",
          "toolgate.via": "policy",
          "toolgate.rule": "reads",
          "toolgate.policy_version": policy.version
        })
        const [evaluate] = Recording.named(recording, "toolgate.evaluate")
        expect(Recording.parentName(evaluate!)).toBeUndefined()
        expect(Recording.attributes(evaluate!)).toEqual({
          "toolgate.tool": "bash",
          "toolgate.session": "s2",
          "toolgate.call_id": "e1",
          "toolgate.outcome": "pending",
          "toolgate.decision": "requireApproval",
          "toolgate.rule": "ask-bash",
          "toolgate.policy_version": policy.version
        })
        noArgumentsIn(recording)
      }).pipe(Effect.withTracer(recording.tracer))
    })

    it.scoped("a denied call: the span names the rule and ends failed with ToolDenied", () => {
      const recording = Recording.make()
      return Effect.gen(function*() {
        const gate = yield* gateOn(store())
        const denied = yield* Effect.flip(gate.authorize({ id: "r1", name: "rm", sessionKey: "s1", args: { secret } }))
        expect(denied._tag).toBe("ToolDenied")
        const [span] = Recording.named(recording, "toolgate.authorize")
        expect(Recording.attributes(span!)).toMatchObject({
          "toolgate.tool": "rm",
          "toolgate.outcome": "deny",
          "toolgate.decision": "deny",
          "toolgate.rule": "no-rm",
          "toolgate.policy_version": policy.version
        })
        const status = span!.status
        expect(status._tag === "Ended" && status.exit._tag).toBe("Failure")
        noArgumentsIn(recording)
      }).pipe(Effect.withTracer(recording.tracer))
    })

    it.scoped("gate: its span holds authorize (pending), awaitDecision, the replayed authorize and the run; respond and resume have their own", () => {
      const recording = Recording.make()
      return Effect.gen(function*() {
        const gate = yield* gateOn(store())
        const running = yield* Effect.fork(
          gate.gate(bash, (allowed) => Effect.map(Effect.currentSpan, (span) => ({ allowed, span })))
        )
        yield* until(() => Recording.named(recording, "toolgate.awaitDecision").length === 1)
        const [pending] = yield* gate.pending()
        yield* TestClock.adjust("30 seconds")
        yield* gate.respond(pending!.requestId, { decision: "approve_once", respondedBy: "ana" })
        const { allowed, span: runSpan } = yield* Fiber.join(running)
        expect(allowed.request?.requestId).toBe(pending!.requestId)
        const resumed = yield* gate.resume(pending!.requestId)
        expect(resumed.status).toBe("approved")

        const [gateSpan] = Recording.named(recording, "toolgate.gate")
        const authorizations = Recording.named(recording, "toolgate.authorize")
        const [wait] = Recording.named(recording, "toolgate.awaitDecision")
        // the tool runs inside the gate's span
        expect(runSpan.spanId).toBe(gateSpan!.spanId)
        expect(authorizations.map((span) => Recording.isChildOf(span, gateSpan!))).toEqual([true, true])
        expect(Recording.isChildOf(wait!, gateSpan!)).toBe(true)
        expect(authorizations.map((span) => Recording.attributes(span)["toolgate.outcome"])).toEqual([
          "pending",
          "approved"
        ])
        const call = {
          "toolgate.tool": "bash",
          "toolgate.session": "s1",
          "toolgate.call_id": "b1",
          "toolgate.agent": "agent-7",
          "toolgate.decision": "requireApproval",
          "toolgate.rule": "ask-bash",
          "toolgate.policy_version": policy.version,
          "toolgate.request_id": pending!.requestId
        }
        expect(Recording.attributes(authorizations[0]!)).toEqual({ ...call, "toolgate.outcome": "pending" })
        expect(Recording.attributes(gateSpan!)).toEqual({ ...call, "toolgate.outcome": "approved" })
        const request = {
          ...call,
          "toolgate.outcome": "approved",
          "toolgate.response": "approve_once"
        }
        delete (request as Partial<typeof request>)["toolgate.decision"]
        expect(Recording.attributes(wait!)).toEqual(request)
        const [respond] = Recording.named(recording, "toolgate.respond")
        expect(Recording.parentName(respond!)).toBeUndefined()
        expect(Recording.attributes(respond!)).toEqual(request)
        const [resume] = Recording.named(recording, "toolgate.resume")
        expect(Recording.attributes(resume!)).toEqual(request)
        noArgumentsIn(recording)
      }).pipe(Effect.withTracer(recording.tracer))
    })

    it.scoped("sweep: toolgate.sweep says how many requests it expired; the background sweeper's are root spans", () => {
      const recording = Recording.make()
      return Effect.gen(function*() {
        const gate = yield* gateOn(store(), { sweepInterval: "1 hour" })
        const pause = yield* gate.authorize(bash)
        expect(PauseSignal.isPauseSignal(pause)).toBe(true)
        yield* TestClock.adjust("121 seconds")
        const expired = yield* gate.sweep.pipe(Effect.withSpan("operator"))
        expect(expired).toHaveLength(1)
        const sweeps = Recording.named(recording, "toolgate.sweep")
        // the sweeper's first sweep (at start-up) found nothing; the explicit one found the request
        expect(sweeps.map((span) => [Recording.parentName(span), Recording.attributes(span)])).toEqual([
          [undefined, { "toolgate.expired": 0 }],
          ["operator", { "toolgate.expired": 1 }]
        ])
      }).pipe(Effect.withTracer(recording.tracer))
    })

    it.scoped("traceArgs: the call's canonical arguments appear as toolgate.args", () => {
      const recording = Recording.make()
      return Effect.gen(function*() {
        const gate = yield* gateOn(store(), { traceArgs: true })
        yield* gate.authorize({ id: "l1", name: "ls", sessionKey: "s1", args: { path: secret, all: true } })
        yield* gate.evaluate({ id: "e1", name: "ls", sessionKey: "s1", args: { b: 2, a: 1 } })
        expect(Recording.attributes(Recording.named(recording, "toolgate.authorize")[0]!)["toolgate.args"]).toBe(
          JSON.stringify({ all: true, path: secret })
        )
        expect(Recording.attributes(Recording.named(recording, "toolgate.evaluate")[0]!)["toolgate.args"]).toBe(
          JSON.stringify({ a: 1, b: 2 })
        )
      }).pipe(Effect.withTracer(recording.tracer))
    })

    it.scoped("with Effect's built-in tracer no gate span is made: the tool runs under the caller's span", () =>
      Effect.gen(function*() {
        const gate = yield* gateOn(store())
        const [inside, caller] = yield* Effect.zip(
          gate.gate({ id: "l1", name: "ls", sessionKey: "s1" }, () => Effect.currentSpan),
          Effect.currentSpan
        ).pipe(Effect.withSpan("agent step"))
        expect(inside.name).toBe("agent step")
        expect(inside.spanId).toBe(caller.spanId)
        expect(Option.isNone(inside.parent)).toBe(true)
      }))
  })
}
