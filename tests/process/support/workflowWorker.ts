/**
 * Another copy of the workflow app (tests/process/support/releaseWorkflow.ts) in its own process:
 * its engine and bridge run on the shared SQLite file until the process is killed. Prints
 * `{"event":"ready"}` once its bridge runs, and `{"event":"ran","env":...}` for each deploy it runs.
 *
 *   workflowWorker DB
 */
import { Effect, Layer } from "effect"
import { replica } from "./releaseWorkflow.js"

const [filename] = process.argv.slice(2)
const ran: Array<string> = []

Effect.runFork(
  Effect.gen(function*() {
    yield* Layer.build(replica(filename!, ran))
    console.log(JSON.stringify({ event: "ready" }))
    return yield* Effect.never
  }).pipe(Effect.scoped)
)
