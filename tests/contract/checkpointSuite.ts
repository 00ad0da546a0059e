/**
 * Checkpoint scenarios, run against every store (memory, SQLite, PostgreSQL) on the TestClock.
 */
import type { ApprovalStore } from "@tool-gate/core"
import { ApprovalRequest, Checkpoint, CheckpointStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Either, Layer, Option, Schema, type Scope, TestClock } from "effect"
import { describe, it } from "../support/effectTest.js"

const policy = Policy.unsafeMake({ requireApproval: ["bash", { tool: "deploy", ttlMs: 60_000 }] })

const Turn = Checkpoint.make("agent-turn", {
  state: Schema.Struct({ messages: Schema.Array(Schema.String), step: Schema.Number })
})
const OtherPoint = Checkpoint.make("other", { state: Schema.Struct({ step: Schema.Number }) })

const bash = (id: string, args: Record<string, unknown> = { command: id }) => ({
  id,
  name: "bash",
  sessionKey: "s1",
  args
})

const pause = (call: ReturnType<typeof bash> | { id: string; name: string; sessionKey: string }) =>
  Effect.flatMap(ToolGate.ToolGate, (gate) => gate.authorize(call)).pipe(
    Effect.map((result) => {
      if (!PauseSignal.isPauseSignal(result)) throw new Error("expected a pause")
      return result.requestId
    })
  )

const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.either(effect), (result) => {
    if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
    return result.left as E & { readonly _tag: string }
  })

export const checkpointSuite = <E>(
  name: string,
  stores: () => Layer.Layer<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore, E>
) => {
  const test = (
    title: string,
    body: () => Effect.Effect<
      unknown,
      unknown,
      Checkpoint.Checkpoints | ToolGate.ToolGate | CheckpointStore.CheckpointStore | Scope.Scope
    >
  ) =>
    it.scoped(title, () =>
      Effect.provide(
        Effect.suspend(body),
        Checkpoint.layerWithGate({ policy }).pipe(Layer.provideMerge(stores()))
      ))

  describe(`Checkpoints (${name})`, () => {
    test("save with a pending request, then resume once it is answered: the state and the resolution", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        const requestId = yield* pause(bash("c1"))
        const token = yield* checkpoints.save(Turn, [requestId], { messages: ["hi", "run c1"], step: 3 })
        expect(yield* checkpoints.find(requestId)).toBe(token)
        expect((yield* failure(checkpoints.resume(Turn, token)))._tag).toBe("RequestPending")
        yield* gate.respond(requestId, { decision: "approve_once", editedArgs: { command: "c1 --dry-run" } })
        const resumed = yield* checkpoints.resume(Turn, token)
        expect(resumed.state).toEqual({ messages: ["hi", "run c1"], step: 3 })
        expect(resumed.requests.map((r) => r.status)).toEqual(["approved"])
        expect(resumed.requests[0]!.resolution!.editedArgs).toEqual({ command: "c1 --dry-run" })
        yield* checkpoints.complete(token, resumed.lease)
        const again = yield* failure(checkpoints.resume(Turn, token))
        expect(again._tag).toBe("AlreadyResumed")
        expect(yield* checkpoints.open(Turn)).toEqual([])
      }))

    test("several requests in one turn: partial answers keep it pending; all answered resumes in order", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        const ids = [yield* pause(bash("c1")), yield* pause(bash("c2")), yield* pause(bash("c3"))]
        const token = yield* checkpoints.save(Turn, ids, { messages: [], step: 1 })
        yield* gate.respond(ids[2]!, { decision: "deny", reason: "not that one" })
        yield* gate.respond(ids[0]!, { decision: "approve_once" })
        expect((yield* failure(checkpoints.resume(Turn, token)))._tag).toBe("RequestPending")
        yield* gate.respond(ids[1]!, { decision: "approve_session" })
        const resumed = yield* checkpoints.resume(Turn, token)
        expect(resumed.requests.map((r): [string, string] => [r.toolCall.id, r.status])).toEqual([
          ["c1", "approved"],
          ["c2", "approved"],
          ["c3", "denied"]
        ])
        expect(resumed.requests[2]!.resolution!.reason).toBe("not that one")
      }))

    test("an expired request resumes as expired (deny), not as a human's denial", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const requestId = yield* pause({ id: "d1", name: "deploy", sessionKey: "s1" })
        const token = yield* checkpoints.save(Turn, [requestId], { messages: [], step: 0 })
        yield* TestClock.adjust("61 seconds")
        const resumed = yield* checkpoints.resume(Turn, token)
        expect(resumed.requests[0]!.status).toBe("expired")
        expect(resumed.requests[0]!.resolution!.respondedBy).toBeUndefined()
      }))

    test("bad input: typed errors and nothing saved", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const requestId = yield* pause(bash("c1"))
        expect((yield* failure(checkpoints.save(Turn, [], { messages: [], step: 0 })))._tag).toBe("CheckpointInvalid")
        expect(
          (yield* failure(
            checkpoints.save(Turn, [ApprovalRequest.RequestId.make("req_missing")], { messages: [], step: 0 })
          ))._tag
        ).toBe(
          "RequestNotFound"
        )
        const invalid = yield* failure(checkpoints.save(Turn, [requestId], { messages: "nope", step: 0 } as never))
        expect(invalid._tag).toBe("CheckpointInvalid")
        expect((yield* failure(checkpoints.find(requestId)))._tag).toBe("CheckpointNotFound")
        expect(
          (yield* failure(checkpoints.resume(Turn, Checkpoint.Token.make("cp_00000000-0000-0000-0000-000000000000"))))
            ._tag
        ).toBe(
          "CheckpointNotFound"
        )
        const token = yield* checkpoints.save(Turn, [requestId], { messages: [], step: 0 })
        // a request belongs to one checkpoint; a checkpoint resumes only at its own wait point
        const other = yield* pause(bash("c2"))
        expect((yield* failure(checkpoints.save(Turn, [other, requestId], { messages: [], step: 1 })))._tag).toBe(
          "CheckpointInvalid"
        )
        expect((yield* failure(checkpoints.resume(OtherPoint, token)))._tag).toBe("CheckpointNotFound")
        // a retried turn (same requests, same state, keys in any order) gets the same checkpoint; a
        // conversation that repeated a call id (same requests, other state) is refused, never given it
        expect(yield* checkpoints.save(Turn, [requestId], { step: 0, messages: [] })).toBe(token)
        const taken = yield* failure(
          checkpoints.save(Turn, [requestId], { messages: ["another conversation"], step: 0 })
        )
        expect(taken._tag).toBe("CheckpointInvalid")
        expect(yield* checkpoints.find(requestId)).toBe(token)
      }))

    test("racing resumes: exactly one wins", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        const requestId = yield* pause(bash("c1"))
        const token = yield* checkpoints.save(Turn, [requestId], { messages: [], step: 0 })
        yield* gate.respond(requestId, { decision: "approve_once" })
        const results = yield* Effect.forEach([1, 2, 3, 4, 5], () => Effect.either(checkpoints.resume(Turn, token)), {
          concurrency: "unbounded"
        })
        const winners = results.filter(Either.isRight)
        expect(winners).toHaveLength(1)
        const losers = results.filter(Either.isLeft).map((r) => r.left)
        expect(losers.map((error) => error._tag)).toEqual(Array(4).fill("CheckpointClaimed"))
        expect(losers.map((error) => (error as { owner?: string }).owner)).toEqual(
          Array(4).fill(winners[0]!.right.lease.owner)
        )
        yield* checkpoints.complete(token, winners[0]!.right.lease)
        const after = yield* Effect.forEach([1, 2, 3], () => failure(checkpoints.resume(Turn, token)), {
          concurrency: "unbounded"
        })
        expect(after.map((error) => error._tag)).toEqual(["AlreadyResumed", "AlreadyResumed", "AlreadyResumed"])
      }))

    test("a resume that crashes before completing: refused while its lease runs, claimed again after it", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        const requestId = yield* pause(bash("c1"))
        const token = yield* checkpoints.save(Turn, [requestId], { messages: ["m"], step: 1 })
        yield* gate.respond(requestId, { decision: "approve_once" })
        // worker-a claims for 30 s, then dies: it never completes
        const crashed = yield* checkpoints.resume(Turn, token, { owner: "worker-a", lease: "30 seconds" })
        expect(crashed.lease).toEqual({ owner: "worker-a", until: 30_000, fence: 1 })
        const refused = yield* failure(checkpoints.resume(Turn, token, { owner: "worker-b" }))
        expect(refused).toMatchObject({ _tag: "CheckpointClaimed", owner: "worker-a", until: 30_000 })
        // the same owner may claim again while its lease runs (a retry in the same worker), renewing it
        yield* TestClock.adjust("10 seconds")
        const retried = yield* checkpoints.resume(Turn, token, { owner: "worker-a", lease: "30 seconds" })
        expect(retried.lease.until).toBe(40_000)
        // it records progress before dying; only the holder may
        yield* checkpoints.update(Turn, token, retried.lease, { messages: ["m", "ran c1"], step: 2 })
        const notHolder = { owner: "worker-b", until: 40_000, fence: retried.lease.fence }
        expect((yield* failure(checkpoints.update(Turn, token, notHolder, { messages: [], step: 9 })))._tag).toBe(
          "CheckpointClaimed"
        )
        yield* TestClock.adjust("30 seconds")
        const taken = yield* checkpoints.resume(Turn, token, { owner: "worker-b" })
        expect(taken.state).toEqual({ messages: ["m", "ran c1"], step: 2 })
        expect(taken.requests.map((r) => r.status)).toEqual(["approved"])
        // the stale owner can no longer complete; the new one does, once (again is a no-op)
        expect(yield* failure(checkpoints.complete(token, retried.lease))).toMatchObject({
          _tag: "CheckpointClaimed",
          owner: "worker-b"
        })
        expect((yield* failure(checkpoints.update(Turn, token, retried.lease, { messages: [], step: 9 })))._tag).toBe(
          "CheckpointClaimed"
        )
        yield* checkpoints.complete(token, taken.lease)
        yield* checkpoints.complete(token, taken.lease)
        expect((yield* failure(checkpoints.update(Turn, token, taken.lease, { messages: [], step: 9 })))._tag).toBe(
          "AlreadyResumed"
        )
        // a superseded lease is told who superseded it, even once the checkpoint is completed
        expect(yield* failure(checkpoints.complete(token, retried.lease))).toMatchObject({
          _tag: "CheckpointClaimed",
          owner: "worker-b"
        })
        yield* TestClock.adjust("31 seconds")
        expect((yield* failure(checkpoints.resume(Turn, token, { owner: "worker-a" })))._tag).toBe("AlreadyResumed")
      }))

    test("leases fence: an owner that stalled past its lease is refused (renew, update, complete) once another took over", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        const requestId = yield* pause(bash("c1"))
        const token = yield* checkpoints.save(Turn, [requestId], { messages: [], step: 1 })
        yield* gate.respond(requestId, { decision: "approve_once" })
        const a = yield* checkpoints.resume(Turn, token, { owner: "worker-a", lease: "30 seconds" })
        // while it runs, worker-a renews its lease: the same claim, a later end
        yield* TestClock.adjust("10 seconds")
        expect(yield* checkpoints.renew(token, a.lease, "30 seconds")).toEqual({ ...a.lease, until: 40_000 })
        // it stalls past the lease; worker-b takes over with a new fencing token
        yield* TestClock.adjust("31 seconds")
        const b = yield* checkpoints.resume(Turn, token, { owner: "worker-b", lease: "30 seconds" })
        expect(b.lease.fence).toBeGreaterThan(a.lease.fence)
        // worker-a wakes: every act under its old lease is refused, and nothing it tried changed the row
        const stale = [
          yield* failure(checkpoints.renew(token, a.lease, "30 seconds")),
          yield* failure(checkpoints.update(Turn, token, a.lease, { messages: ["stale"], step: 9 })),
          yield* failure(checkpoints.complete(token, a.lease))
        ]
        expect(stale.map((error) => [error._tag, (error as { owner?: string }).owner])).toEqual(
          Array(3).fill(["CheckpointClaimed", "worker-b"])
        )
        // the same owner claiming again (a retry in that worker) supersedes its earlier attempt too
        const b2 = yield* checkpoints.resume(Turn, token, { owner: "worker-b", lease: "30 seconds" })
        expect(b2.lease.fence).toBeGreaterThan(b.lease.fence)
        expect(yield* failure(checkpoints.renew(token, b.lease, "30 seconds"))).toMatchObject({
          _tag: "CheckpointClaimed",
          owner: "worker-b"
        })
        expect((yield* failure(checkpoints.complete(token, b.lease)))._tag).toBe("CheckpointClaimed")
        yield* checkpoints.update(Turn, token, b2.lease, { messages: ["done"], step: 2 })
        yield* checkpoints.complete(token, b2.lease)
        expect((yield* failure(checkpoints.renew(token, b2.lease, "30 seconds")))._tag).toBe("AlreadyResumed")
        yield* TestClock.adjust("31 seconds")
        expect((yield* failure(checkpoints.resume(Turn, token, { owner: "worker-a" })))._tag).toBe("AlreadyResumed")
      }))

    test("leases fence under races: a lapsed owner's renewal and two takeovers at once, exactly one holds the lease", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        for (let round = 0; round < 5; round++) {
          const requestId = yield* pause(bash(`r${round}`))
          const token = yield* checkpoints.save(Turn, [requestId], { messages: [], step: round })
          yield* gate.respond(requestId, { decision: "approve_once" })
          const a = yield* checkpoints.resume(Turn, token, { owner: "worker-a", lease: "30 seconds" })
          yield* TestClock.adjust("31 seconds")
          const [renewed, ...claims] = yield* Effect.all([
            Effect.either(checkpoints.renew(token, a.lease, "30 seconds")),
            Effect.either(checkpoints.resume(Turn, token, { owner: "worker-b", lease: "30 seconds" })),
            Effect.either(checkpoints.resume(Turn, token, { owner: "worker-c", lease: "30 seconds" }))
          ], { concurrency: "unbounded" })
          const holders = [
            ...(Either.isRight(renewed!) ? [renewed.right] : []),
            ...claims.flatMap((claim) =>
              Either.isRight(claim) ? [(claim.right as Checkpoint.Resumed<unknown>).lease] : []
            )
          ]
          expect(holders).toHaveLength(1)
          // only the holder acts: when another took over, worker-a is fenced out
          const [holder] = holders
          if (holder!.owner !== "worker-a") {
            expect((yield* failure(checkpoints.complete(token, a.lease)))._tag).toBe("CheckpointClaimed")
          }
          yield* checkpoints.complete(token, holder!)
        }
      }))

    test("saving the same turn again returns the first token and keeps the first state", () =>
      Effect.gen(function*() {
        const checkpoints = yield* Checkpoint.Checkpoints
        const gate = yield* ToolGate.ToolGate
        const ids = [yield* pause(bash("c1")), yield* pause(bash("c2"))]
        const token = yield* checkpoints.save(Turn, ids, { messages: ["first"], step: 1 })
        expect(yield* checkpoints.save(Turn, [ids[1]!, ids[0]!], { step: 1, messages: ["first"] })).toBe(token)
        // the same requests with other state are another conversation that repeated the call ids
        expect((yield* failure(checkpoints.save(Turn, ids, { messages: ["retry"], step: 1 })))._tag).toBe(
          "CheckpointInvalid"
        )
        // the same requests at another wait point, or only some of them, are another turn: refused
        expect((yield* failure(checkpoints.save(OtherPoint, ids, { step: 1 })))._tag).toBe("CheckpointInvalid")
        expect((yield* failure(checkpoints.save(Turn, [ids[0]!], { messages: [], step: 1 })))._tag).toBe(
          "CheckpointInvalid"
        )
        const extra = yield* pause(bash("c3"))
        expect((yield* failure(checkpoints.save(Turn, [...ids, extra], { messages: [], step: 1 })))._tag).toBe(
          "CheckpointInvalid"
        )
        // racing saves of one turn all get one token
        yield* TestClock.adjust("1 second")
        const racing = yield* pause(bash("c4"))
        const tokens = yield* Effect.forEach(
          [1, 2, 3, 4],
          () => checkpoints.save(Turn, [racing], { messages: [], step: 1 }),
          { concurrency: "unbounded" }
        )
        expect(new Set(tokens).size).toBe(1)
        // racing saves of the same requests with different state: one wins, the others are refused
        yield* TestClock.adjust("1 second")
        const contested = yield* pause(bash("c5"))
        const outcomes = yield* Effect.forEach(
          [1, 2, 3, 4],
          (step) => Effect.either(checkpoints.save(Turn, [contested], { messages: [], step })),
          { concurrency: "unbounded" }
        )
        const won = outcomes.flatMap((o) => o._tag === "Right" ? [o.right] : [])
        expect(won).toHaveLength(1)
        expect(outcomes.flatMap((o) => o._tag === "Left" ? [o.left._tag] : [])).toEqual([
          "CheckpointInvalid",
          "CheckpointInvalid",
          "CheckpointInvalid"
        ])
        expect((yield* checkpoints.open(Turn)).map((cp) => cp.token)).toEqual([token, tokens[0]!, won[0]!])
        yield* Effect.forEach(ids, (id) => gate.respond(id, { decision: "deny" }))
        const resumed = yield* checkpoints.resume(Turn, token)
        expect(resumed.state).toEqual({ messages: ["first"], step: 1 })
      }))

    test("the store's save is idempotent: the same token over the same requests again is true; any overlap else false", () =>
      Effect.gen(function*() {
        const store = yield* CheckpointStore.CheckpointStore
        const row = { token: "t1", name: "wait", state: "{}", requestIds: ["r1", "r2"], createdAt: 1 }
        expect(yield* store.save(row)).toBe(true)
        expect(yield* store.save(row)).toBe(true)
        expect(yield* store.save({ ...row, requestIds: ["r2", "r1"] })).toBe(true)
        expect(yield* store.save({ ...row, requestIds: ["r1"] })).toBe(false)
        expect(yield* store.save({ ...row, requestIds: ["r1", "r2", "r3"] })).toBe(false)
        expect(yield* store.save({ ...row, token: "t2" })).toBe(false)
        expect(yield* store.save({ ...row, token: "t2", requestIds: ["r2", "r3"] })).toBe(false)
        expect((yield* store.open("wait")).map((saved) => [saved.token, saved.requestIds])).toEqual([["t1", [
          "r1",
          "r2"
        ]]])
        expect(Option.isNone(yield* store.find({ requestId: "r3" }))).toBe(true)
      }))

    test("the store's completion is idempotent: the same owner, fence and time again is true; anything else false", () =>
      Effect.gen(function*() {
        const store = yield* CheckpointStore.CheckpointStore
        expect(yield* store.save({ token: "t1", name: "wait", state: "{}", requestIds: ["r1"], createdAt: 1 })).toBe(
          true
        )
        const fence = Option.getOrThrow(yield* store.claim("t1", "worker-a", 2, 100))
        expect(yield* store.complete("t1", "worker-a", fence, 5)).toBe(true)
        expect(yield* store.complete("t1", "worker-a", fence, 5)).toBe(true)
        expect(yield* store.complete("t1", "worker-a", fence, 6)).toBe(false)
        expect(yield* store.complete("t1", "worker-b", fence, 5)).toBe(false)
        expect(yield* store.complete("t1", "worker-a", fence + 1, 5)).toBe(false)
        expect(yield* store.renew("t1", "worker-a", fence, 200)).toBe(false)
        expect(yield* store.update("t1", "worker-a", fence, "{\"x\":1}")).toBe(false)
        expect(Option.isNone(yield* store.claim("t1", "worker-a", 3, 100))).toBe(true)
        const row = Option.getOrThrow(yield* store.find({ token: "t1" }))
        expect([row.completedAt, row.state, row.claims]).toEqual([5, "{}", fence])
      }))
  })
}
