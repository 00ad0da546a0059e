import { Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { describe, expect, test } from "bun:test"
import { Effect, FastCheck as fc } from "effect"

const names = ["bash", "Bash", "deploy", "task-run", "task-list", "mcp__github__push", "read_file", "rm"]
const patterns = ["bash", "BASH", "deploy", "task-*", "*", "mcp__github__*", "read_?ile", "r*", "*list"]

/** An oracle written apart from the evaluator: a glob as an anchored, case-insensitive RegExp. */
const globMatches = (pattern: string, name: string) =>
  new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`, "i")
    .test(name)

const policyArb = fc.record({
  default: fc.constantFrom("allow" as const, "deny" as const, "requireApproval" as const),
  deny: fc.array(fc.constantFrom(...patterns), { maxLength: 3 }),
  requireApproval: fc.array(fc.constantFrom(...patterns), { maxLength: 4 }),
  allow: fc.array(fc.constantFrom(...patterns), { maxLength: 4 })
})

const callsArb = fc.array(
  fc.record({ name: fc.constantFrom(...names), arg: fc.constantFrom("a", "b") }),
  { minLength: 1, maxLength: 12 }
)

const runWithGate = <A, E>(policy: Policy.Policy, body: (gate: ToolGate.Service) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.flatMap(ToolGate.ToolGate, body).pipe(Effect.provide(ToolGate.layerMemory({ policy })))
  )

describe("ToolGate properties", () => {
  test("decisions follow deny > requireApproval > allow > default; a matching deny always wins over session approvals", async () => {
    await fc.assert(
      fc.asyncProperty(
        policyArb,
        callsArb,
        fc.array(fc.constantFrom(...names), { maxLength: 4 }),
        async (input, calls, granted) => {
          const policy = Policy.unsafeMake(input)
          await runWithGate(policy, (gate) =>
            Effect.gen(function*() {
              for (const name of granted) yield* gate.recordApproval(name, ToolCall.SessionKey.make("s1"), true)
              for (const [i, c] of calls.entries()) {
                const decision = yield* gate.evaluate({
                  id: `c${i}`,
                  name: c.name,
                  sessionKey: "s1",
                  args: { v: c.arg }
                })
                expect(decision._tag).toBe(oracle(input, c.name, granted))
              }
            }))
        }
      ),
      { numRuns: 150 }
    )
  })

  test("no session approval of session A ever allows a call in session B", async () => {
    await fc.assert(
      fc.asyncProperty(policyArb, callsArb, callsArb, async (input, approveInA, callsInB) => {
        const policy = Policy.unsafeMake(input)
        await runWithGate(policy, (gate) =>
          Effect.gen(function*() {
            // Grant in A every way there is: tool-wide, exact and tool scope through answers.
            for (const [i, c] of approveInA.entries()) {
              yield* gate.recordApproval(c.name, ToolCall.SessionKey.make("A"), true)
              const result = yield* Effect.either(
                gate.authorize({ id: `a${i}`, name: c.name, sessionKey: "A", args: { v: c.arg } })
              )
              if (result._tag === "Right" && "__pause" in result.right) {
                yield* gate.respond(result.right.requestId, {
                  decision: "approve_session",
                  scope: i % 2 === 0 ? "exact" : "tool"
                })
              }
            }
            for (const [i, c] of callsInB.entries()) {
              const call = { id: `b${i}`, name: c.name, sessionKey: "B", args: { v: c.arg } }
              const decision = yield* gate.evaluate(call)
              expect(decision).toEqual(policy.evaluate(call))
              if (decision._tag === "Allow") expect(decision.via).not.toBe("sessionApproval")
            }
          }))
      }),
      { numRuns: 100 }
    )
  })
})

type Input = {
  default: "allow" | "deny" | "requireApproval"
  deny: Array<string>
  requireApproval: Array<string>
  allow: Array<string>
}

const oracle = (input: Input, name: string, granted: Array<string>): "Allow" | "Deny" | "RequireApproval" => {
  const hit = (list: Array<string>) => list.some((p) => globMatches(p, name))
  const approval = granted.some((g) => g.toLowerCase() === name.toLowerCase()) ? "Allow" : "RequireApproval"
  if (hit(input.deny)) return "Deny"
  if (hit(input.requireApproval)) return approval
  if (hit(input.allow)) return "Allow"
  return input.default === "deny" ? "Deny" : input.default === "allow" ? "Allow" : approval
}
