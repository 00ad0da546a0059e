import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { exitCode, run } from "./Cli.js"

NodeRuntime.runMain(run(process.argv).pipe(Effect.provide(NodeContext.layer)), {
  disableErrorReporting: true,
  teardown: (exit) => process.exit(exitCode(exit))
})
