/**
 * The policy judges what the tool runs: a `GatedTool` with a parameter schema that normalizes
 * (`Schema.Trim`, `Schema.Lowercase`) is judged on the decoded value in its encoded form, never
 * on the raw arguments, and the tool gets exactly the value that was judged.
 */
import { ApprovalStore, GatedTool, PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect, test } from "bun:test"
import { Effect, FastCheck as fc, Layer, Schema } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { tempDir } from "../../support/sqlStores.js"

const policy = Policy.unsafeMake({
  deny: [
    { id: "no-rm-root", tool: "bash", args: { command: "rm -rf /" }, reason: "Never." },
    { id: "no-prod", tool: "deploy", args: { env: "production" }, reason: "Production ships from the runbook." }
  ],
  requireApproval: ["deploy"],
  allow: ["bash"]
})

const GateLive = Layer.unwrapScoped(
  Effect.map(tempDir, (dir) => ToolGateSqlite.layer({ filename: join(dir, "gate.db"), policy, clock: "caller" }))
)

const Bash = Schema.Struct({ command: Schema.Trim })
const Deploy = Schema.Struct({ env: Schema.Lowercase })

/** Tools whose every run is recorded with the value it got and the call the gate allowed. */
const tools = () => {
  const ran: Array<{ readonly params: unknown; readonly judged: string }> = []
  const record = <P>(params: P, allowed: ToolGate.Allowed) =>
    Effect.sync(() => {
      ran.push({ params, judged: ToolCall.canonicalArgs(allowed.call.args) })
      return params
    })
  return {
    ran,
    bash: GatedTool.make("bash", Bash, record),
    deploy: GatedTool.make("deploy", Deploy, record)
  }
}

const context = (id: string) => ({ id, sessionKey: "s-1", agentId: "ops-bot" })

const pauseOf = (result: unknown) => {
  if (!PauseSignal.isPauseSignal(result)) throw new Error(`expected a pause signal, got ${JSON.stringify(result)}`)
  return result
}

describe("GatedTool: the policy judges what the tool runs", () => {
  it.scoped("whitespace around a denied command does not get past the deny rule; the tool never runs", () => {
    const { bash, ran } = tools()
    return Effect.gen(function*() {
      for (const [i, command] of [" rm -rf /", "\trm -rf /", "rm -rf /\n", "  rm -rf /  "].entries()) {
        const denied = yield* Effect.flip(bash({ command }, context(`c${i}`)))
        expect(denied).toMatchObject({ _tag: "ToolDenied", outcome: "policy", rule: "no-rm-root" })
      }
      expect(ran).toEqual([])
    }).pipe(Effect.provide(GateLive))
  })

  it.scoped("case does not get past the deny rule of a Lowercase parameter: PRODUCTION is production", () => {
    const { deploy, ran } = tools()
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const denied = yield* Effect.flip(deploy({ env: "PRODUCTION" }, context("c1")))
      expect(denied).toMatchObject({ _tag: "ToolDenied", outcome: "policy", rule: "no-prod" })
      // nobody is asked to approve what the policy refuses
      expect(yield* gate.pending()).toEqual([])
      expect(ran).toEqual([])
    }).pipe(Effect.provide(GateLive))
  })

  it.scoped("the tool gets exactly the value that was judged: the decoded value, whose encoding the gate saw", () => {
    const { bash, deploy, ran } = tools()
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      expect(yield* bash({ command: "  ls -la \n" }, context("c1"))).toEqual({ command: "ls -la" })
      const signal = pauseOf(yield* deploy({ env: "Staging" }, context("c2")))
      const [requested] = (yield* store.events({ sessionKey: "s-1" })).filter((e) => e.type === "approval.requested")
      expect(requested!.args).toBe(`{"env":"staging"}`)
      yield* gate.respond(signal.requestId, { decision: "approve_once" })
      expect(yield* deploy({ env: "Staging" }, context("c2"))).toEqual({ env: "staging" })
      expect(ran).toEqual([
        { params: { command: "ls -la" }, judged: `{"command":"ls -la"}` },
        { params: { env: "staging" }, judged: `{"env":"staging"}` }
      ])
    }).pipe(Effect.provide(GateLive))
  })

  it.scoped("an approver's edit not in the tool's canonical form is refused: what runs is what the gate judged", () => {
    const { deploy, ran } = tools()
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const signal = pauseOf(yield* deploy({ env: "staging" }, context("c1")))
      // the edit passes the raw deny rule, but the tool would run it as "production"
      yield* gate.respond(signal.requestId, { decision: "approve_once", editedArgs: { env: "PRODUCTION" } })
      const refused = yield* Effect.flip(deploy({ env: "staging" }, context("c1")))
      expect(refused).toMatchObject({ _tag: "ToolDenied", outcome: "denied", requestId: signal.requestId })
      expect((refused as { reason: string }).reason).toContain("not in the tool's canonical form")
      expect(ran).toEqual([])
    }).pipe(Effect.provide(GateLive))
  })

  it.scoped("an approver's edit in canonical form runs as edited", () => {
    const { deploy, ran } = tools()
    return Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const signal = pauseOf(yield* deploy({ env: "staging" }, context("c1")))
      yield* gate.respond(signal.requestId, { decision: "approve_once", editedArgs: { env: "canary" } })
      expect(yield* deploy({ env: "staging" }, context("c1"))).toEqual({ env: "canary" })
      expect(ran).toEqual([{ params: { env: "canary" }, judged: `{"env":"canary"}` }])
    }).pipe(Effect.provide(GateLive))
  })

  // Every kind of white space Schema.Trim removes (String.prototype.trim), in any amount.
  const padding = fc.array(
    fc.constantFrom(" ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u1680", "\u2000", "\u2028", "\u3000", "\ufeff"),
    { maxLength: 4 }
  ).map((units) => units.join(""))
  const anyCase = (word: string) =>
    fc.array(fc.boolean(), { minLength: word.length, maxLength: word.length })
      .map((upper) => [...word].map((c, i) => upper[i] ? c.toUpperCase() : c).join(""))

  test("property: no padding or case of a denied value runs; whatever runs is exactly what was judged", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.tuple(padding, padding).map(([before, after]) => ({
              tool: "bash" as const,
              value: `${before}rm -rf /${after}`
            })),
            anyCase("production").map((env) => ({ tool: "deploy" as const, value: env })),
            fc.string({ maxLength: 12 }).map((value) => ({ tool: "bash" as const, value }))
          ),
          { minLength: 1, maxLength: 8 }
        ),
        async (calls) => {
          const { bash, deploy, ran } = tools()
          const results = await Effect.runPromise(
            Effect.forEach(calls, ({ tool, value }, i) =>
              Effect.either<unknown, unknown, ToolGate.ToolGate>(
                tool === "bash" ? bash({ command: value }, context(`c${i}`)) : deploy({ env: value }, context(`c${i}`))
              )).pipe(Effect.provide(ToolGate.layerMemory({ policy })))
          )
          // a production deploy in any case is the policy's refusal, never a question to a human
          for (const [i, call] of calls.entries()) {
            if (call.tool === "deploy") expect(results[i]).toMatchObject({ _tag: "Left", left: { rule: "no-prod" } })
          }
          for (const run of ran) {
            const params = run.params as { command?: string; env?: string }
            expect(params.command).not.toBe("rm -rf /")
            expect(params.env).not.toBe("production")
            expect(run.judged).toBe(ToolCall.canonicalArgs(params))
          }
        }
      ),
      { numRuns: 200 }
    )
  })
})
