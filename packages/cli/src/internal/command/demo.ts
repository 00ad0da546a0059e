/**
 * `toolgate demo`: a release agent pauses for a human, its process ends, a human answers from
 * another process, and the agent resumes from its checkpoint in a third. Each step is a `toolgate`
 * process (this very program run again, as `npx toolgate ...`) on one SQLite file in the current
 * folder, `.toolgate/demo.db`, removed first so every run starts clean. The agent ships inside the
 * CLI (`internal/demo/`), so the demo runs from the published bundle as from a checkout.
 */
import { Command, Options } from "@effect/cli"
import { Checkpoint } from "@tool-gate/core"
import { Console, Effect } from "effect"
import { spawn } from "node:child_process"
import { rmSync } from "node:fs"
import { Failed } from "../errors.js"
import { ExitCode } from "../exit.js"
import { printLines } from "../print.js"

/** The demo's database, in the folder the demo runs in. */
const demoDb = ".toolgate/demo.db"

interface Ended {
  readonly pid: number | undefined
  readonly status: number
  readonly stdout: string
  readonly stderr: string
}

/** `toolgate ARGS` as a process of its own: the runtime and script this process runs. */
const toolgate = (args: ReadonlyArray<string>) =>
  Effect.async<Ended>((resume) => {
    const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...args], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text))
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
    child.on("close", (status) =>
      resume(Effect.succeed({ pid: child.pid, status: status ?? ExitCode.internal, stdout, stderr })))
    child.on("error", (error) =>
      resume(Effect.succeed({ pid: child.pid, status: ExitCode.internal, stdout, stderr: error.message })))
    return Effect.sync(() =>
      child.kill()
    )
  })

const linesOf = (text: string) => text.replace(/\n$/, "").split("\n")

/** Runs one step, shown as the command a user would type; its output is what the step printed. */
const step = (title: string, args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    yield* printLines(["", `── ${title} ──`, `$ npx toolgate ${args.join(" ")}`])
    const ended = yield* toolgate(args)
    if (ended.stdout !== "") yield* printLines(linesOf(ended.stdout))
    yield* Console.log(`(process ${ended.pid} exited ${ended.status})`)
    if (ended.status !== 0) {
      yield* Effect.forEach(linesOf(ended.stderr), (line) => Console.error(line), { discard: true })
      return yield* new Failed({ code: 1 })
    }
    return ended.stdout
  })

const found = (text: string, pattern: RegExp, what: string) =>
  Effect.gen(function*() {
    const match = text.match(pattern)
    if (match === null) {
      yield* Console.error(`the agent printed no ${what}`)
      return yield* new Failed({ code: 1 })
    }
    return match[0]
  })

/** `toolgate demo agent [--resume TOKEN]`: the agent's process, one step of the demo. */
const agent = Command.make(
  "agent",
  {
    resume: Options.text("resume").pipe(
      Options.withPseudoName("TOKEN"),
      Options.withDescription("continue a paused conversation from its checkpoint"),
      Options.withSchema(Checkpoint.Token),
      Options.optional
    )
  },
  ({ resume }) =>
    // the agent (and @effect/ai) is loaded only for the demo: importing the CLI needs neither
    Effect.promise(() => import("../demo/agent.js")).pipe(
      Effect.flatMap((demo) => demo.run(demoDb, resume)),
      Effect.catchAll((error) => Console.error(String(error)).pipe(Effect.zipRight(new Failed({ code: 1 }))))
    )
).pipe(
  Command.withDescription(`The demo's agent: runs on ${demoDb} until a call needs a human, or resumes`)
)

/** `toolgate demo` */
export const demo = Command.make("demo", {}, () =>
  Effect.gen(function*() {
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${demoDb}${suffix}`, { force: true })
    yield* Console.log(
      `tool-gate demo: a release agent on ${demoDb} (read_file allowed, deploy needs a human, drop_database denied)`
    )
    const first = yield* step("1. the agent runs, pauses on the deploy and exits", ["demo", "agent"])
    const requestId = yield* found(first, /req_[0-9a-f-]{36}/, "request id")
    const token = yield* found(first, /cp_[0-9a-f-]{36}/, "checkpoint token")
    yield* step("2. a human approves, from another process", ["approve", requestId, "--db", demoDb])
    yield* step("3. the agent runs again and resumes from the checkpoint", ["demo", "agent", "--resume", token])
  })).pipe(
    Command.withDescription("Run the demo: an agent pauses, is approved from another process, and resumes"),
    Command.withSubcommands([agent])
  )
