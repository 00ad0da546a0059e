/** `toolgate policy check`: every problem and lint warning of a policy file, with its path. */
import { Args, Command } from "@effect/cli"
import { Policy } from "@tool-gate/core"
import { Console, Effect, Either } from "effect"
import { Failed } from "../errors.js"
import { ExitCode } from "../exit.js"
import { json } from "../options.js"
import { printLines } from "../print.js"
import * as Terminal from "../terminal.js"

const check = Command.make(
  "check",
  { json, file: Args.text({ name: "file" }).pipe(Args.withDescription("a .yaml, .yml or .json policy")) },
  ({ file, json }) =>
    Effect.gen(function*() {
      const loaded = yield* Effect.either(Policy.load(file))
      const problems = Either.match(loaded, { onLeft: (error) => error.problems, onRight: () => [] })
      const warnings = Either.match(loaded, { onLeft: () => [], onRight: (policy) => policy.warnings })
      const at = (path: string) => (path === "" ? `${file}:` : `${file}: ${path}:`)
      if (json) {
        yield* printLines(
          Terminal.json(
            {
              file,
              valid: Either.isRight(loaded),
              ...Either.match(loaded, {
                onLeft: () => ({}),
                onRight: (policy) => ({ version: policy.version, rules: policy.rules.length })
              }),
              problems,
              warnings
            }
          ).split("\n")
        )
      } else {
        for (const problem of problems) yield* Console.log(`${at(problem.path)} error: ${problem.message}`)
        for (const warning of warnings) {
          yield* Console.log(`${at(warning.path)} warning (${warning.kind}): ${warning.message}`)
        }
        yield* Console.log(Either.match(loaded, {
          onLeft: () => `${file}: invalid policy, ${problems.length} problem(s)`,
          onRight: (policy) =>
            `${file}: valid policy, ${policy.rules.length} rule(s), ${warnings.length} warning(s), version ${
              policy.version.slice(0, 12)
            }`
        }))
      }
      if (Either.isLeft(loaded)) return yield* new Failed({ code: ExitCode.policyInvalid })
    })
).pipe(
  Command.withDescription("Validate a policy file: every problem and lint warning with its path; exit 1 if invalid")
)

/** `toolgate policy` */
export const policy = Command.make("policy").pipe(
  Command.withDescription("Policy files"),
  Command.withSubcommands([check])
)
