/**
 * The files the policy commands read besides the policy: tool definitions (`--tools`), test
 * cases (`policy test`) and recorded calls (`policy diff --calls`). Each that cannot be read or
 * does not hold what it should is an `InvalidInput` naming the file and the problem.
 */
import { FileSystem } from "@effect/platform"
import { Policy } from "@tool-gate/core"
import { Effect, Either } from "effect"
import { InvalidInput } from "./errors.js"

const read = (path: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path)).pipe(
    Effect.mapError((error) => new InvalidInput({ message: `${path}: cannot read the file: ${error.message}` }))
  )

/** A tool file's tools; a bare JSON Schema in `NAME.json` (or `NAME.schema.json`) is tool NAME's parameters. */
const toolFile = (path: string) =>
  Effect.flatMap(read(path), (text) => {
    const name = path.split(/[\\/]/).at(-1)!.replace(/(\.schema)?\.json$/i, "")
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (error) {
      return Effect.fail(new InvalidInput({ message: `${path}: not JSON: ${(error as Error).message}` }))
    }
    return Either.match(Policy.toolsFromJson(value, name), {
      onLeft: (problem) => Effect.fail(new InvalidInput({ message: `${path}: ${problem}` })),
      onRight: Effect.succeed
    })
  })

/**
 * `--tools FILE_OR_DIR`: the tools in a JSON file, or in every `.json` file of a directory (in
 * name order).
 */
export const tools = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(path).pipe(
      Effect.mapError((error) => new InvalidInput({ message: `--tools ${path}: ${error.message}` }))
    )
    if (info.type !== "Directory") return yield* toolFile(path)
    const entries = yield* fs.readDirectory(path).pipe(
      Effect.mapError((error) => new InvalidInput({ message: `--tools ${path}: ${error.message}` }))
    )
    const files = entries.filter((entry) => entry.toLowerCase().endsWith(".json")).sort()
    if (files.length === 0) {
      return yield* new InvalidInput({ message: `--tools ${path}: the directory holds no .json tool file` })
    }
    const found = yield* Effect.forEach(files, (file) => toolFile(`${path.replace(/[\\/]$/, "")}/${file}`))
    return found.flat()
  })

/** `policy test`'s cases file, `.yaml`, `.yml` or `.json`. */
export const cases = (path: string) =>
  Effect.flatMap(
    read(path),
    (text) =>
      Either.match(Policy.testCasesFromText(text, /\.json$/i.test(path) ? "json" : "yaml"), {
        onLeft: (problems) =>
          Effect.fail(new InvalidInput({ message: `${path}: not a table of test cases: ${problems.join("; ")}` })),
        onRight: Effect.succeed
      })
  )

/** `policy diff --calls`: JSON Lines of calls or audit events. */
export const calls = (path: string) =>
  Effect.flatMap(read(path), (text) =>
    Either.match(Policy.recordedCalls(text), {
      onLeft: (problem) => Effect.fail(new InvalidInput({ message: `${path}: ${problem}` })),
      onRight: Effect.succeed
    }))
