import { GatedTool, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Effect, Layer, Schema } from "effect"
import { join } from "node:path"
import { describe, it } from "../../support/effectTest.js"
import { tempDir } from "../../support/sqlStores.js"

const policy = Policy.unsafeMake({
  ttlMs: 45_000,
  deny: [{ id: "no-prod-restarts", tool: "restart", args: { env: "prod" }, reason: "Restart prod from the runbook." }],
  requireApproval: [{ id: "deploys", tool: "deploy" }, { id: "restarts", tool: "restart", ttlMs: 5_000 }],
  allow: ["status"]
})

const GateLive = Layer.unwrapScoped(
  Effect.map(tempDir, (dir) => ToolGateSqlite.layer({ filename: join(dir, "gate.db"), policy, clock: "caller" }))
)

const Env = Schema.Struct({ env: Schema.String })

const runs: Array<string> = []
const deploy = GatedTool.make("deploy", Env, ({ env }, allowed) =>
  Effect.sync(() => {
    runs.push(env)
    return `deployed to ${env} (${allowed.request ? "approved" : "allowed"})`
  }))
const restart = GatedTool.make("restart", Env, ({ env }) => Effect.succeed(`restarted ${env}`))
const status = GatedTool.make("status", (args) => Effect.succeed(`status of ${JSON.stringify(args)}`))

const context = (id: string) => ({ id, sessionKey: "s-1", agentId: "release-bot", intentId: "ship-1.2.0" })

const pauseOf = (result: unknown) => {
  if (!PauseSignal.isPauseSignal(result)) throw new Error(`expected a pause signal, got ${JSON.stringify(result)}`)
  return result
}

describe("GatedTool: any Effect tool function behind the gate", () => {
  it.scoped("a requireApproval tool gives a pause signal with tool, intent and agent in its metadata and the policy's TTL", () =>
    Effect.gen(function*() {
      const signal = pauseOf(yield* deploy({ env: "prod" }, context("c1")))
      expect(signal).toMatchObject({
        __pause: true,
        ttlMs: 45_000,
        metadata: {
          toolId: "deploy",
          toolCallId: "c1",
          intentId: "ship-1.2.0",
          agentId: "release-bot",
          sessionKey: "s-1",
          rule: "deploys",
          approvalRequest: true
        }
      })
      // A rule's own TTL beats the policy's.
      expect(pauseOf(yield* restart({ env: "staging" }, context("c2"))).ttlMs).toBe(5_000)
      const gate = yield* ToolGate.ToolGate
      expect((yield* gate.pending()).map((r) => r.requestId)).toEqual([signal.requestId, expect.any(String)])
    }).pipe(Effect.provide(GateLive)))

  it.scoped("allowed calls run; denied calls fail with the policy's reason and never run", () =>
    Effect.gen(function*() {
      expect(yield* status({ service: "api" }, context("c1"))).toBe(`status of {"service":"api"}`)
      const denied = yield* Effect.flip(restart({ env: "prod" }, context("c2")))
      expect(denied).toMatchObject({ _tag: "ToolDenied", outcome: "policy", reason: "Restart prod from the runbook." })
    }).pipe(Effect.provide(GateLive)))

  it.scoped("arguments that do not fit the schema fail before anyone is asked", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const invalid = yield* Effect.flip(deploy({ env: 42 } as never, context("c1")))
      expect(invalid).toMatchObject({ _tag: "InvalidToolCall", problems: [{ path: "args.env" }] })
      expect(yield* gate.pending()).toEqual([])
    }).pipe(Effect.provide(GateLive)))

  it.scoped("after the answer, the same call id runs once with the approver's edit; again, it is refused", () =>
    Effect.gen(function*() {
      runs.length = 0
      const gate = yield* ToolGate.ToolGate
      const signal = pauseOf(yield* deploy({ env: "prod" }, context("c1")))
      // Still unanswered: asking again returns the same pause, no second request.
      expect(pauseOf(yield* deploy({ env: "prod" }, context("c1"))).requestId).toBe(signal.requestId)
      yield* gate.respond(signal.requestId, { decision: "approve_once", editedArgs: { env: "canary" } })
      expect(yield* deploy({ env: "prod" }, context("c1"))).toBe("deployed to canary (approved)")
      const twice = yield* Effect.flip(deploy({ env: "prod" }, context("c1")))
      expect(twice._tag).toBe("CallAlreadyExecuted")
      expect(runs).toEqual(["canary"])
    }).pipe(Effect.provide(GateLive)))

  it.scoped("an edit that does not fit the schema fails closed: InvalidToolCall, the tool does not run", () =>
    Effect.gen(function*() {
      runs.length = 0
      const gate = yield* ToolGate.ToolGate
      const signal = pauseOf(yield* deploy({ env: "prod" }, context("c1")))
      yield* gate.respond(signal.requestId, { decision: "approve_once", editedArgs: { env: ["a", "b"] } })
      const invalid = yield* Effect.flip(deploy({ env: "prod" }, context("c1")))
      expect(invalid).toMatchObject({ _tag: "InvalidToolCall", problems: [{ path: "args.env" }] })
      expect(runs).toEqual([])
    }).pipe(Effect.provide(GateLive)))

  it.scoped("a human's denial fails with the human's reason", () =>
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const signal = pauseOf(yield* deploy({ env: "prod" }, context("c1")))
      yield* gate.respond(signal.requestId, { decision: "deny", reason: "Not on a Friday." })
      const denied = yield* Effect.flip(deploy({ env: "prod" }, context("c1")))
      expect(denied).toMatchObject({ _tag: "ToolDenied", outcome: "denied", reason: "Not on a Friday." })
    }).pipe(Effect.provide(GateLive)))
})
