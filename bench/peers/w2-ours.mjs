/**
 * W2 for tool-gate on the same footing as the peers: Node, better-sqlite3 (through
 * `@tool-gate/sqlite`), the BUILT packages (`packages/*\/dist`, imported by package name through the
 * default export conditions). The logic of bench/w2.ts: `authorize` pauses (request and event
 * committed), `respond` commits the approval, `gate` resumes and runs the tool (the approval
 * spent, durably); then all calls in flight at once, each waiting in `gate`, answered by a
 * responder fiber tailing the audit log; then all in flight again the way the peers' scripts run
 * them, each round trip approving its own call (`selfApproved*` fields).
 */
import { ApprovalRequest, ApprovalStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Fiber, Stream } from "effect"
import { join } from "node:path"
import { counts, figures, report, tempDir, w2Line } from "./lib.mjs"

const bash = (id) => ({ id, name: "bash", sessionKey: "w2", args: { command: `make ${id}` } })

const policy = Policy.unsafeMake({ requireApproval: ["bash"] })

const measureEffect = (body) =>
  Effect.gen(function*() {
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    yield* body
    const wallMs = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000 }
  })

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const store = yield* ApprovalStore.ApprovalStore
  const approve = { decision: "approve_once", respondedBy: "bench" }
  const pauses = []
  const resumes = []
  const roundTrip = (id, timed) =>
    Effect.gen(function*() {
      const t0 = performance.now()
      const paused = yield* gate.authorize(bash(id))
      if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.die("expected a pause")
      const t1 = performance.now()
      yield* gate.respond(paused.requestId, approve)
      const t2 = performance.now()
      yield* gate.gate(bash(id), () => Effect.void)
      const t3 = performance.now()
      if (timed) {
        pauses.push(t1 - t0)
        resumes.push(t3 - t2)
      }
    })

  for (let i = 0; i < counts.warmup; i++) yield* roundTrip(`warm-${i}`, false)
  const sequential = yield* measureEffect(Effect.gen(function*() {
    for (let i = 0; i < counts.sequential; i++) yield* roundTrip(`seq-${i}`, true)
  }))

  const concurrent = yield* measureEffect(Effect.gen(function*() {
    const afterSeq = yield* store.lastSeq
    const responder = yield* gate.auditLog({ afterSeq }).pipe(
      Stream.filter((e) => e.type === "approval.requested"),
      Stream.take(counts.concurrent),
      Stream.runForEach((e) => gate.respond(ApprovalRequest.RequestId.make(e.requestId), approve)),
      Effect.fork
    )
    yield* Effect.forEach(
      Array.from({ length: counts.concurrent }, (_, i) => bash(`par-${i}`)),
      (call) => gate.gate(call, () => Effect.void),
      { concurrency: "unbounded", discard: true }
    )
    yield* Fiber.join(responder)
  }))
  // The peers' in-flight pattern (each round trip approves its own call, no waiting), for a
  // like-for-like ratio against their in-flight figure.
  const selfApproved = yield* measureEffect(Effect.forEach(
    Array.from({ length: counts.concurrent }, (_, i) => `self-${i}`),
    (id) => roundTrip(id, false),
    { concurrency: "unbounded", discard: true }
  ))
  const line = w2Line({
    peer: "tool-gate",
    versions: ["@tool-gate/core (built dist)", "@tool-gate/sqlite (built dist)"],
    notes:
      "authorize -> respond -> gate on ToolGateSqlite.layer; all in flight wait in gate, answered from the audit log",
    sequential,
    concurrent,
    pauses,
    resumes
  })
  const { cpuMsPerOp, perSec } = figures(counts.concurrent, selfApproved)
  return { ...line, selfApprovedRoundTripsPerSec: perSec, selfApprovedCpuMsPerRoundTrip: cpuMsPerOp }
})

const filename = join(tempDir(), "tool-gate.db")
report(await Effect.runPromise(program.pipe(Effect.provide(ToolGateSqlite.layer({ filename, policy })))))
process.exit(0)
