// The README's approval server (section HTTP API): `bun examples/server.ts` in a folder with a
// tokens.json (see Tokens); PORT chooses the port (default 7070).
import { NodeFileSystem, NodeRuntime } from "@effect/platform-node"
import { Policy } from "@tool-gate/core"
import { Auth, Server } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Layer } from "effect"

const policy = Policy.unsafeMake({ requireApproval: ["deploy"] })

const main = Effect.gen(function*() {
  const tokens = yield* Auth.fromFile("tokens.json") // or Auth.fromEnv (TOOLGATE_TOKENS)
  return yield* Layer.launch(
    Server.layer({ port: Number(process.env.PORT ?? 7070), tokens }).pipe( // host 127.0.0.1, 64 KiB body limit by default
      Layer.provide(ToolGateSqlite.layer({ filename: ".toolgate/toolgate.db", policy }))
    )
  )
})
NodeRuntime.runMain(main.pipe(Effect.provide(NodeFileSystem.layer)))
