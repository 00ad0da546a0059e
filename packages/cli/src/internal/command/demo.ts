/** `toolgate demo`: the agent pauses, is approved from another process, and resumes. */
import { Command } from "@effect/cli"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Failed, InvalidInput } from "../errors.js"
import { ExitCode } from "../exit.js"

// The CLI's sources and its bundle (dist/toolgate.mjs) both sit two levels below the repository.
const examples = fileURLToPath(new URL("../../../examples/", import.meta.url))

/** `toolgate demo` */
export const demo = Command.make("demo", {}, () =>
  Effect.gen(function*() {
    const script = join(examples, "demo.ts")
    if (!existsSync(script)) {
      return yield* new InvalidInput({
        message: `the demo ships with the tool-gate repository (${script} not found); run it from a checkout`
      })
    }
    // The demo's agent runs on Bun (installed from npm with the repository), on the sources.
    const bun = join(dirname(createRequire(import.meta.url).resolve("bun/package.json")), "bin", "bun.exe")
    const code = yield* Effect.async<number>((resume) => {
      const child = spawn(bun, ["--conditions=@tool-gate/source", script], { cwd: dirname(examples), stdio: "inherit" })
      child.on("exit", (status) => resume(Effect.succeed(status ?? ExitCode.internal)))
      child.on("error", () => resume(Effect.succeed(ExitCode.internal)))
      return Effect.sync(() => child.kill())
    })
    if (code !== 0) return yield* new Failed({ code })
  })).pipe(Command.withDescription("Run the demo: an agent pauses, is approved from another process, and resumes"))
