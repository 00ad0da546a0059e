import { NodeFileSystem } from "@effect/platform-node"
import { ApprovalStore, type AuditEvent, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { expect } from "bun:test"
import { Chunk, Context, Effect, Layer, Logger, Queue, Ref, Schedule, Stream } from "effect"
import { renameSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { sqliteClient, storeOver, tempDir } from "../../../support/sqlStores.js"

// Policy reload with a real file on disk: the file is rewritten while the watch runs, and the
// gate enforces each valid version from its `policy.loaded` event on, keeping the old one when a
// new file is broken.

const v1 = `requireApproval: [bash]
deny:
  - { id: v1-deploy, tool: deploy, reason: frozen }
`
const v2 = `requireApproval: [bash]
allow:
  - { id: v2-deploy, tool: deploy }
`
const broken = `requireApproval: [bash]
deny:
  - { id: typo, tool: deploy, reasn: frozen }
`
const v3 = `default: deny
`

/** Writes `text` as an editor that saves by renaming a new file over the old one does. */
const save = (path: string, text: string) =>
  Effect.sync(() => {
    writeFileSync(`${path}.tmp`, text)
    renameSync(`${path}.tmp`, path)
  })

const versionOf = (text: string) => Effect.map(Policy.fromYaml(text), (policy) => policy.version)

const deploy = (id: string) => ({ id, name: "deploy", sessionKey: "s1" })

/** Waits until the gate enforces `version` (its policy.loaded event is written just before). */
const enforcing = (gate: ToolGate.Service, version: string) =>
  Effect.repeat(Effect.sync(() => gate.policy.version), {
    until: (current) => current === version,
    schedule: Schedule.spaced("5 millis")
  })

/** The policy.loaded events of the log, replayed then live, the first `n` of them. */
const loaded = (gate: ToolGate.Service, n: number) =>
  gate.auditLog().pipe(
    Stream.filter((event) => event.type === "policy.loaded"),
    Stream.take(n),
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray)
  )

describe("Policy.watch", () => {
  it.live("gives the file as it is, then each saved version; a broken save is Rejected with its problem", () =>
    Effect.gen(function*() {
      const path = join(yield* tempDir, "policy.yaml")
      writeFileSync(path, v1)
      const seen = yield* Queue.unbounded<Policy.Reload>()
      yield* Policy.watch(path, { interval: "50 millis" }).pipe(
        Stream.runForEach((reload) => Queue.offer(seen, reload)),
        Effect.forkScoped
      )
      const first = yield* Queue.take(seen)
      expect(first._tag === "Loaded" && first.policy.version).toBe(yield* versionOf(v1))

      yield* save(path, broken)
      const rejected = yield* Queue.take(seen)
      if (rejected._tag !== "Rejected") throw new Error(`expected Rejected, got ${rejected._tag}`)
      expect(rejected.source).toBe(path)
      expect(rejected.error.problems.map((problem) => problem.path)).toContain("deny[0].reasn")

      yield* save(path, v2)
      const second = yield* Queue.take(seen)
      expect(second._tag === "Loaded" && second.policy.version).toBe(yield* versionOf(v2))
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.live("a file that cannot be read is Rejected, and read again once it is back", () =>
    Effect.gen(function*() {
      const path = join(yield* tempDir, "policy.json")
      const seen = yield* Queue.unbounded<Policy.Reload>()
      yield* Policy.watch(path, { interval: "50 millis" }).pipe(
        Stream.runForEach((reload) => Queue.offer(seen, reload)),
        Effect.forkScoped
      )
      const missing = yield* Queue.take(seen)
      expect(missing._tag === "Rejected" && missing.error.message).toContain("cannot read the file")
      yield* save(path, JSON.stringify({ deny: ["deploy"] }))
      const back = yield* Queue.take(seen)
      expect(back._tag).toBe("Loaded")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.live(
    "a file caught halfway through being written is not enforced: only what stays as read",
    () =>
      Effect.gen(function*() {
        const path = join(yield* tempDir, "policy.yaml")
        writeFileSync(path, v1)
        const seen = yield* Queue.unbounded<Policy.Reload>()
        // a long settle, so the test's second write lands well inside it
        yield* Policy.watch(path, { interval: "20 millis", settle: "1500 millis" }).pipe(
          Stream.runForEach((reload) => Queue.offer(seen, reload)),
          Effect.forkScoped
        )
        expect((yield* Queue.take(seen))._tag).toBe("Loaded")
        // the first half of v2 alone is a valid policy that denies nothing
        const half = "requireApproval: [bash]\n"
        yield* Effect.sync(() => writeFileSync(path, half))
        yield* Effect.sleep("100 millis").pipe(Effect.zipRight(Effect.sync(() => writeFileSync(path, v2))))
        const next = yield* Queue.take(seen)
        expect(next._tag === "Loaded" && next.policy.version).toBe(yield* versionOf(v2))
        expect(yield* versionOf(half)).not.toBe(yield* versionOf(v2))
      }).pipe(Effect.provide(NodeFileSystem.layer)),
    30_000
  )

  it.live("an unknown extension is Rejected at once", () =>
    Effect.gen(function*() {
      const [reload] = yield* Stream.runCollect(Policy.watch("policy.toml"))
      expect(reload?._tag === "Rejected" && reload.error.message).toContain("unknown file type")
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

/** A gate on the SQLite file `db` enforcing the policy file `path`, reloading it as it changes. */
const gateOn = (db: string, path: string, logs: Ref.Ref<ReadonlyArray<string>>) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const policy = yield* Policy.load(path)
    const reload = Policy.watch(path, { interval: "50 millis" }).pipe(Stream.provideLayer(NodeFileSystem.layer))
    const logger = Logger.make(({ message }) =>
      Ref.update(logs, (all) => [...all, Array.isArray(message) ? message.join(" ") : String(message)]).pipe(
        Effect.runSync
      )
    )
    return ToolGate.layer({ policy, reload }).pipe(
      Layer.provide(storeOver(sqliteClient(db))),
      Layer.provide(Logger.replace(Logger.defaultLogger, logger))
    )
  })).pipe(Layer.provide(NodeFileSystem.layer))

describe("a gate that reloads its policy file", () => {
  it.live(
    "the next call is judged by the new file; a broken file keeps the old (logged); each switch is a durable policy.loaded event",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const path = join(dir, "policy.yaml")
        const db = join(dir, "toolgate.db")
        writeFileSync(path, v1)
        const logs = yield* Ref.make<ReadonlyArray<string>>([])
        const [one, two, three] = [yield* versionOf(v1), yield* versionOf(v2), yield* versionOf(v3)]

        yield* Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const before = yield* gate.evaluate(deploy("c1"))
          expect([before._tag, before.rule?.id, before.policyVersion]).toEqual(["Deny", "v1-deploy", one])

          yield* save(path, v2)
          yield* enforcing(gate, two)
          const [switched] = yield* loaded(gate, 1)
          expect([switched?.policyVersion, switched?.previousVersion, switched?.source]).toEqual([two, one, path])
          const after = yield* gate.evaluate(deploy("c2"))
          expect([after._tag, after.rule?.id, after.policyVersion]).toEqual(["Allow", "v2-deploy", two])
          expect(gate.policy.version).toBe(two)

          // A broken file: logged with its problem, the gate keeps v2 and audits no switch.
          yield* save(path, broken)
          yield* Effect.repeat(Ref.get(logs), {
            until: (lines) => lines.some((line) => line.includes("was not loaded")),
            schedule: Schedule.spaced("5 millis")
          })
          const warning = (yield* Ref.get(logs)).find((line) => line.includes("was not loaded"))!
          expect(warning).toContain(`keeps policy ${two}`)
          expect(warning).toContain("reasn")
          const still = yield* gate.evaluate(deploy("c3"))
          expect([still._tag, still.policyVersion]).toEqual(["Allow", two])

          // Fixed again: a switch from v2.
          yield* save(path, v3)
          yield* enforcing(gate, three)
          const [, third] = yield* loaded(gate, 2)
          expect([third?.policyVersion, third?.previousVersion]).toEqual([three, two])
          const last = yield* gate.evaluate(deploy("c4"))
          expect([last._tag, last.policyVersion]).toEqual(["Deny", three])
        }).pipe(Effect.provide(gateOn(db, path, logs)), Effect.scoped)

        // Durable: a store opened afresh on the file reads the switches, each before the first
        // decision its version judged.
        const events = yield* Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.events()).pipe(
          Effect.provide(storeOver(sqliteClient(db)))
        )
        const summary = events.map((event: AuditEvent.AuditEvent) =>
          event.type === "policy.loaded" ? `loaded ${event.policyVersion}` : `${event.outcome} ${event.policyVersion}`
        )
        expect(summary).toEqual([
          `deny ${one}`,
          `loaded ${two}`,
          `allow ${two}`,
          `allow ${two}`,
          `loaded ${three}`,
          `deny ${three}`
        ])
      }),
    30_000
  )

  it.live(
    "a call is judged wholly by one version while the file switches under many calls",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const path = join(dir, "policy.yaml")
        writeFileSync(path, v1)
        const logs = yield* Ref.make<ReadonlyArray<string>>([])
        const [one, two] = [yield* versionOf(v1), yield* versionOf(v2)]
        const decisions = yield* Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const calls = Effect.forEach(
            Array.from({ length: 400 }, (_, i) => i),
            (i) => Effect.zipLeft(gate.evaluate(deploy(`c${i}`)), Effect.yieldNow()),
            { concurrency: 8 }
          )
          const running = yield* Effect.fork(calls)
          for (const text of [v2, v1, v2]) {
            yield* save(path, text)
            yield* enforcing(gate, text === v1 ? one : two)
          }
          return yield* running
        }).pipe(Effect.provide(gateOn(join(dir, "toolgate.db"), path, logs)), Effect.scoped)
        for (const decision of decisions) {
          expect([decision._tag, decision.rule?.id]).toEqual(
            decision.policyVersion === one ? ["Deny", "v1-deploy"] : ["Allow", "v2-deploy"]
          )
        }
        expect(new Set(decisions.map((decision) => decision.policyVersion)).has(one)).toBe(true)
      }),
    30_000
  )
})

describe("a reload and the calls asked before it", () => {
  it.live("an approval given under the old version does not run a call the new version denies", () =>
    Effect.gen(function*() {
      const reloads = yield* Queue.unbounded<Policy.Reload>()
      const before = Policy.unsafeMake({ requireApproval: ["deploy"] })
      const after = Policy.unsafeMake({ deny: [{ id: "freeze", tool: "deploy", reason: "release freeze" }] })
      const context = yield* Layer.build(
        ToolGate.layer({ policy: before, reload: Stream.fromQueue(reloads) }).pipe(
          Layer.provide(ApprovalStore.layerMemory)
        )
      )
      const gate = Context.get(context, ToolGate.ToolGate)
      const call = { id: "c1", name: "deploy", args: { env: "prod" }, sessionKey: "s1" }
      const asked = yield* gate.authorize(call)
      if (!PauseSignal.isPauseSignal(asked)) throw new Error("expected a pause")

      yield* Queue.offer(reloads, Policy.Reload.Loaded({ policy: after, source: "policy.yaml" }))
      yield* enforcing(gate, after.version)
      yield* gate.respond(asked.requestId, { decision: "approve_once", respondedBy: "ana" })

      let ran = false
      const denied = yield* Effect.flip(gate.gate(call, () => Effect.sync(() => (ran = true))))
      expect(denied._tag === "ToolDenied" && [denied.outcome, denied.rule]).toEqual(["policy", "freeze"])
      expect(ran).toBe(false)
    }))
})
