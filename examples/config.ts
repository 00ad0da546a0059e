// The README's configured gate (section Configuration), kept runnable:
// `TOOLGATE_POLICY=examples/policy.yaml TOOLGATE_TTL="90 seconds" bun examples/config.ts`
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Config, Console, Effect, Layer } from "effect"

// TOOLGATE_DB (default .toolgate/toolgate.db), TOOLGATE_POLICY (required), TOOLGATE_POLICY_WATCH,
// TOOLGATE_TTL, TOOLGATE_WARN_BEFORE, TOOLGATE_SWEEP_INTERVAL, TOOLGATE_TABLE_PREFIX
const GateLive = ToolGateSqlite.layerConfig().pipe(Layer.provide(NodeContext.layer))

// or the application's own keys, one Config per field
export const Custom = ToolGateSqlite.layerConfig({
  filename: Config.string("APP_GATE_DB"),
  policy: Config.string("APP_POLICY_FILE"),
  ttl: Config.duration("APP_APPROVAL_TTL")
})

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  const decision = yield* gate.evaluate({
    id: "call-1",
    name: "read_file",
    args: { path: "prod.env" },
    sessionKey: "s-1"
  })
  yield* Console.log(`${decision._tag} by ${decision.rule?.id}; approvals wait ${gate.policy.ttlMs / 1000} s`)
})

NodeRuntime.runMain(program.pipe(Effect.provide(GateLive))) // Deny by no-env-files; approvals wait 90 s
