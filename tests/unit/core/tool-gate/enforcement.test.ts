/**
 * The gate that runs a call has the last word, and the store decides what a gate's memory might
 * get wrong: an edit that the enforcing gate's own policy denies never runs; an answer after the
 * deadline on the database's clock is refused whatever the responder's clock says; a session
 * approval committed by another gate is honoured at once, and a revoked one is never used again;
 * a gate that cannot read the log stops relying on session approvals.
 *
 * Each test runs two gates on one store (memory, a SQLite file, a PostgreSQL schema), as two
 * processes sharing a database would.
 */
import { SqlClient } from "@effect/sql"
import type { ApprovalStore } from "@tool-gate/core"
import { PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { ApprovalStore as Store } from "@tool-gate/core"
import { expect } from "bun:test"
import { Clock, Context, Duration, Effect, Either, Layer, type Scope } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"

const agentPolicy = Policy.unsafeMake({
  deny: [{ id: "no-rm", tool: "bash", args: { command: "rm *" }, reason: "no deletions" }],
  requireApproval: [{ id: "ask-bash", tool: "bash", ttlMs: 60_000 }, {
    id: "ask-deploy",
    tool: "deploy",
    sessionScope: "tool"
  }]
})
// An approver's process holding a stale or laxer policy: it would let the deletion through.
const laxPolicy = Policy.unsafeMake({ requireApproval: ["bash", "deploy"] })

/** Two store layers over one database, as two processes hold: each its own connection. */
interface Backend {
  readonly name: string
  readonly pair: (
    options?: { readonly clock?: "database" | "caller" }
  ) => Effect.Effect<
    readonly [Layer.Layer<ApprovalStore.ApprovalStore>, Layer.Layer<ApprovalStore.ApprovalStore>],
    never,
    Scope.Scope
  >
  /** runs a statement on the database (SQL stores only) */
  readonly exec?: (statement: string) => Effect.Effect<void, never, Scope.Scope>
}

let channel = 0
const sqlite: Backend = {
  name: "sqlite",
  pair: (options) =>
    Effect.map(tempDir, (dir) => {
      const file = join(dir, "gate.db")
      const layer = () => storeOver(sqliteClient(file), options).pipe(Layer.orDie)
      return [layer(), layer()] as const
    })
}

const memory: Backend = {
  name: "memory",
  pair: () => Effect.map(Layer.memoize(Store.layerMemory), (shared) => [shared, shared] as const)
}

const postgres = (url: string): Backend => ({
  name: "postgres",
  pair: (options) =>
    Effect.map(pgSchema(url), (schemaUrl) => {
      const name = `toolgate_enforcement_${channel++}`
      const layer = () => pgStoreOver(pgClient(schemaUrl), name, options).pipe(Layer.orDie)
      return [layer(), layer()] as const
    })
})

const gateOn = (store: Layer.Layer<ApprovalStore.ApprovalStore>, policy: Policy.Policy) =>
  Effect.map(
    Layer.build(ToolGate.layer({ policy }).pipe(Layer.provide(store), Layer.orDie)),
    (context) => Context.get(context, ToolGate.ToolGate)
  )

const asPause = (u: unknown): PauseSignal.PauseSignal => {
  if (!PauseSignal.isPauseSignal(u)) throw new Error(`expected a PauseSignal, got ${JSON.stringify(u)}`)
  return u
}

/** A clock `skewMs` behind (negative) or ahead of the real one, as on a host whose clock is off. */
const skewedClock = (skewMs: number): Clock.Clock => {
  const real = Clock.make()
  return {
    ...real,
    unsafeCurrentTimeMillis: () => real.unsafeCurrentTimeMillis() + skewMs,
    currentTimeMillis: Effect.sync(() => real.unsafeCurrentTimeMillis() + skewMs),
    unsafeCurrentTimeNanos: () => real.unsafeCurrentTimeNanos() + BigInt(skewMs) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => real.unsafeCurrentTimeNanos() + BigInt(skewMs) * 1_000_000n)
  }
}

const enforcementSuite = (backend: Backend) => {
  describe(`the enforcing gate and the store have the last word (${backend.name})`, () => {
    it.live("an edit approved under a laxer policy elsewhere is denied by the enforcing gate's policy and never runs", () =>
      Effect.gen(function*() {
        const [a, b] = yield* backend.pair()
        const agent = yield* gateOn(a, agentPolicy)
        const approver = yield* gateOn(b, laxPolicy)
        const ran: Array<unknown> = []
        const call = { id: "c1", name: "bash", sessionKey: "s1", args: { command: "ls" } }
        const pause = asPause(yield* agent.authorize(call))
        const answered = yield* approver.respond(pause.requestId, {
          decision: "approve_once",
          respondedBy: "ana",
          editedArgs: { command: "rm -rf /" }
        })
        expect(answered.status).toBe("approved")
        const outcome = yield* Effect.either(
          agent.gate(call, (allowed) => Effect.sync(() => ran.push(allowed.call.args)))
        )
        expect(Either.isLeft(outcome) && outcome.left._tag === "ToolDenied" && outcome.left.outcome).toBe("policy")
        expect(ran).toEqual([])
        // asked again: still denied, and audited once
        const again = yield* Effect.either(agent.authorize(call))
        expect(Either.isLeft(again) && again.left._tag).toBe("ToolDenied")
        const events = yield* Effect.flatMap(Store.ApprovalStore, (store) => store.events()).pipe(Effect.provide(a))
        const denials = events.filter((e) => e.type === "decision" && e.outcome === "deny")
        expect(denials).toHaveLength(1)
        expect(denials[0]!.rule).toBe("no-rm")
        expect(denials[0]!.args).toBe(JSON.stringify({ command: "ls" }))
        expect(denials[0]!.editedArgs).toBe(JSON.stringify({ command: "rm -rf /" }))
      }))

    it.live("approve for the session in one gate: the other gate's next call of the tool runs at once, unasked", () =>
      Effect.gen(function*() {
        const [a, b] = yield* backend.pair()
        const agent = yield* gateOn(a, agentPolicy)
        const approver = yield* gateOn(b, agentPolicy)
        for (let round = 0; round < 15; round++) {
          const sessionKey = `s-${round}`
          const pause = asPause(yield* agent.authorize({ id: "d1", name: "deploy", sessionKey, args: { v: 1 } }))
          yield* approver.respond(pause.requestId, { decision: "approve_session", respondedBy: "ana" })
          // the answer committed before this call: the store honours it even if the agent's gate has
          // not read it from the log yet
          const next = yield* agent.authorize({ id: "d2", name: "deploy", sessionKey, args: { v: 2 } })
          expect(PauseSignal.isPauseSignal(next)).toBe(false)
          expect(!PauseSignal.isPauseSignal(next) && next.decision?.via).toBe("sessionApproval")
        }
        expect(yield* agent.pending()).toEqual([])
      }))

    it.live("after a revocation commits in one gate, the other gate never allows through the revoked approval", () =>
      Effect.gen(function*() {
        const [a, b] = yield* backend.pair()
        const agent = yield* gateOn(a, agentPolicy)
        const operator = yield* gateOn(b, agentPolicy)
        for (let round = 0; round < 15; round++) {
          const sessionKey = ToolCall.SessionKey.make(`r-${round}`)
          yield* operator.recordApproval("deploy", sessionKey, true)
          // the agent's gate learns the grant (through the store, or its log), then it is cleared
          const first = yield* agent.authorize({ id: "x1", name: "deploy", sessionKey })
          expect(!PauseSignal.isPauseSignal(first) && first.decision?.via).toBe("sessionApproval")
          expect(yield* operator.clearApprovals(sessionKey, "ops")).toBe(1)
          const after = yield* agent.authorize({ id: "x2", name: "deploy", sessionKey })
          expect(PauseSignal.isPauseSignal(after)).toBe(true)
        }
      }))
  })
}

const deadlineSuite = (backend: Backend) => {
  describe(`deadlines on the database's clock (${backend.name})`, () => {
    it.live("a responder whose clock is 10 s behind cannot approve a request that has expired", () =>
      Effect.gen(function*() {
        const [a, b] = yield* backend.pair({ clock: "database" })
        const shortTtl = Policy.unsafeMake({ requireApproval: [{ tool: "bash", ttlMs: 200 }] })
        const agent = yield* gateOn(a, shortTtl)
        const responder = yield* gateOn(b, shortTtl)
        const pause = asPause(yield* agent.authorize({ id: "late", name: "bash", sessionKey: "s", args: {} }))
        // the request's deadline passes on every clock but the responder's
        yield* Effect.sleep(Duration.millis(400))
        const answer = yield* Effect.either(
          Effect.withClock(responder.respond(pause.requestId, { decision: "approve_once" }), skewedClock(-10_000))
        )
        expect(Either.isLeft(answer) && answer.left._tag).toBe("RequestExpired")
        const settled = yield* agent.getRequest(pause.requestId)
        expect(settled.status).toBe("expired")
        const ran = yield* Effect.either(
          agent.gate({ id: "late", name: "bash", sessionKey: "s", args: {} }, () => Effect.void)
        )
        expect(Either.isLeft(ran) && ran.left._tag === "ToolDenied" && ran.left.outcome).toBe("expired")
      }))

    it.live("a sweeper whose clock is 10 s ahead does not expire a request early", () =>
      Effect.gen(function*() {
        const [a, b] = yield* backend.pair({ clock: "database" })
        const agent = yield* gateOn(a, agentPolicy)
        const sweeper = yield* gateOn(b, agentPolicy)
        const pause = asPause(
          yield* agent.authorize({ id: "early", name: "bash", sessionKey: "s", args: {} }).pipe(
            Effect.withClock(skewedClock(-55_000))
          )
        )
        // created "55 s ago" with a 60 s TTL: due in 5 s on the database's clock, overdue for the sweeper
        yield* Effect.withClock(sweeper.sweep, skewedClock(10_000))
        expect((yield* agent.getRequest(pause.requestId)).status).toBe("pending")
        const approved = yield* agent.respond(pause.requestId, { decision: "approve_once" })
        expect(approved.status).toBe("approved")
      }))
  })
}

enforcementSuite(memory)
enforcementSuite(sqlite)
deadlineSuite(sqlite)
describePostgres("enforcement tests", (url) => {
  enforcementSuite(postgres(url))
  deadlineSuite(postgres(url))
})

describe("a gate that cannot read the log", () => {
  it.live("stops allowing through session approvals (PersistenceError) while policy decisions go on", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = join(dir, "gate.db")
      const store = storeOver(sqliteClient(file), { clock: "caller" }).pipe(Layer.orDie)
      const policy = Policy.unsafeMake({ requireApproval: ["deploy"], allow: ["ls"] })
      const gate = yield* gateOn(store, policy)
      yield* gate.recordApproval("deploy", ToolCall.SessionKey.make("s"), true)
      const before = yield* gate.authorize({ id: "1", name: "deploy", sessionKey: "s" })
      expect(!PauseSignal.isPauseSignal(before) && before.decision?.via).toBe("sessionApproval")
      // another process writes a row this gate cannot decode (a damaged or newer-version row)
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`PRAGMA busy_timeout = 5000`
        yield* sql`INSERT INTO toolgate_events (at, type, outcome, event) VALUES (1, 'session.revoked', 'revoked', 'not json')`
      }).pipe(Effect.provide(sqliteClient(file)), Effect.orDie)
      // a write of the gate's own hints its tailer, which then meets the row
      yield* gate.authorize({ id: "2", name: "ls", sessionKey: "s" })
      // the tailer reads the log in the background: within a few tries, no new call rides the grant
      let refusal: string | undefined
      for (let i = 0; i < 100 && refusal === undefined; i++) {
        const result = yield* Effect.either(gate.authorize({ id: `3-${i}`, name: "deploy", sessionKey: "s" }))
        if (Either.isLeft(result)) refusal = result.left._tag
        else yield* Effect.sleep("20 millis")
      }
      expect(refusal).toBe("PersistenceError")
      const policyAllowed = yield* gate.authorize({ id: "4", name: "ls", sessionKey: "s" })
      expect(PauseSignal.isPauseSignal(policyAllowed)).toBe(false)
    }))
})
