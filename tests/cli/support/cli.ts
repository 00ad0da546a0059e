/**
 * The `toolgate` command as users run it: real Node processes of the repository's launcher
 * (`packages/cli/bin/toolgate.mjs`, which builds the published bundle, `dist/toolgate.mjs`, when a
 * source is newer and runs it), against a SQLite file
 * in a temp dir or a `toolgate serve` process. Pending requests come from a gate in the test
 * process (Bun's driver) on the same file, as an agent process would create them.
 */
import { NodeContext } from "@effect/platform-node"
import { Cli } from "@tool-gate/cli"
import { type ApprovalRequest, PauseSignal, Policy, type ToolCall, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import type { Console } from "effect"
import { Effect, ManagedRuntime } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Ended, runToEnd } from "../../support/processes.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))
export const bin = join(root, "packages/cli/bin/toolgate.mjs")

/** The environment without the user's own TOOLGATE_* settings, plus `extra`. */
const environment = (extra: Record<string, string>) => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("TOOLGATE_")) env[key] = value
  }
  return { ...env, ...extra }
}

// The bin builds its bundle when a source is newer: do that once here, so no test's line or exit
// timeouts include a build.
const warmUp = Bun.spawnSync(["node", bin, "--help"], { cwd: root, env: environment({}) })
if (warmUp.exitCode !== 0) throw new Error(`toolgate --help exited ${warmUp.exitCode}: ${warmUp.stderr.toString()}`)

export type Result = Ended

/** Runs `toolgate ARGS` to its end. */
export const toolgate = async (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Result> => {
  return runToEnd(["node", bin, ...args], { cwd: root, env: environment(env) })
}

/**
 * Runs the same command line in this process (the `Command` value, output read through the
 * `Console` service, the bin's exit code): for tables of cases where a process each adds only time.
 */
export const toolgateHere = async (args: ReadonlyArray<string>): Promise<Result> => {
  let stdout = ""
  let stderr = ""
  const console = Effect.runSync(Effect.console)
  const captured: Console.Console = {
    ...console,
    log: (...values) => Effect.sync(() => void (stdout += `${values.join(" ")}\n`)),
    error: (...values) => Effect.sync(() => void (stderr += `${values.join(" ")}\n`))
  }
  const exit = await Effect.runPromiseExit(
    Cli.run(["node", "toolgate", ...args]).pipe(Effect.provide(NodeContext.layer), Effect.withConsole(captured))
  )
  return { code: Cli.exitCode(exit), stdout, stderr }
}

/** `toolgate ARGS --json`'s parsed output, failing loudly when the command failed. */
export const toolgateJson = async (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<any> => {
  const result = await toolgate([...args, "--json"], env)
  if (result.code !== 0) throw new Error(`toolgate ${args.join(" ")} exited ${result.code}: ${result.stderr}`)
  return JSON.parse(result.stdout)
}

/** A long-running `toolgate` (serve, audit --follow): its stdout lines as they come. */
export interface Running {
  readonly lines: Array<string>
  /** resolves with the first line (seen or to come) that matches */
  readonly line: (pattern: RegExp, timeoutMs?: number) => Promise<string>
  readonly stop: () => Promise<number>
  readonly stderr: () => string
}

export const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Running => {
  const child = Bun.spawn(["node", bin, ...args], { cwd: root, env: environment(env), stdout: "pipe", stderr: "pipe" })
  const lines: Array<string> = []
  const waiting = new Set<() => void>()
  let err = ""
  let ended = false
  void (async () => {
    let buffer = ""
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buffer += chunk
      const parts = buffer.split("\n")
      buffer = parts.pop()!
      lines.push(...parts)
      waiting.forEach((wake) => wake())
    }
    ended = true
    waiting.forEach((wake) => wake())
  })()
  void (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) err += chunk
  })()
  const line = (pattern: RegExp, timeoutMs = 20_000) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => done(new Error(`no line matching ${pattern} from toolgate ${args.join(" ")}: ${err}`)),
        timeoutMs
      )
      const check = () => {
        const found = lines.find((text) => pattern.test(text))
        if (found !== undefined) done(found)
        else if (ended) done(new Error(`toolgate ${args.join(" ")} ended with no line matching ${pattern}: ${err}`))
      }
      const done = (outcome: string | Error) => {
        clearTimeout(timer)
        waiting.delete(check)
        outcome instanceof Error ? reject(outcome) : resolve(outcome)
      }
      waiting.add(check)
      check()
    })
  const stop = () => {
    child.kill("SIGTERM")
    return child.exited
  }
  return { lines, line, stop, stderr: () => err }
}

/** `bash` waits for a human (5 minutes), `quick` for 50 ms, `rm` is denied. */
export const policyYaml = `
deny:
  - id: no-rm
    tool: bash
    args:
      command: "rm *"
    reason: never delete
requireApproval:
  - bash
  - tool: quick
    ttlMs: 50
`

export interface Fixture {
  readonly dir: string
  readonly db: string
  readonly policyFile: string
  /** asks for the call as an agent would and returns the id of the request it paused on */
  readonly pause: (
    call: Omit<ToolCall.ToolCallInput, "args"> & { readonly args?: Record<string, unknown> }
  ) => Promise<ApprovalRequest.RequestId>
  readonly gate: ToolGate.Service
  readonly close: () => Promise<void>
}

/** A temp dir with a SQLite file, a policy file (`policyYaml` unless given), and a gate on the file in this process. */
export const fixture = async (yaml = policyYaml): Promise<Fixture> => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-cli-"))
  const db = join(dir, "toolgate.db")
  const policyFile = join(dir, "policy.yaml")
  writeFileSync(policyFile, yaml)
  const policy = await Effect.runPromise(Policy.fromYaml(yaml))
  const runtime = ManagedRuntime.make(ToolGateSqlite.layer({ filename: db, policy }))
  const gate = await runtime.runPromise(ToolGate.ToolGate)
  const pause: Fixture["pause"] = (call) =>
    runtime.runPromise(
      Effect.flatMap(gate.authorize(call), (result) =>
        PauseSignal.isPauseSignal(result)
          ? Effect.succeed(result.requestId)
          : Effect.die(`expected a pause for ${call.id}`))
    )
  return {
    dir,
    db,
    policyFile,
    pause,
    gate,
    close: async () => {
      await runtime.dispose()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/**
 * `toolgate serve` on the fixture's database and policy, on a free loopback port, with `tokens`
 * (written to a file in the fixture's folder); resolves once it serves, with its URL.
 */
export const serve = async (
  f: Fixture,
  tokens: ReadonlyArray<
    { readonly token: string; readonly name: string; readonly role: string; readonly sessions?: ReadonlyArray<string> }
  >
): Promise<{ readonly server: Running; readonly url: string }> => {
  const tokenFile = join(f.dir, "tokens.json")
  writeFileSync(tokenFile, JSON.stringify(tokens))
  const server = start(["serve", "--db", f.db, "--policy", f.policyFile, "--port", "0", "--tokens", tokenFile])
  const url = (await server.line(/^toolgate: serving /, 60_000)).match(/http:\/\/127\.0\.0\.1:\d+/)![0]
  return { server, url }
}

/** Runs an effect of the fixture's gate. */
export const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
