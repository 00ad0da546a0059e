import { NodeFileSystem } from "@effect/platform-node"
import { ApprovalStore, PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Config, ConfigError, ConfigProvider, Context, Effect, Layer, Redacted, Schedule } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgSchema, tempDir } from "../../../support/sqlStores.js"

// The layerConfig variants read Effect Config: each test gives a ConfigProvider.fromMap, as an
// application's environment would, and checks what the gate then does, or the ConfigError.

const policyYaml = `requireApproval: [deploy]
deny:
  - { id: no-drops, tool: drop_database, reason: backups first }
`

const withConfig = (entries: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(entries))))

/** A policy file in a fresh directory; the directory's path. */
const withPolicyFile = Effect.map(tempDir, (dir) => {
  writeFileSync(join(dir, "policy.yaml"), policyYaml)
  return dir
})

const deploy = { id: "c1", name: "deploy", args: { env: "prod" }, sessionKey: "s1" }

/** The gate of `layer`, built in the test's scope. */
const gateOf = <ROut extends ToolGate.ToolGate, E>(layer: Layer.Layer<ROut, E>) =>
  Effect.map(
    Layer.build(layer),
    (context) => Context.get(context as Context.Context<ToolGate.ToolGate>, ToolGate.ToolGate)
  )

/** The ConfigError a layer fails with when built, or a test failure if it builds. */
const configErrorOf = <A, E>(layer: Layer.Layer<A, E>) =>
  Effect.flatMap(Effect.flip(Effect.scoped(Layer.build(layer))), (error) =>
    ConfigError.isConfigError(error)
      ? Effect.succeed(error)
      : Effect.dieMessage(`expected a ConfigError, got ${String(error)}`))

describe("ToolGateSqlite.layerConfig", () => {
  it.live("reads the file, the policy and the TTL from the default keys", () =>
    Effect.gen(function*() {
      const dir = yield* withPolicyFile
      const db = join(dir, "gate.db")
      const gate = yield* gateOf(
        ToolGateSqlite.layerConfig().pipe(
          Layer.provide(withConfig({
            TOOLGATE_DB: db,
            TOOLGATE_POLICY: join(dir, "policy.yaml"),
            TOOLGATE_TTL: "90 seconds",
            TOOLGATE_WARN_BEFORE: "10 seconds"
          })),
          Layer.provide(NodeFileSystem.layer)
        )
      )
      const paused = yield* gate.authorize(deploy)
      expect(PauseSignal.isPauseSignal(paused) && paused.ttlMs).toBe(90_000)
      const denied = yield* gate.evaluate({ id: "c2", name: "drop_database", sessionKey: "s1" })
      expect(denied._tag === "Deny" && denied.rule.id).toBe("no-drops")
      expect(gate.policy.ttlMs).toBe(90_000)
      expect(existsSync(db)).toBe(true)
    }))

  it.live("takes keys of the application's own, one Config per field", () =>
    Effect.gen(function*() {
      const dir = yield* withPolicyFile
      const gate = yield* gateOf(
        ToolGateSqlite.layerConfig({
          filename: Config.string("APP_DB"),
          policy: Config.string("APP_POLICY"),
          tablePrefix: Config.string("APP_PREFIX")
        }).pipe(
          Layer.provide(
            withConfig({ APP_DB: join(dir, "app.db"), APP_POLICY: join(dir, "policy.yaml"), APP_PREFIX: "app_" })
          ),
          Layer.provide(NodeFileSystem.layer)
        )
      )
      const paused = yield* gate.authorize(deploy)
      // the file's own ttlMs (the default, 5 minutes): no TTL was configured
      expect(PauseSignal.isPauseSignal(paused) && paused.ttlMs).toBe(300_000)
    }))

  it.live("a missing policy key is a ConfigError naming it, and no database is created", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = join(dir, "gate.db")
      const error = yield* configErrorOf(
        ToolGateSqlite.layerConfig().pipe(
          Layer.provide(withConfig({ TOOLGATE_DB: db })),
          Layer.provide(NodeFileSystem.layer)
        )
      )
      expect(error._op).toBe("MissingData")
      expect(String(error)).toContain("TOOLGATE_POLICY")
      expect(existsSync(db)).toBe(false)
    }))

  for (
    const [value, why] of [
      ["soon", "Expected a duration"],
      ["0 millis", "from 1 ms to one year"],
      ["400 days", "from 1 ms to one year"],
      ["Infinity millis", "Expected a duration"]
    ] as const
  ) {
    it.live(`TOOLGATE_TTL=${value} is a ConfigError naming the key`, () =>
      Effect.gen(function*() {
        const dir = yield* withPolicyFile
        const db = join(dir, "gate.db")
        const error = yield* configErrorOf(
          ToolGateSqlite.layerConfig().pipe(
            Layer.provide(
              withConfig({ TOOLGATE_DB: db, TOOLGATE_POLICY: join(dir, "policy.yaml"), TOOLGATE_TTL: value })
            ),
            Layer.provide(NodeFileSystem.layer)
          )
        )
        expect(error._op).toBe("InvalidData")
        expect(error._op === "InvalidData" && error.path).toEqual(["TOOLGATE_TTL"])
        expect(String(error)).toContain(why)
        expect(existsSync(db)).toBe(false)
      }))
  }

  it.live("a duration of the application's own config out of range names its field", () =>
    Effect.gen(function*() {
      const dir = yield* withPolicyFile
      const error = yield* configErrorOf(
        ToolGateSqlite.layerConfig({
          filename: Config.succeed(join(dir, "gate.db")),
          policy: Config.succeed(join(dir, "policy.yaml")),
          ttl: Config.duration("APPROVAL_TTL")
        }).pipe(Layer.provide(withConfig({ APPROVAL_TTL: "400 days" })), Layer.provide(NodeFileSystem.layer))
      )
      expect(error._op === "InvalidData" && error.path).toEqual(["ttl"])
      expect(String(error)).toContain("from 1 ms to one year")
    }))

  it.live("an invalid TOOLGATE_POLICY_WATCH is a ConfigError naming the key", () =>
    Effect.gen(function*() {
      const dir = yield* withPolicyFile
      const error = yield* configErrorOf(
        ToolGateSqlite.layerConfig().pipe(
          Layer.provide(withConfig({
            TOOLGATE_DB: join(dir, "gate.db"),
            TOOLGATE_POLICY: join(dir, "policy.yaml"),
            TOOLGATE_POLICY_WATCH: "sometimes"
          })),
          Layer.provide(NodeFileSystem.layer)
        )
      )
      expect(error._op === "InvalidData" && error.path).toEqual(["TOOLGATE_POLICY_WATCH"])
    }))

  it.live("an invalid policy file fails with PolicyInvalid naming the problem", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      writeFileSync(join(dir, "policy.yaml"), "deny: [{ tool: deploy, resaon: typo }]\n")
      const error = yield* Effect.flip(Effect.scoped(Layer.build(
        ToolGateSqlite.layerConfig().pipe(
          Layer.provide(withConfig({ TOOLGATE_DB: join(dir, "gate.db"), TOOLGATE_POLICY: join(dir, "policy.yaml") })),
          Layer.provide(NodeFileSystem.layer)
        )
      )))
      expect(error._tag).toBe("PolicyInvalid")
      expect(error._tag === "PolicyInvalid" ? error.problems.map((problem) => problem.path) : []).toContain(
        "deny[0].resaon"
      )
    }))

  it.live(
    "TOOLGATE_POLICY_WATCH=true follows the file, the configured TTL applied to each version",
    () =>
      Effect.gen(function*() {
        const dir = yield* withPolicyFile
        const path = join(dir, "policy.yaml")
        yield* Effect.gen(function*() {
          const gate = yield* ToolGate.ToolGate
          const first = gate.policy.version
          writeFileSync(path, "deny: [deploy]\n")
          yield* Effect.repeat(Effect.sync(() => gate.policy.version), {
            until: (version) => version !== first,
            schedule: Schedule.spaced("5 millis")
          })
          const [loaded] = yield* Effect.flatMap(
            ApprovalStore.ApprovalStore,
            (store) => store.events({ outcome: "loaded" })
          )
          expect(loaded?.previousVersion).toBe(first)
          expect(gate.policy.ttlMs).toBe(45_000)
          const denied = yield* gate.evaluate(deploy)
          expect([denied._tag, denied.policyVersion]).toEqual<unknown>(["Deny", loaded?.policyVersion])
        }).pipe(
          Effect.provide(
            ToolGateSqlite.layerConfig().pipe(
              Layer.provide(withConfig({
                TOOLGATE_DB: join(dir, "gate.db"),
                TOOLGATE_POLICY: path,
                TOOLGATE_POLICY_WATCH: "true",
                TOOLGATE_TTL: "45 seconds"
              })),
              Layer.provide(NodeFileSystem.layer)
            )
          ),
          Effect.scoped
        )
      }),
    30_000
  )
})

describe("ToolGate.layerConfig", () => {
  it.live("configures a gate over any store", () =>
    Effect.gen(function*() {
      const dir = yield* withPolicyFile
      const gate = yield* gateOf(
        ToolGate.layerConfig().pipe(
          Layer.provide(ApprovalStore.layerMemory),
          Layer.provide(withConfig({ TOOLGATE_POLICY: join(dir, "policy.yaml"), TOOLGATE_TTL: "2 minutes" })),
          Layer.provide(NodeFileSystem.layer)
        )
      )
      const expected = yield* Effect.map(Policy.fromYaml(`${policyYaml}ttlMs: 120000\n`), (policy) => policy.version)
      expect(gate.policy.version).toBe(expected)
    }))
})

describePostgres("ToolGatePg.layerConfig", (url) => {
  describe("ToolGatePg.layerConfig", () => {
    it.live("reads the URL as a Redacted and the policy from the default keys", () =>
      Effect.gen(function*() {
        const dir = yield* withPolicyFile
        const schemaUrl = yield* pgSchema(url)
        const gate = yield* gateOf(
          ToolGatePg.layerConfig().pipe(
            Layer.provide(withConfig({
              TOOLGATE_DATABASE_URL: schemaUrl,
              TOOLGATE_POLICY: join(dir, "policy.yaml"),
              TOOLGATE_TTL: "1 minute"
            })),
            Layer.provide(NodeFileSystem.layer)
          )
        )
        const paused = yield* gate.authorize(deploy)
        expect(PauseSignal.isPauseSignal(paused) && paused.ttlMs).toBe(60_000)
        expect((yield* gate.pending()).map((request) => request.toolCall.name)).toEqual(["deploy"])
      }))

    it.live("the URL is never shown: a config holding it prints <redacted>", () =>
      Effect.gen(function*() {
        const secret = "postgres://gate:s3cret@127.0.0.1:1/none"
        const input = yield* ToolGatePg.config.pipe(
          Effect.withConfigProvider(
            ConfigProvider.fromMap(new Map([["TOOLGATE_DATABASE_URL", secret], ["TOOLGATE_POLICY", "p.yaml"]]))
          )
        )
        expect(Redacted.value(input.url)).toBe(secret)
        expect(String(input.url)).not.toContain("s3cret")
        expect(JSON.stringify(input)).not.toContain("s3cret")
      }))

    it.live("a missing URL is a ConfigError naming TOOLGATE_DATABASE_URL", () =>
      Effect.gen(function*() {
        const dir = yield* withPolicyFile
        const error = yield* configErrorOf(
          ToolGatePg.layerConfig().pipe(
            Layer.provide(withConfig({ TOOLGATE_POLICY: join(dir, "policy.yaml") })),
            Layer.provide(NodeFileSystem.layer)
          )
        )
        expect(error._op).toBe("MissingData")
        expect(String(error)).toContain("TOOLGATE_DATABASE_URL")
      }))
  })
})

describe("ToolGatePg.config: prepared statements", () => {
  const read = (entries: ReadonlyArray<readonly [string, string]>) =>
    ToolGatePg.config.pipe(
      Effect.withConfigProvider(
        ConfigProvider.fromMap(
          new Map([
            ["TOOLGATE_DATABASE_URL", "postgres://gate@127.0.0.1:1/none"],
            ["TOOLGATE_POLICY", "p.yaml"],
            ...entries
          ])
        )
      )
    )

  it.live("on unless TOOLGATE_PG_PREPARED_STATEMENTS says false; another value is a ConfigError naming it", () =>
    Effect.gen(function*() {
      expect((yield* read([])).preparedStatements).toBe(true)
      expect((yield* read([["TOOLGATE_PG_PREPARED_STATEMENTS", "false"]])).preparedStatements).toBe(false)
      const error = yield* Effect.flip(read([["TOOLGATE_PG_PREPARED_STATEMENTS", "sometimes"]]))
      expect(String(error)).toContain("TOOLGATE_PG_PREPARED_STATEMENTS")
    }))
})
