/**
 * Trying a policy before enforcing it, as a library: `Policy.explain` (the rule that decides and
 * the ones it beats), `Policy.test` over a table of cases, `Policy.recordedCalls` (JSON Lines of
 * calls or audit events, the gate's own) and `Policy.diff`.
 */
import * as AuditEvent from "@tool-gate/core/AuditEvent"
import * as Policy from "@tool-gate/core/Policy"
import * as ToolGate from "@tool-gate/core/ToolGate"
import { describe, expect, it } from "bun:test"
import { Effect, Either, Schema, Stream } from "effect"

const policy = Policy.unsafeMake({
  default: "requireApproval",
  deny: [{ id: "no-rm", tool: "bash", args: { command: { shell: "rm *" } }, reason: "never delete" }],
  requireApproval: [{ id: "shell", tool: "bash" }],
  allow: ["read_*", { id: "reads", tool: "read_file" }]
})

describe("Policy.explain", () => {
  it("names the deciding rule, its matcher, and the rules it beats", () => {
    const explained = Policy.explain(policy, { name: "bash", args: { command: "ls && rm -rf /" } })
    expect(explained).toMatchObject({
      outcome: "deny",
      decision: { _tag: "Deny", reason: "never delete" },
      rule: { id: "no-rm", path: "deny[0]", matcher: { tool: "bash", args: { command: { shell: "rm *" } } } },
      alsoMatching: [{ id: "shell", path: "requireApproval[0]" }]
    })
    expect(Policy.explain(policy, { name: "read_file", args: {} }).alsoMatching).toEqual([
      { id: "reads", path: "allow[1]" }
    ])
    const fallback = Policy.explain(policy, { name: "deploy", args: {} })
    expect(fallback.rule).toBeUndefined()
    expect(fallback.outcome).toBe("requireApproval")
  })
})

describe("Policy.test", () => {
  it("passes matching cases, and explains each mismatch (outcome or rule)", () => {
    const results = Policy.test(policy, [
      { name: "rm", call: { name: "bash", args: { command: "rm x" } }, expect: "deny", rule: "no-rm" },
      { call: { name: "read_file", args: { path: "a" } }, expect: "deny" },
      { call: { name: "deploy", args: {} }, expect: "requireApproval", rule: "shell" },
      { call: { name: "deploy", args: {} }, expect: "requireApproval", rule: "default" }
    ])
    expect(results.map((r) => r.failure ?? "ok")).toEqual([
      "ok",
      "expected deny, got allow by rule allow[0]",
      "expected requireApproval by rule shell, got requireApproval by rule default",
      "ok"
    ])
    expect(results[1]!.name).toBe("cases[1]: read_file {\"path\":\"a\"}")
  })

  it("reads a table from YAML or JSON, and names every problem of a bad one", () => {
    const yaml = "- call: { name: bash, args: { command: ls } }\n  expect: requireApproval\n"
    expect(Policy.testCasesFromText(yaml, "yaml")).toEqual(
      Either.right([{ call: { name: "bash", args: { command: "ls" } }, expect: "requireApproval" }])
    )
    const wrapped = JSON.stringify({ cases: [{ call: { name: "x" }, expect: "allow" }] })
    expect(Either.map(Policy.testCasesFromText(wrapped, "json"), (cases) => cases[0]!.call.args)).toEqual(
      Either.right({})
    )
    const bad = Policy.testCasesFromText(
      "cases:\n  - call: { name: x }\n    expect: maybe\n  - call: { nam: x }\n    expect: allow\n    extra: 1\n",
      "yaml"
    )
    expect(Either.isLeft(bad)).toBe(true)
    const problems = Either.getLeft(bad).pipe((o) => (o._tag === "Some" ? o.value : []))
    expect(problems.some((p) => p.startsWith("cases.0.expect: "))).toBe(true)
    expect(problems).toContain("cases.1.extra: unknown key")
    expect(problems).toContain("cases.1.call.nam: unknown key")
    expect(Policy.testCasesFromText("[oops", "yaml")._tag).toBe("Left")
  })
})

describe("Policy.recordedCalls and Policy.diff", () => {
  it("reads the gate's own audit events (args as JSON text), once per call, skipping events about no call", async () => {
    const events = await Effect.runPromise(
      Effect.gen(function*() {
        const gate = yield* ToolGate.ToolGate
        yield* Effect.either(gate.authorize({ id: "c1", sessionKey: "s", name: "bash", args: { command: "rm -rf /" } }))
        yield* gate.authorize({ id: "c2", sessionKey: "s", name: "bash", args: { command: "ls" }, agentId: "a-1" })
        const [pending] = yield* gate.pending({})
        yield* gate.respond(pending!.requestId, { decision: "approve_once", respondedBy: "ana" })
        yield* gate.authorize({ id: "c3", sessionKey: "s", name: "read_file", args: { path: "x" } })
        return yield* gate.auditLog({}).pipe(Stream.takeUntil((event) => event.toolCallId === "c3"), Stream.runCollect)
      }).pipe(Effect.provide(ToolGate.layerMemory({ policy })), Effect.scoped)
    )
    const text = [...events].map((event) => JSON.stringify(Schema.encodeSync(AuditEvent.AuditEvent)(event))).join("\n")
    const recorded = Either.getOrThrow(Policy.recordedCalls(`${text}\n{"type":"approvals.cleared","seq":99}\n`))
    expect(recorded.calls.map(({ call }) => `${call.name} ${JSON.stringify(call.args)}`)).toEqual([
      "bash {\"command\":\"rm -rf /\"}",
      "bash {\"command\":\"ls\"}",
      "read_file {\"path\":\"x\"}"
    ])
    expect(recorded.duplicates).toBeGreaterThanOrEqual(1)
    expect(recorded.skipped).toBeGreaterThanOrEqual(1)

    const candidate = Policy.unsafeMake({
      ...policy.input,
      allow: [...policy.input.allow ?? [], "bash"],
      requireApproval: []
    })
    expect(Policy.diff(policy, candidate, recorded.calls).map((d) => [d.call.name, d.before, d.after])).toEqual([
      ["bash", { outcome: "requireApproval", rule: "shell" }, { outcome: "allow", rule: "allow[2]" }]
    ])
    expect(Policy.diff(policy, policy, recorded.calls)).toEqual([])
  })

  it("reads plain calls and args as objects; refuses a bad line by its number", () => {
    const text =
      "{\"name\":\"bash\",\"args\":{\"command\":\"ls\"}}\n\n{\"toolName\":\"bash\",\"args\":{\"command\":\"pwd\"}}\n"
    expect(Either.map(Policy.recordedCalls(text), (r) => r.calls.map((c) => c.line))).toEqual(Either.right([1, 3]))
    const problem = (text: string) => Either.match(Policy.recordedCalls(text), { onLeft: String, onRight: () => "" })
    expect(problem("{}\nnot json\n")).toStartWith("line 2: not JSON")
    expect(problem("{\"name\":\"\"}")).toStartWith("line 1: name: ")
    expect(Policy.recordedCalls("{\"toolName\":\"x\",\"args\":\"{oops\"}")).toEqual(
      Either.left("line 1: the event's args are not JSON")
    )
  })
})
