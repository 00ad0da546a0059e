/** `toolgate serve`: the approval API and its web console over the SQLite file. */
import { Command, Options } from "@effect/cli"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Console, Context, Effect, Layer, Option, Predicate } from "effect"
import { CannotListen } from "../errors.js"
import { db, host, policy, port } from "../options.js"
import { loadPolicy } from "../target.js"

/** What a system error code of `listen` means for whoever runs `serve`. */
const listenProblems: Record<string, (port: number) => string> = {
  EADDRINUSE: (port) =>
    `the address is already in use: another process listens on port ${port} (stop it or pick another --port)`,
  EACCES: (port) => `permission denied: port ${port} needs privileges (ports below 1024 do; pick another --port)`,
  EADDRNOTAVAIL: () => "the address is not one of this machine's (check --host)",
  ENOTFOUND: () => "the host name does not resolve (check --host)",
  EAI_AGAIN: () => "the host name could not be resolved now (check --host and the name service)"
}

/** Why the server could not listen on `host:port`, from the system's error. */
const cannotListen = (host: string, port: number, cause: unknown): CannotListen => {
  const code = Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined
  const explain = code === undefined ? undefined : listenProblems[code]
  const detail = explain !== undefined
    ? explain(port)
    : cause instanceof Error
    ? cause.message
    : String(cause)
  return new CannotListen({ address: `${host.includes(":") ? `[${host}]` : host}:${port}`, code, detail })
}

/** `toolgate serve` */
export const serve = Command.make(
  "serve",
  {
    db,
    policy,
    port: port("port", "0 picks a free port").pipe(Options.withDefault(7070)),
    host: host("the address to bind; the default is reachable from this machine only"),
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
      ).pipe(Effect.catchTag("ServeError", (error) => Effect.fail(cannotListen(config.host, config.port, error.cause))))
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
).pipe(
  Command.withDescription(
    "Serve the approval API (and its console) over the SQLite file; exits 8 when it cannot listen on --host:--port"
  )
)
