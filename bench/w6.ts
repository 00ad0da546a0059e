/**
 * W6 durable allow hot path: `authorize` of calls the policy allows, each decision recorded for
 * replay and audited in the same transaction. SQLite: one process, 64 calls in flight. PostgreSQL
 * (TOOLGATE_PG_URL): 1, 2 and 4 processes at once on one database (a fresh schema), 64 in flight
 * each, all started together. Figures: decisions per second (all processes together), p50/p99 of
 * one decision, CPU ms per decision (`process.cpuUsage`, summed over the processes), and on
 * PostgreSQL how busy the machine's cores were meanwhile (`machineCpuBusyPct`, server included).
 * Then, on a store of their own, the Effect steps of a decision with 64 in flight
 * (bench/effectSteps.ts; W6_STEPS_CALLS=2000): a count no busy machine moves.
 *
 *   bun --conditions=@tool-gate/source bench/w6.ts      W6_CALLS=20000 per process by default,
 *                                                       after W6_WARMUP=5000 unmeasured ones
 */
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, type Layer, Redacted } from "effect"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createInterface } from "node:readline"
import { pgSchema } from "../tests/support/sqlStores.js"
import { counted, StepCounter, stepsPer } from "./effectSteps.js"
import { runMain } from "./main.js"
import { checkpointsFromEnv } from "./sqliteCheckpoints.js"
import { mainThreadCpuMs } from "./threadCpu.js"

const CALLS = Number(process.env.W6_CALLS ?? 20_000)
const WARMUP = Number(process.env.W6_WARMUP ?? 5_000)
const IN_FLIGHT = 64
// decisions whose Effect steps are counted, after as many unmeasured
const STEPS_CALLS = Number(process.env.W6_STEPS_CALLS ?? 2_000)

const policy = Policy.unsafeMake({ allow: ["ls"] })

const percentile = (sorted: Float64Array, p: number) =>
  Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 1000) / 1000

interface Run {
  readonly decisions: number
  readonly seconds: number
  readonly cpuMs: number
  readonly mainCpuMs: number | undefined
  readonly latencies: Float64Array
}

/**
 * `calls` allowed authorizations by `IN_FLIGHT` callers at once, ids `${tag}-${i}`; `latencies`
 * gets each one's time when given.
 */
const inFlight = (gate: ToolGate.ToolGate["Type"], tag: string, calls: number, latencies?: Float64Array) => {
  let next = 0
  return Effect.forEach(
    Array.from({ length: IN_FLIGHT }, (_, lane) => lane),
    (lane) =>
      Effect.gen(function*() {
        while (next < calls) {
          const i = next++
          const t0 = performance.now()
          const decision = yield* gate.authorize({
            id: `${tag}-${i}`,
            name: "ls",
            sessionKey: `w6-${tag}-${lane % 8}`,
            args: { path: `/repo/${i}` }
          })
          if (PauseSignal.isPauseSignal(decision)) return yield* Effect.die("expected the call allowed")
          if (latencies !== undefined) latencies[i] = performance.now() - t0
          // a caller does something else between its calls (a real agent awaits its model): the
          // other lanes run meanwhile, instead of this one taking every call
          yield* Effect.yieldNow()
        }
      }),
    { concurrency: "unbounded", discard: true }
  )
}

/**
 * `calls` allowed authorizations, `IN_FLIGHT` at once, after `WARMUP` unmeasured ones (the JIT's
 * warm-up, prepared statements); `tag` keeps call ids apart across processes.
 */
const authorizeAll = (tag: string, calls: number, before: Effect.Effect<void> = Effect.void) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    yield* inFlight(gate, `${tag}-warm`, WARMUP)
    yield* before
    const latencies = new Float64Array(calls)
    const cpu = process.cpuUsage()
    const mainCpu = mainThreadCpuMs()
    const start = performance.now()
    yield* inFlight(gate, tag, calls, latencies)
    const seconds = (performance.now() - start) / 1000
    const used = process.cpuUsage(cpu)
    const mainNow = mainThreadCpuMs()
    return {
      decisions: calls,
      seconds,
      cpuMs: (used.user + used.system) / 1000,
      mainCpuMs: mainCpu === undefined || mainNow === undefined ? undefined : mainNow - mainCpu,
      latencies
    } satisfies Run
  })

const figures = (runs: ReadonlyArray<Run>) => {
  const all = new Float64Array(runs.reduce((n, run) => n + run.latencies.length, 0))
  let at = 0
  for (const run of runs) {
    all.set(run.latencies, at)
    at += run.latencies.length
  }
  all.sort()
  const decisions = runs.reduce((n, run) => n + run.decisions, 0)
  return {
    decisionsPerSec: Math.round(decisions / Math.max(...runs.map((run) => run.seconds))),
    p50ms: percentile(all, 0.5),
    p99ms: percentile(all, 0.99),
    cpuMsPerDecision: Math.round(runs.reduce((n, run) => n + run.cpuMs, 0) / decisions * 1000) / 1000,
    // of it on the processes' main threads (Linux): the rest is the runtime's threads and the checkpoint worker
    mainThreadCpuMsPerDecision: runs.some((run) => run.mainCpuMs === undefined)
      ? undefined
      : Math.round(runs.reduce((n, run) => n + run.mainCpuMs!, 0) / decisions * 1000) / 1000
  }
}

const runWith = <E>(layer: Layer.Layer<ToolGate.ToolGate, E>, tag: string, before?: Effect.Effect<void>) =>
  Effect.runPromise(authorizeAll(tag, CALLS, before).pipe(Effect.provide(layer)))

/** The Effect steps of a decision, `IN_FLIGHT` at once, on a gate of its own (apart from the timed runs). */
const effectStepsWith = <E>(layer: Layer.Layer<ToolGate.ToolGate, E>) => {
  const counter = new StepCounter()
  return Effect.runPromise(counted(
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      yield* inFlight(gate, "steps-warm", STEPS_CALLS)
      return { effectStepsPerDecision: yield* stepsPer(counter, STEPS_CALLS, inFlight(gate, "steps", STEPS_CALLS)) }
    }).pipe(Effect.provide(layer)),
    counter
  ))
}

// A worker process (PostgreSQL): opens the store, says ready, waits for "go" on stdin, runs, and
// prints its run as one JSON line.
if (process.argv[2] === "worker") {
  const [url, tag] = [process.argv[3]!, process.argv[4]!]
  const go = Effect.async<void>((resume) => {
    console.log("ready")
    createInterface({ input: process.stdin }).once("line", () => resume(Effect.void))
  })
  const run = await runWith(ToolGatePg.layer({ url: Redacted.make(url), policy }), tag, go)
  console.log(JSON.stringify({ ...run, latencies: Array.from(run.latencies) }))
  process.exit(0)
}

/** The machine's CPU time over all its cores, busy and in all, from /proc/stat (Linux). */
const machineCpu = () => {
  const values = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = values.reduce((sum, value) => sum + value, 0)
  // idle and iowait
  return { busy: total - values[3]! - (values[4] ?? 0), total }
}

/**
 * `processes` workers on one schema, started together; with how busy the machine's cores were
 * while they ran (the database server's work included), which says whether adding processes
 * could add throughput here.
 */
const pgProcesses = (
  url: string,
  processes: number
): Promise<{ readonly runs: Array<Run>; readonly machineCpuBusyPct: number }> => {
  const workers = Array.from(
    { length: processes },
    (_, i) =>
      spawn(
        process.execPath,
        ["--conditions=@tool-gate/source", import.meta.path, "worker", url, `p${processes}-${i}`],
        {
          stdio: ["pipe", "pipe", "inherit"]
        }
      )
  )
  const lines = workers.map((worker) => createInterface({ input: worker.stdout! }))
  const ready = lines.map((rl) => new Promise<void>((resolve) => rl.once("line", () => resolve())))
  const done = lines.map((rl) =>
    new Promise<Run>((resolve, reject) => {
      let seen = 0
      rl.on("line", (line) => {
        if (seen++ === 0) return
        const run = JSON.parse(line)
        resolve({ ...run, latencies: Float64Array.from(run.latencies) })
      })
      rl.once("close", () => reject(new Error("a W6 worker ended without its figures")))
    })
  )
  return Promise.all(ready).then(async () => {
    const before = machineCpu()
    for (const worker of workers) worker.stdin!.write("go\n")
    const runs = await Promise.all(done)
    const after = machineCpu()
    const machineCpuBusyPct = Math.round((after.busy - before.busy) / (after.total - before.total) * 100)
    return { runs, machineCpuBusyPct }
  })
}

if (import.meta.main) {
  await runMain("W6", {
    sqlite: async (filename) => ({
      ...figures([
        await runWith(ToolGateSqlite.layer({ filename, policy, checkpoints: checkpointsFromEnv() }), "sqlite")
      ]),
      ...(await effectStepsWith(ToolGateSqlite.layer({ filename: `${filename}-steps`, policy })))
    }),
    postgres: async (url) => {
      const byProcesses: Record<string, object> = {}
      for (const processes of [1, 2, 4]) {
        const { machineCpuBusyPct, runs } = await Effect.runPromise(
          Effect.scoped(
            Effect.flatMap(pgSchema(url), (schemaUrl) => Effect.promise(() => pgProcesses(schemaUrl, processes)))
          )
        )
        byProcesses[`${processes} process${processes > 1 ? "es" : ""}`] = { ...figures(runs), machineCpuBusyPct }
      }
      const steps = await Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(
            pgSchema(url),
            (schemaUrl) =>
              Effect.promise(() => effectStepsWith(ToolGatePg.layer({ url: Redacted.make(schemaUrl), policy })))
          )
        )
      )
      return { ...byProcesses, ...steps }
    }
  })
}
