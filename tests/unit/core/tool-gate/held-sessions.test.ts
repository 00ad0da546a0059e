/**
 * Issue 13, start-up at scale: a gate reads a session's approvals on the session's first call that
 * needs them and holds at most `heldSessions` sessions. Gate A and gate B share one store (two
 * connections on one SQLite file, two pools on one PostgreSQL schema, or one memory store); A's
 * store holds chosen reads of session approvals, with their rows already read, until the test lets
 * them go, so that B's commits land exactly between A's read and what A does with it:
 *
 * - a revocation (or grant) B commits after A's first read of the session, and that A's tailer
 *   applies before that read is done, is neither lost nor applied twice;
 * - a revocation A makes itself is not undone by an older read of A's tailer finishing after it;
 * - fibers asking for one session at once share one read, which survives the first one's interruption;
 * - a session dropped beyond `heldSessions` is read again, with what changed meanwhile;
 * - opening the gate reads no session approval;
 * - property: whatever grants and revocations both gates make in two concurrent lanes while A reads
 *   sessions (holding 1, 2 or 8 of them), once A's tailer has read the last of them A's answer for
 *   every session and tool is the store's.
 */
import {
  ApprovalStore,
  type AuditEvent,
  PauseSignal,
  Policy,
  type SessionApproval,
  ToolCall,
  ToolGate
} from "@tool-gate/core"
import { expect, test } from "bun:test"
import { Context, Effect, Exit, FastCheck as fc, Fiber, Layer, Queue, type Scope, Stream } from "effect"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"

const policy = Policy.unsafeMake({ requireApproval: ["bash"] })
const S = ToolCall.SessionKey.make("s-held")
const OTHER = ToolCall.SessionKey.make("s-other")

/** Two stores on one database: A's (the first) and B's. */
type Stores = Effect.Effect<readonly [ApprovalStore.Service, ApprovalStore.Service], unknown, Scope.Scope>

const storeOf = <E>(layer: Layer.Layer<ApprovalStore.ApprovalStore, E>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, ApprovalStore.ApprovalStore))

const memory: Stores = Effect.map(ApprovalStore.makeMemory, (store) => [store, store] as const)

const sqlite: Stores = Effect.gen(function*() {
  const file = join(yield* tempDir, "toolgate.db")
  return [yield* storeOf(storeOver(sqliteClient(file))), yield* storeOf(storeOver(sqliteClient(file)))] as const
})

let channels = 0
const postgres = (url: string): Stores =>
  Effect.gen(function*() {
    const schemaUrl = yield* pgSchema(url)
    const channel = `toolgate_held_${process.pid}_${channels++}`
    return [
      yield* storeOf(pgStoreOver(pgClient(schemaUrl), channel)),
      yield* storeOf(pgStoreOver(pgClient(schemaUrl), channel))
    ] as const
  })

/**
 * A store whose session-approval reads are recorded, and, while `hold` says so, kept with their
 * rows read until `release`: the first session read (`sessionKey`) and the tailer's catch-up
 * (`afterSeq`) each queue in `held`. The tailer's reads of the log can be held back too.
 */
const holding = (store: ApprovalStore.Service) =>
  Effect.gen(function*() {
    const held = yield* Queue.unbounded<ReadonlyArray<SessionApproval.SessionApproval>>()
    const released = yield* Queue.unbounded<void>()
    const reads: Array<ApprovalStore.SessionApprovalQuery> = []
    const hold = { session: false, tail: false }
    const logOpen = yield* Effect.makeLatch(true)
    const holds = (query: ApprovalStore.SessionApprovalQuery) =>
      (hold.session && query.sessionKey !== undefined) || (hold.tail && query.afterSeq !== undefined)
    const wrapped: ApprovalStore.Service = {
      ...store,
      tail: (afterSeq, limit) => Effect.zipRight(logOpen.await, store.tail(afterSeq, limit)),
      sessionApprovals: (query = {}) =>
        Effect.tap(
          Effect.sync(() => reads.push(query)).pipe(Effect.zipRight(store.sessionApprovals(query))),
          (rows) => holds(query) ? Effect.zipRight(Queue.offer(held, rows), Queue.take(released)) : Effect.void
        )
    }
    return {
      store: wrapped,
      hold,
      /** the rows of the next read held */
      next: Queue.take(held),
      release: Queue.offer(released, undefined),
      /** the tailer's reads of the log wait until `openLog` */
      closeLog: logOpen.close,
      openLog: logOpen.open,
      sessionReads: () => reads.filter((query) => query.sessionKey !== undefined && query.id === undefined).length
    }
  })

const gateOver = (store: ApprovalStore.Service, options?: Partial<ToolGate.Options>) =>
  ToolGate.make({ policy, sweepInterval: "1 hour", ...options }).pipe(
    Effect.provideService(ApprovalStore.ApprovalStore, store)
  )

/** Events as the gate's log shows them, from the start: `until` waits for the next one matching. */
const following = (gate: ToolGate.Service) =>
  Effect.gen(function*() {
    const events = yield* Queue.unbounded<AuditEvent.AuditEvent>()
    yield* Effect.forkScoped(Stream.runForEach(gate.auditLog(), (event) => Queue.offer(events, event)))
    const until = (matches: (event: AuditEvent.AuditEvent) => boolean): Effect.Effect<AuditEvent.AuditEvent> =>
      Effect.flatMap(Queue.take(events), (event) => matches(event) ? Effect.succeed(event) : until(matches))
    return until
  })

const bashIn = (sessionKey: ToolCall.SessionKey, id: string) => ({
  id,
  name: "bash",
  args: { command: "make" },
  sessionKey
})

const allowed = (result: PauseSignal.PauseSignal | ToolGate.Allowed) => !PauseSignal.isPauseSignal(result)

/** Gate A over a store whose reads can be held, gate B over a second connection to the same data. */
const gatesOver = (stores: Stores, optionsA?: Partial<ToolGate.Options>) =>
  Effect.gen(function*() {
    const [first, second] = yield* stores
    const a = yield* holding(first)
    return { a, gateA: yield* gateOver(a.store, optionsA), gateB: yield* gateOver(second) }
  })

const suite = (name: string, stores: Stores) =>
  describe(`session approvals read on first need (${name})`, () => {
    it.live("a revocation the tailer applies while the session's read is not done is kept over the read", () =>
      Effect.gen(function*() {
        const { a, gateA, gateB } = yield* gatesOver(stores)
        const until = yield* following(gateA)
        yield* gateB.recordApproval("bash", S, true)
        yield* until((event) => event.type === "session.granted")

        a.hold.session = true
        const asking = yield* Effect.fork(gateA.hasApproval("bash", S))
        expect((yield* a.next).map((grant) => grant.toolName)).toEqual(["bash"])
        // read, not yet applied: B revokes, and A's tailer applies the revocation meanwhile
        yield* gateB.recordApproval("bash", S, false)
        yield* until((event) => event.type === "session.revoked")
        // a later change read by the tailer: its catch-up of the revocation is done
        yield* gateB.recordApproval("bash", OTHER, true)
        yield* until((event) => event.type === "session.granted" && event.sessionKey === OTHER)
        yield* a.release
        expect(yield* Fiber.join(asking)).toBe(false)
        expect(yield* gateA.hasApproval("bash", S)).toBe(false)
        expect(PauseSignal.isPauseSignal(yield* gateA.authorize(bashIn(S, "c1")))).toBe(true)
        expect(a.sessionReads()).toBe(1)
      }))

    it.live("a grant the tailer applies while the session's read is not done is held, once", () =>
      Effect.gen(function*() {
        const { a, gateA, gateB } = yield* gatesOver(stores)
        const until = yield* following(gateA)

        a.hold.session = true
        const asking = yield* Effect.fork(gateA.hasApproval("bash", S))
        expect(yield* a.next).toEqual([])
        yield* gateB.recordApproval("bash", S, true)
        yield* until((event) => event.type === "session.granted")
        yield* gateB.recordApproval("bash", OTHER, true)
        yield* until((event) => event.type === "session.granted" && event.sessionKey === OTHER)
        yield* a.release
        // the read saw no grant: the tailer's copy of it, kept aside, is what allows
        expect(yield* Fiber.join(asking)).toBe(true)
        expect(allowed(yield* gateA.authorize(bashIn(S, "c1")))).toBe(true)
        // one revocation takes it away: it was not held twice
        yield* gateB.recordApproval("bash", S, false)
        yield* until((event) => event.type === "session.revoked")
        yield* gateB.recordApproval("bash", OTHER, false)
        yield* until((event) => event.type === "session.revoked" && event.sessionKey === OTHER)
        expect(yield* gateA.hasApproval("bash", S)).toBe(false)
        expect(a.sessionReads()).toBe(1)
      }))

    it.live("a revocation this gate made is not undone by an older read of its tailer that finishes after it", () =>
      Effect.gen(function*() {
        const { a, gateA, gateB } = yield* gatesOver(stores)
        const until = yield* following(gateA)
        expect(yield* gateA.hasApproval("bash", S)).toBe(false)

        a.hold.tail = true
        yield* gateB.recordApproval("bash", S, true)
        // the tailer's catch-up has read the grant, still active
        expect((yield* a.next).map((grant) => [grant.sessionKey, grant.revokedAt])).toEqual([[S, undefined]])
        yield* gateA.recordApproval("bash", S, false)
        expect(yield* gateA.hasApproval("bash", S)).toBe(false)
        a.hold.tail = false
        yield* a.release
        // the tailer publishes the revocation after the catch-up it held: the older read is applied
        yield* until((event) => event.type === "session.revoked")
        expect(yield* gateA.hasApproval("bash", S)).toBe(false)
        expect(PauseSignal.isPauseSignal(yield* gateA.authorize(bashIn(S, "c1")))).toBe(true)
      }))

    it.live("the tailer reads no approvals for the changes this gate made, and reads another gate's", () =>
      Effect.gen(function*() {
        const { a, gateA, gateB } = yield* gatesOver(stores)
        const until = yield* following(gateA)
        expect(yield* gateA.hasApproval("bash", S)).toBe(false)

        a.hold.tail = true
        // the tailer reads A's changes once A has projected them all (else it reads them anyway)
        yield* a.closeLog
        yield* gateA.recordApproval("bash", S, true)
        yield* gateA.recordApproval("bash", S, false)
        const paused = yield* gateA.authorize(bashIn(S, "c1"))
        if (!PauseSignal.isPauseSignal(paused)) return expect.unreachable("bash needs approval")
        yield* gateA.respond(paused.requestId, { decision: "approve_session", respondedBy: "ana" })
        yield* a.openLog
        yield* until((event) => event.type === "approval.resolved")
        // the first catch-up that reads is the one of B's grant, and reads nothing before it
        yield* gateB.recordApproval("bash", OTHER, true)
        expect((yield* a.next).map((grant) => [grant.sessionKey, grant.toolName])).toEqual([[OTHER, "bash"]])
        a.hold.tail = false
        yield* a.release
        yield* until((event) => event.type === "session.granted" && event.sessionKey === OTHER)
        // the approval the answer granted (for these arguments), applied without a read
        expect(yield* gateA.hasApproval("bash", S, { args: { command: "make" } })).toBe(true)
        expect(allowed(yield* gateA.authorize(bashIn(S, "c2")))).toBe(true)
        expect(yield* gateA.hasApproval("bash", OTHER)).toBe(true)
      }))

    it.live("fibers asking for one session at once share one read, which outlives the first one's interruption", () =>
      Effect.gen(function*() {
        const { a, gateA, gateB } = yield* gatesOver(stores)
        yield* gateB.recordApproval("bash", S, true)

        a.hold.session = true
        const firstAsking = yield* Effect.fork(gateA.hasApproval("bash", S))
        yield* a.next
        const others = yield* Effect.fork(
          Effect.all(
            Array.from({ length: 8 }, (_, i) =>
              i % 2 === 0 ? gateA.hasApproval("bash", S) : Effect.map(gateA.authorize(bashIn(S, `c${i}`)), allowed)),
            { concurrency: "unbounded" }
          )
        )
        yield* Fiber.interrupt(firstAsking)
        yield* a.release
        expect(yield* Fiber.join(others)).toEqual(Array.from({ length: 8 }, () =>
          true))
        expect(a.sessionReads()).toBe(1)
      }))

    it.live("beyond heldSessions the least recently used session is dropped, and read again with what changed", () =>
      Effect.gen(function*() {
        const { a, gateA, gateB } = yield* gatesOver(stores, { heldSessions: 2 })
        const [s1, s2, s3] = ["s1", "s2", "s3"].map((key) =>
          ToolCall.SessionKey.make(key)
        )
        for (const key of [s1, s2, s3]) yield* gateB.recordApproval("bash", key!, true)
        expect(yield* gateA.hasApproval("bash", s1!)).toBe(true)
        expect(yield* gateA.hasApproval("bash", s2!)).toBe(true)
        expect(yield* gateA.hasApproval("bash", s1!)).toBe(true)
        expect(a.sessionReads()).toBe(2)
        // s2 is the least recently used: s3 takes its place
        expect(yield* gateA.hasApproval("bash", s3!)).toBe(true)
        expect(yield* gateA.hasApproval("bash", s1!)).toBe(true)
        expect(a.sessionReads()).toBe(3)
        // dropped, s2 misses B's revocation in A's tailer; read again, it has it
        const revoked = yield* gateB.clearApprovals(s2!)
        expect(revoked).toBe(1)
        expect(yield* gateA.hasApproval("bash", s2!)).toBe(false)
        expect(a.sessionReads()).toBe(4)
        expect(PauseSignal.isPauseSignal(yield* gateA.authorize(bashIn(s2!, "c1")))).toBe(true)
      }))

    it.live("opening the gate reads no session approval, and allowed calls read none", () =>
      Effect.gen(function*() {
        const [first, second] = yield* stores
        const gateB = yield* gateOver(second)
        for (let i = 0; i < 20; i++) {
          yield* gateB.recordApproval("bash", ToolCall.SessionKey.make(`s${i}`), true)
        }
        const a = yield* holding(first)
        const gateA = yield* gateOver(a.store, {
          policy: Policy.unsafeMake({ allow: ["read"], requireApproval: ["bash"] })
        })
        expect(a.sessionReads()).toBe(0)
        expect(allowed(yield* gateA.authorize({ id: "c1", name: "read", args: {}, sessionKey: S }))).toBe(true)
        expect(a.sessionReads()).toBe(0)
        expect(allowed(yield* gateA.authorize(bashIn(ToolCall.SessionKey.make("s7"), "c2")))).toBe(true)
        expect(a.sessionReads()).toBe(1)
      }))
  })

const SESSIONS = ["s1", "s2", "s3"].map((key) => ToolCall.SessionKey.make(key))
const TOOLS = ["bash", "deploy"] as const
const by = fc.constantFrom("a" as const, "b" as const)
const lane = fc.constantFrom(0, 1)
const session = fc.constantFrom(...SESSIONS)
const tool = fc.constantFrom(...TOOLS)
const stepArb = fc.oneof(
  { arbitrary: fc.record({ _tag: fc.constant("grant" as const), by, lane, session, tool }), weight: 3 },
  { arbitrary: fc.record({ _tag: fc.constant("revokeTool" as const), by, lane, session, tool }), weight: 2 },
  {
    arbitrary: fc.record({ _tag: fc.constant("revokeOne" as const), by, lane, session, pick: fc.nat({ max: 3 }) }),
    weight: 1
  },
  {
    arbitrary: fc.record({
      _tag: fc.constant("clear" as const),
      by,
      lane,
      session: fc.option(session, { nil: undefined })
    }),
    weight: 1
  },
  { arbitrary: fc.record({ _tag: fc.constant("ask" as const), lane, session, tool }), weight: 3 }
)
type Step = typeof stepArb extends fc.Arbitrary<infer S> ? S : never

const run = (a: ToolGate.Service, b: ToolGate.Service, store: ApprovalStore.Service, step: Step) => {
  const gate = step._tag !== "ask" && step.by === "a" ? a : b
  switch (step._tag) {
    case "grant":
      return gate.recordApproval(step.tool, step.session, true)
    case "revokeTool":
      return gate.recordApproval(step.tool, step.session, false)
    case "revokeOne":
      return Effect.flatMap(store.sessionApprovals({ sessionKey: step.session }), (grants) => {
        const picked = grants[step.pick % Math.max(1, grants.length)]
        return picked === undefined ? Effect.void : Effect.ignore(gate.revokeApproval(picked.id))
      })
    case "clear":
      return gate.clearApprovals(step.session)
    case "ask":
      return a.hasApproval(step.tool, step.session)
  }
}

/**
 * A store whose first reads of a session, once they have their rows, let the other fibers (the
 * lanes, the tailer) run a drawn number of turns: the window between a read and its use.
 */
const slowed = (store: ApprovalStore.Service, delays: ReadonlyArray<number>): ApprovalStore.Service => {
  let n = 0
  return {
    ...store,
    sessionApprovals: (query) =>
      Effect.tap(
        store.sessionApprovals(query),
        () =>
          query?.sessionKey === undefined
            ? Effect.void
            : Effect.repeatN(Effect.yieldNow(), delays[n++ % delays.length]!)
      )
  }
}

const exactness = (stores: Stores) =>
  fc.asyncProperty(
    fc.constantFrom(1, 2, 8),
    fc.array(stepArb, { minLength: 1, maxLength: 24 }),
    fc.array(fc.nat({ max: 60 }), { minLength: 1, maxLength: 8 }),
    (heldSessions, steps, delays) =>
      Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const [first, second] = yield* stores
        const a = yield* gateOver(slowed(first, delays), { heldSessions })
        const b = yield* gateOver(second)
        const until = yield* following(a)
        yield* Effect.all(
          [0, 1].map((n) =>
            Effect.forEach(steps.filter((step) => step.lane === n), (step) => run(a, b, second, step), {
              discard: true
            })
          ),
          { concurrency: "unbounded", discard: true }
        )
        // the catch-up that read the first marker is done once a later one reads the second
        const marker = ToolCall.SessionKey.make("marker")
        yield* b.recordApproval("one", marker, true)
        yield* until((event) => event.sessionKey === marker && event.toolName === "one")
        yield* b.recordApproval("two", marker, true)
        yield* until((event) => event.sessionKey === marker && event.toolName === "two")
        const now = Date.now()
        for (const key of SESSIONS) {
          const truth = yield* second.sessionApprovals({ sessionKey: key, activeAt: now })
          for (const name of TOOLS) {
            expect([key, name, yield* a.hasApproval(name, key)]).toEqual([
              key,
              name,
              truth.some((grant) => grant.toolName === name && grant.scope === "tool")
            ])
          }
        }
      })))
  )

const RUNS: Record<string, number> = { memory: 100, sqlite: 25, postgres: 15 }

const suites = (name: string, stores: Stores) => {
  suite(name, stores)
  describe(`session approvals held by a gate match the store (${name})`, () => {
    test("after any grants and revocations of two gates, racing the first reads and the tailer", async () => {
      await fc.assert(exactness(stores), { numRuns: RUNS[name]!, endOnFailure: true, verbose: 1 })
    }, 120_000)
  })
}

suites("memory", memory)
suites("sqlite", sqlite)
describePostgres("tests in held-sessions.test.ts", (url) => suites("postgres", postgres(url)))

describe("heldSessions", () => {
  it.scoped("is a whole number from 1: anything else is a programming error", () =>
    Effect.gen(function*() {
      const store = yield* ApprovalStore.makeMemory
      for (const heldSessions of [0, -1, 1.5, Number.NaN]) {
        const exit = yield* Effect.exit(gateOver(store, { heldSessions }))
        expect(Exit.isFailure(exit) && exit.cause._tag === "Die").toBe(true)
      }
    }))
})
