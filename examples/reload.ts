// The README's policy reload (section Policy reload), kept runnable: `bun examples/reload.ts` in an
// empty folder. It writes policy.yaml there, then edits it as an operator would while the gate runs.
import { NodeFileSystem } from "@effect/platform-node"
import { Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Console, Effect, Layer, Schedule, Stream } from "effect"
import { writeFileSync } from "node:fs"

writeFileSync("policy.yaml", "deny: [deploy]\n")

const GateLive = Layer.unwrapEffect(Effect.gen(function*() {
  const policy = yield* Policy.load("policy.yaml") // the policy at start
  const reload = Policy.watch("policy.yaml").pipe(Stream.provideLayer(NodeFileSystem.layer)) // then each saved version
  return ToolGateSqlite.layer({ filename: ".toolgate/toolgate.db", policy, reload })
})).pipe(Layer.provide(NodeFileSystem.layer))

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const deploy = (id: string) => gate.evaluate({ id, name: "deploy", sessionKey: "s-1" })
  yield* Console.log((yield* deploy("call-1"))._tag) // Deny

  const before = gate.policy.version
  writeFileSync("policy.yaml", "allow: [deploy]\n") // an operator saves a new version
  yield* Effect.repeat(Effect.sync(() => gate.policy.version), {
    until: (version) => version !== before,
    schedule: Schedule.spaced("10 millis")
  })
  yield* Console.log((yield* deploy("call-2"))._tag) // Allow

  // the switch is in the audit log, before the decisions of the new version
  const switches = yield* gate.auditLog().pipe(
    Stream.filter((event) => event.type === "policy.loaded"),
    Stream.take(1),
    Stream.runCollect
  )
  for (const event of switches) {
    yield* Console.log(
      `${event.type} ${event.policyVersion?.slice(0, 12)} (was ${event.previousVersion?.slice(0, 12)})`
    )
  }
})

Effect.runPromise(program.pipe(Effect.provide(GateLive)))
