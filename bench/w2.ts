/**
 * W2 durable pause/resume round trip on a SQLite file (WAL), and on PostgreSQL when
 * TOOLGATE_PG_URL is set (a fresh schema): a call that needs approval pauses (request + event
 * committed), an approval is committed, and the call resumes and runs (the approval spent,
 * durably). 10,000 sequential round trips, then 1,000 in flight at once answered by a responder
 * fiber tailing the audit log, then 1,000 in flight each answering its own request (the answers
 * in flight too, as the peers' scripts run theirs), all after W2_WARMUP=2,000 unmeasured sequential
 * round trips (the JIT's warm-up, as W6 has). Figures: round trips per second; p50/p99 of pause,
 * of the answer and of resume (of the sequential round trips), and of resume in flight (from an
 * answer of the tailing responder to its call's tool running). W2_RESPONDERS=N: the tailing
 * responder answers N at a time (1 by default); W2_INFLIGHT_ROUNDS=N: both in-flight phases N times,
 * the first reported as before, the median of the others as `settled...` (the JIT settled). CPU
 * per round trip: the process's, and its main thread's (Linux), steadier on a shared machine.
 * Then, on a store of their own, the Effect steps of a round trip (bench/effectSteps.ts), sequential
 * and each answering its own with W2_STEPS_CALLS=500 in flight: a count no busy machine moves.
 */
import { ApprovalRequest, ApprovalStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import type { Layer } from "effect"
import { Effect, Fiber, Redacted, Stream } from "effect"
import { pgSchema } from "../tests/support/sqlStores.js"
import { counted, StepCounter, stepsPer } from "./effectSteps.js"
import { runMain } from "./main.js"
import { postgresCpuMs, postgresCpuMsPer } from "./postgresCpu.js"
import { checkpointsFromEnv } from "./sqliteCheckpoints.js"
import { mainThreadCpuMs, mainThreadCpuMsPer } from "./threadCpu.js"

const SEQUENTIAL = Number(process.env.W2_SEQUENTIAL ?? 10_000)
// A fresh process runs its first thousands of round trips at a fraction of the settled rate, while
// the JIT compiles the code they run: those are left out of every figure.
const WARMUP = Number(process.env.W2_WARMUP ?? 2_000)
const CONCURRENT = Number(process.env.W2_CONCURRENT ?? 1_000)
// answers in flight at once from the responder tailing the log (as a server takes them)
const RESPONDERS = Number(process.env.W2_RESPONDERS ?? 1)
// rounds of the two in-flight phases: the first as earlier stops measured it (cold for the JIT),
// the median of the others reported as `settled...`
const INFLIGHT_ROUNDS = Number(process.env.W2_INFLIGHT_ROUNDS ?? 1)

// round trips whose Effect steps are counted, after as many unmeasured
const STEPS_CALLS = Number(process.env.W2_STEPS_CALLS ?? 500)

const percentile = (xs: Array<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 1000) / 1000
}

const median = (xs: ReadonlyArray<number>) => percentile([...xs], 0.5)

/** The median, when every figure is known (main-thread CPU is read on Linux only). */
const medianOfKnown = (xs: ReadonlyArray<number | undefined>) =>
  xs.every((x) => x !== undefined) ? median(xs as ReadonlyArray<number>) : undefined

/** This process's CPU time since `since`, in ms per operation. */
const cpuMsPer = (since: NodeJS.CpuUsage, operations: number) => {
  const used = process.cpuUsage(since)
  return Math.round((used.user + used.system) / operations) / 1000
}

const bash = (id: string) => ({ id, name: "bash", sessionKey: "w2", args: { command: `make ${id}` } })

const policy = Policy.unsafeMake({ requireApproval: ["bash"] })

export const runW2With = <E>(
  gateLayer: Layer.Layer<ToolGate.ToolGate | ApprovalStore.ApprovalStore, E>,
  /** PostgreSQL on this machine: also the server's CPU per sequential round trip */
  localServer = false
) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    // the gate's own fibers (its log tailer and the store's change feed) start first, as in a gate
    // open a while: a loop that never yields to the event loop would otherwise run without them
    yield* Effect.sleep("200 millis")
    const pauses: Array<number> = []
    const resumes: Array<number> = []
    const answers: Array<number> = []
    /** One round trip, its three steps timed into `timed` when given. */
    const roundTrip = (id: string, timed: boolean) =>
      Effect.gen(function*() {
        const t0 = performance.now()
        const paused = yield* gate.authorize(bash(id))
        if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.die("expected a pause")
        const t1 = performance.now()
        yield* gate.respond(paused.requestId, { decision: "approve_once", respondedBy: "bench" })
        const t2 = performance.now()
        yield* gate.gate(bash(id), () => Effect.void)
        if (!timed) return
        pauses.push(t1 - t0)
        answers.push(t2 - t1)
        resumes.push(performance.now() - t2)
      })
    for (let i = 0; i < WARMUP; i++) yield* roundTrip(`warm-${i}`, false)
    const start = performance.now()
    const cpu = process.cpuUsage()
    const mainCpu = mainThreadCpuMs()
    const serverCpu = localServer ? postgresCpuMs() : undefined
    for (let i = 0; i < SEQUENTIAL; i++) yield* roundTrip(`seq-${i}`, true)
    const sequential = SEQUENTIAL / ((performance.now() - start) / 1000)
    const sequentialCpu = cpuMsPer(cpu, SEQUENTIAL)
    const sequentialMainCpu = mainThreadCpuMsPer(mainCpu, SEQUENTIAL)
    const sequentialServerCpu = postgresCpuMsPer(serverCpu, SEQUENTIAL)
    console.error(`sequential: ${Math.round(sequential)} round trips/s`)

    /** 1,000 in flight at once, answered by RESPONDERS answers at a time from a fiber tailing the log. */
    const tailing = (round: number) =>
      Effect.gen(function*() {
        const start = performance.now()
        const cpu = process.cpuUsage()
        const mainCpu = mainThreadCpuMs()
        const afterSeq = yield* Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.lastSeq)
        // by tool-call id: when its answer committed, and when its tool ran
        const answeredAt = new Map<string, number>()
        const ranAt = new Map<string, number>()
        const responder = yield* gate.auditLog({ afterSeq }).pipe(
          Stream.filter((e) => e.type === "approval.requested"),
          Stream.take(CONCURRENT),
          Stream.mapEffect(
            (e) =>
              gate.respond(ApprovalRequest.RequestId.make(e.requestId!), {
                decision: "approve_once",
                respondedBy: "bench"
              }).pipe(Effect.tap(() => Effect.sync(() => answeredAt.set(e.toolCallId!, performance.now())))),
            {
              concurrency: RESPONDERS,
              unordered: true
            }
          ),
          Stream.runDrain,
          Effect.fork
        )
        yield* Effect.forEach(
          Array.from({ length: CONCURRENT }, (_, i) => bash(`par-${round}-${i}`)),
          (call) => gate.gate(call, () => Effect.sync(() => ranAt.set(call.id, performance.now()))),
          { concurrency: "unbounded", discard: true }
        )
        yield* Fiber.join(responder)
        const resumes = [...ranAt].map(([id, ran]) => ran - answeredAt.get(id)!)
        return {
          perSec: CONCURRENT / ((performance.now() - start) / 1000),
          cpu: cpuMsPer(cpu, CONCURRENT),
          mainCpu: mainThreadCpuMsPer(mainCpu, CONCURRENT),
          resumeP50: percentile(resumes, 0.5),
          resumeP99: percentile(resumes, 0.99)
        }
      })

    // all in flight again, each round trip answering its own request (as the peers' scripts run
    // theirs): the answers are in flight too, so group commit takes them together
    const selfAnswered = (round: number) =>
      Effect.gen(function*() {
        const start = performance.now()
        const cpu = process.cpuUsage()
        const mainCpu = mainThreadCpuMs()
        yield* Effect.forEach(
          Array.from({ length: CONCURRENT }, (_, i) => `self-${round}-${i}`),
          (id) => roundTrip(id, false),
          { concurrency: "unbounded", discard: true }
        )
        return {
          perSec: CONCURRENT / ((performance.now() - start) / 1000),
          cpu: cpuMsPer(cpu, CONCURRENT),
          mainCpu: mainThreadCpuMsPer(mainCpu, CONCURRENT)
        }
      })

    // The first round is what earlier stops reported; later rounds run the same code again, settled
    // by the JIT (the sequential warm-up does not compile what only the in-flight rounds run).
    const tailed: Array<
      { perSec: number; cpu: number; mainCpu: number | undefined; resumeP50: number; resumeP99: number }
    > = []
    const selves: Array<{ perSec: number; cpu: number; mainCpu: number | undefined }> = []
    for (let round = 0; round < INFLIGHT_ROUNDS; round++) {
      tailed.push(yield* tailing(round))
      selves.push(yield* selfAnswered(round))
    }
    const settledTailed = tailed.slice(1)
    const settledSelves = selves.slice(1)
    const settled = settledTailed.length === 0 ? {} : {
      settledRounds: settledTailed.length,
      settledConcurrentRoundTripsPerSec: Math.round(median(settledTailed.map((r) => r.perSec))),
      settledConcurrentCpuMsPerRoundTrip: median(settledTailed.map((r) => r.cpu)),
      settledConcurrentResumeP50ms: median(settledTailed.map((r) => r.resumeP50)),
      settledConcurrentResumeP99ms: median(settledTailed.map((r) => r.resumeP99)),
      settledConcurrentSelfApprovedRoundTripsPerSec: Math.round(median(settledSelves.map((r) => r.perSec))),
      settledConcurrentSelfApprovedCpuMsPerRoundTrip: median(settledSelves.map((r) => r.cpu)),
      // the main thread's share (Linux): steadier than the rate on a shared machine, since the
      // JIT's and the collector's threads and the waits are left out
      settledConcurrentMainThreadCpuMsPerRoundTrip: medianOfKnown(settledTailed.map((r) => r.mainCpu)),
      settledConcurrentSelfApprovedMainThreadCpuMsPerRoundTrip: medianOfKnown(settledSelves.map((r) => r.mainCpu))
    }
    const concurrent = tailed[0]!.perSec
    const concurrentCpu = tailed[0]!.cpu
    const concurrentMainCpu = tailed[0]!.mainCpu
    const selfApproved = selves[0]!.perSec
    const selfApprovedCpu = selves[0]!.cpu
    const selfApprovedMainCpu = selves[0]!.mainCpu
    return {
      sequentialRoundTripsPerSec: Math.round(sequential),
      concurrentRoundTripsPerSec: Math.round(concurrent),
      concurrentSelfApprovedRoundTripsPerSec: Math.round(selfApproved),
      // this process's CPU (the database server's not included), so runs on a busy machine compare
      sequentialCpuMsPerRoundTrip: sequentialCpu,
      concurrentCpuMsPerRoundTrip: concurrentCpu,
      concurrentSelfApprovedCpuMsPerRoundTrip: selfApprovedCpu,
      // of it on the main thread (Linux): the rest is the runtime's threads and the checkpoint worker
      sequentialMainThreadCpuMsPerRoundTrip: sequentialMainCpu,
      concurrentMainThreadCpuMsPerRoundTrip: concurrentMainCpu,
      // the database server's (PostgreSQL on this machine: every postgres process)
      ...(sequentialServerCpu !== undefined ? { sequentialServerCpuMsPerRoundTrip: sequentialServerCpu } : {}),
      concurrentSelfApprovedMainThreadCpuMsPerRoundTrip: selfApprovedMainCpu,
      pauseP50ms: percentile(pauses, 0.5),
      pauseP99ms: percentile(pauses, 0.99),
      answerP50ms: percentile(answers, 0.5),
      answerP99ms: percentile(answers, 0.99),
      resumeP50ms: percentile(resumes, 0.5),
      resumeP99ms: percentile(resumes, 0.99),
      // in flight, from an answer of the tailing responder to its call's tool running
      concurrentResumeP50ms: tailed[0]!.resumeP50,
      concurrentResumeP99ms: tailed[0]!.resumeP99,
      ...settled
    }
  }).pipe(Effect.provide(gateLayer))

/**
 * The Effect steps of a round trip on a gate of its own (counted apart from the timed runs, whose
 * figures the count would slow): one after another, and in flight each answering its own.
 */
export const effectStepsWith = <E>(gateLayer: Layer.Layer<ToolGate.ToolGate, E>) => {
  const counter = new StepCounter()
  return counted(
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      yield* Effect.sleep("200 millis")
      const roundTrip = (id: string) =>
        Effect.gen(function*() {
          const paused = yield* gate.authorize(bash(id))
          if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.die("expected a pause")
          yield* gate.respond(paused.requestId, { decision: "approve_once", respondedBy: "bench" })
          yield* gate.gate(bash(id), () => Effect.void)
        })
      const ids = (prefix: string) => Array.from({ length: STEPS_CALLS }, (_, i) => `${prefix}-${i}`)
      yield* Effect.forEach(ids("steps-warm"), roundTrip, { discard: true })
      const sequential = yield* stepsPer(
        counter,
        STEPS_CALLS,
        Effect.forEach(ids("steps-seq"), roundTrip, { discard: true })
      )
      const inFlight = yield* stepsPer(
        counter,
        STEPS_CALLS,
        Effect.forEach(ids("steps-par"), roundTrip, { concurrency: "unbounded", discard: true })
      )
      return {
        sequentialEffectStepsPerRoundTrip: sequential,
        concurrentSelfApprovedEffectStepsPerRoundTrip: inFlight
      }
    }).pipe(Effect.provide(gateLayer)),
    counter
  )
}

const sqliteLayer = (filename: string) => ToolGateSqlite.layer({ filename, policy, checkpoints: checkpointsFromEnv() })

/** On a SQLite file (WAL), with the default `@tool-gate/sqlite` layer; the steps on a file beside it. */
export const runW2 = (filename: string) =>
  Effect.zipWith(
    runW2With(sqliteLayer(filename)),
    effectStepsWith(sqliteLayer(`${filename}-steps`)),
    (figures, steps) => ({ ...figures, ...steps })
  )

/** A server on this machine, whose processes' CPU can be read. */
const isLocal = (url: string) => ["localhost", "127.0.0.1", "[::1]"].includes(new URL(url).hostname)

/** On PostgreSQL, in a fresh schema dropped afterwards. */
export const runW2Pg = (url: string) =>
  Effect.scoped(
    Effect.zipWith(
      Effect.flatMap(
        pgSchema(url),
        (schemaUrl) => runW2With(ToolGatePg.layer({ url: Redacted.make(schemaUrl), policy }), isLocal(url))
      ),
      Effect.flatMap(pgSchema(url), (schemaUrl) =>
        effectStepsWith(ToolGatePg.layer({ url: Redacted.make(schemaUrl), policy }))),
      (figures, steps) => ({ ...figures, ...steps })
    )
  )

if (import.meta.main) {
  await runMain("W2", {
    sqlite: (filename) => Effect.runPromise(runW2(filename)),
    postgres: (url) => Effect.runPromise(runW2Pg(url))
  })
}
