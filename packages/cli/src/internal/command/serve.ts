/** `toolgate serve`: the approval API and its web console over the SQLite file. */
import { Command, Options } from "@effect/cli"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Console, Context, Effect, Either, Layer, Option } from "effect"
import { db, invalid, policy } from "../options.js"
import { loadPolicy } from "../target.js"

/** `toolgate serve` */
export const serve = Command.make(
  "serve",
  {
    db,
    policy,
    port: Options.integer("port").pipe(
      Options.withPseudoName("PORT"),
      Options.withDescription("0 picks a free port"),
      Options.mapEffect((port) =>
        port >= 0 && port <= 65535
          ? Either.right(port)
          : Either.left(invalid(`--port must be from 0 to 65535, got ${port}`))
      ),
      Options.withDefault(7070)
    ),
    host: Options.text("host").pipe(
      Options.withPseudoName("HOST"),
      Options.withDescription("the address to bind; the default is reachable from this machine only"),
      Options.withDefault("127.0.0.1")
    ),
    tokens: Options.text("tokens").pipe(
      Options.withPseudoName("FILE"),
      Options.withDescription("a JSON token file (default: the TOOLGATE_TOKENS environment variable)"),
      Options.optional
    )
  },
  (config) =>
    Effect.gen(function*() {
      // the server is loaded only to serve, so the other commands start without it
      const [HttpServer, { Auth, Server }] = yield* Effect.promise(() =>
        Promise.all([
          import("@effect/platform/HttpServer"),
          import("@tool-gate/server")
        ])
      )
      const tokens = yield* Option.match(config.tokens, { onNone: () => Auth.fromEnv, onSome: Auth.fromFile })
      const policy = yield* loadPolicy(config.policy)
      // Server.layer cuts open event streams on stop, so Ctrl-C never waits on a console tab
      const context = yield* Layer.build(
        Server.layer({ tokens, port: config.port, host: config.host }).pipe(
          Layer.provide(ToolGateSqlite.layer({ filename: config.db, policy }))
        )
      )
      const address = Context.get(context, HttpServer.HttpServer).address
      const where = address._tag === "TcpAddress"
        ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
        : address.path
      yield* Console.log(`toolgate: serving ${where} on ${config.db} (${tokens.length} token(s)); stop with Ctrl-C`)
      if (Option.isNone(config.policy)) {
        yield* Console.error("toolgate: no --policy given: approvals with edited arguments will be denied")
      }
      return yield* Effect.never
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Serve the approval API (and its console) over the SQLite file"))
