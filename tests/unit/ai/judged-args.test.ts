/**
 * The policy judges what the tool runs, on the `@effect/ai` path: a toolkit whose parameter
 * schemas normalize (`Schema.Trim`, `Schema.Lowercase`) is judged on the decoded parameters in
 * their encoded form, and the handler gets exactly the value that was judged.
 */
import { Tool, Toolkit } from "@effect/ai"
import { AgentLoop, GatedToolkit, ScriptedModel } from "@tool-gate/ai"
import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Effect, Layer, Schema } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { tempDir } from "../../support/sqlStores.js"
import { reportSeen, seen } from "./fixtures.js"

const Tools = Toolkit.make(
  Tool.make("bash", { parameters: { command: Schema.Trim }, success: Schema.String }),
  Tool.make("deploy", { parameters: { env: Schema.Lowercase }, success: Schema.String })
)

const policy = Policy.unsafeMake({
  deny: [
    { id: "no-rm-root", tool: "bash", args: { command: "rm -rf /" }, reason: "Never." },
    { id: "no-prod", tool: "deploy", args: { env: "production" }, reason: "Production ships from the runbook." }
  ],
  requireApproval: ["deploy"],
  allow: ["bash"]
})

const session = { sessionKey: "s-1", agentId: "ops-bot" }

/** The handlers record every run with the parameters they got. */
const world = (script: ReadonlyArray<ScriptedModel.Step> = []) => {
  const ran: Array<unknown> = []
  const record = (params: unknown) => Effect.sync(() => (ran.push(params), JSON.stringify(params)))
  const layer = Layer.mergeAll(
    Tools.toLayer({ bash: record, deploy: record }),
    ScriptedModel.layer(script),
    Layer.unwrapScoped(
      Effect.map(tempDir, (dir) => ToolGateSqlite.layer({ filename: join(dir, "gate.db"), policy, clock: "caller" }))
    )
  )
  return { ran, layer }
}

const smuggled = [
  { name: "bash", params: { command: " rm -rf /" }, rule: "no-rm-root" },
  { name: "bash", params: { command: "\trm -rf /" }, rule: "no-rm-root" },
  { name: "bash", params: { command: "rm -rf /\n" }, rule: "no-rm-root" },
  { name: "deploy", params: { env: "PRODUCTION" }, rule: "no-prod" }
]

const deniedBy = (outcome: GatedToolkit.Outcome, rule: string) => {
  expect(outcome._tag).toBe("Denied")
  if (outcome._tag !== "Denied") return
  expect(outcome.denied).toMatchObject({ outcome: "policy", rule })
  expect(outcome.result).toMatchObject({ isFailure: true, result: { denied: true, outcome: "policy" } })
}

describe("GatedToolkit and AgentLoop: the policy judges what the tool runs", () => {
  it.scoped("authorize: whitespace or case around a denied value does not get past the deny rule; no handler runs", () => {
    const { layer, ran } = world()
    return Effect.gen(function*() {
      const toolkit = yield* Tools
      const gate = yield* ToolGate.ToolGate
      for (const [i, { name, params, rule }] of smuggled.entries()) {
        deniedBy(yield* GatedToolkit.authorize(toolkit, { id: `c${i}`, name, params }, session), rule)
      }
      expect(yield* gate.pending()).toEqual([])
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("gate: the same, never waiting for a human on a value the policy refuses", () => {
    const { layer, ran } = world()
    return Effect.gen(function*() {
      const toolkit = yield* Tools
      for (const [i, { name, params, rule }] of smuggled.entries()) {
        deniedBy(yield* GatedToolkit.gate(toolkit, { id: `c${i}`, name, params }, session), rule)
      }
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("the handler gets exactly the value that was judged", () => {
    const { layer, ran } = world()
    return Effect.gen(function*() {
      const toolkit = yield* Tools
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      const ls = yield* GatedToolkit.authorize(
        toolkit,
        { id: "c1", name: "bash", params: { command: "  ls -la \n" } },
        session
      )
      expect(ls).toMatchObject({ _tag: "Ran", result: { isFailure: false, result: `{"command":"ls -la"}` } })
      const pending = yield* GatedToolkit.authorize(
        toolkit,
        { id: "c2", name: "deploy", params: { env: "Staging" } },
        session
      )
      if (pending._tag !== "Pending") throw new Error(`expected Pending, got ${pending._tag}`)
      const [requested] = (yield* store.events({ sessionKey: "s-1" })).filter((e) => e.type === "approval.requested")
      expect(requested!.args).toBe(`{"env":"staging"}`)
      yield* gate.respond(pending.signal.requestId, { decision: "approve_once" })
      const deployed = yield* GatedToolkit.gate(
        toolkit,
        { id: "c2", name: "deploy", params: { env: "Staging" } },
        session
      )
      expect(deployed).toMatchObject({ _tag: "Ran", result: { result: `{"env":"staging"}` } })
      expect(ran).toEqual([{ command: "ls -la" }, { env: "staging" }])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("an approver's edit not in the tool's canonical form is refused; the model reads why; no handler runs", () => {
    const { layer, ran } = world()
    return Effect.gen(function*() {
      const toolkit = yield* Tools
      const gate = yield* ToolGate.ToolGate
      const call = { id: "c1", name: "deploy", params: { env: "staging" } }
      const pending = yield* GatedToolkit.authorize(toolkit, call, session)
      if (pending._tag !== "Pending") throw new Error(`expected Pending, got ${pending._tag}`)
      yield* gate.respond(pending.signal.requestId, { decision: "approve_once", editedArgs: { env: "PRODUCTION" } })
      const refused = yield* GatedToolkit.authorize(toolkit, call, session)
      expect(refused._tag).toBe("Denied")
      expect(refused).toMatchObject({ result: { isFailure: true, result: { denied: true, outcome: "denied" } } })
      if (refused._tag === "Denied") expect(refused.denied.reason).toContain("not in the tool's canonical form")
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("AgentLoop with a scripted model: smuggled values are denied by the policy and never run", () => {
    const { layer, ran } = world([
      { toolCalls: smuggled.map(({ name, params }, i) => ({ id: `c${i}`, name, params })) },
      reportSeen
    ])
    return Effect.gen(function*() {
      const result = yield* AgentLoop.make({ toolkit: Tools }).run("clean up", session)
      if (result._tag !== "Completed") throw new Error(`expected Completed, got ${result._tag}`)
      expect(seen(result.text).map((r) => [r.id, r.isFailure, r.result.outcome])).toEqual(
        smuggled.map((_, i) => [`c${i}`, true, "policy"])
      )
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("AgentLoop resumed with a non-canonical edit: the model reads the refusal; no handler runs", () => {
    const { layer, ran } = world([
      { toolCalls: [{ id: "c1", name: "deploy", params: { env: "staging" } }] },
      reportSeen
    ])
    return Effect.gen(function*() {
      const agent = AgentLoop.make({ toolkit: Tools })
      const gate = yield* ToolGate.ToolGate
      const paused = yield* agent.run("ship it", session)
      if (paused._tag !== "Paused") throw new Error(`expected Paused, got ${paused._tag}`)
      yield* gate.respond(paused.requests[0]!.requestId, {
        decision: "approve_once",
        editedArgs: { env: "PRODUCTION" }
      })
      const result = yield* agent.resume(paused.token)
      if (result._tag !== "Completed") throw new Error(`expected Completed, got ${result._tag}`)
      const [read] = seen(result.text)
      expect(read).toMatchObject({ id: "c1", isFailure: true, result: { denied: true, outcome: "denied" } })
      expect(read!.result.reason).toContain("not in the tool's canonical form")
      expect(ran).toEqual([])
    }).pipe(Effect.provide(layer))
  })
})
