/**
 * `toolgate mcp`: the MCP gateway (`@tool-gate/mcp`) in front of a downstream MCP server, on the
 * SQLite file or a PostgreSQL database. Over stdio, stdout carries MCP messages alone: everything
 * this command says goes to stderr.
 */
import { Args, Command, Options } from "@effect/cli"
import { Policy } from "@tool-gate/core"
import type { McpGateway as Gateway } from "@tool-gate/mcp"
import { Config, Console, Effect, Either, Layer, Logger, Option, Redacted } from "effect"
import { InvalidInput } from "../errors.js"
import { db, duration, host, invalid, port } from "../options.js"

const stderrLogger = Logger.prettyLogger({ stderr: true, colors: false })

/** `toolgate mcp` */
export const mcp = Command.make(
  "mcp",
  {
    policy: Options.text("policy").pipe(
      Options.withPseudoName("FILE"),
      Options.withDescription("the policy file, .yaml or .json (env TOOLGATE_POLICY); required"),
      Options.withFallbackConfig(Config.string("TOOLGATE_POLICY"))
    ),
    db,
    url: Options.redacted("url").pipe(
      Options.withPseudoName("POSTGRES_URL"),
      Options.withDescription("a PostgreSQL database instead of --db (env TOOLGATE_DATABASE_URL)"),
      Options.withFallbackConfig(Config.redacted("TOOLGATE_DATABASE_URL")),
      Options.optional
    ),
    http: port("http", "serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (0 picks a free port)").pipe(
      Options.optional
    ),
    host: host("with --http: the address to bind; the default is reachable from this machine only"),
    token: Options.redacted("token").pipe(
      Options.withPseudoName("TOKEN"),
      Options.withDescription(
        "with --http: requests must carry Authorization: Bearer TOKEN (env TOOLGATE_MCP_TOKEN); visible ASCII"
      ),
      Options.withFallbackConfig(Config.redacted("TOOLGATE_MCP_TOKEN")),
      Options.mapEffect((token) =>
        /^[\x21-\x7e]{16,}$/.test(Redacted.value(token))
          ? Either.right(token)
          : Either.left(invalid("--token must be at least 16 visible ASCII characters, without spaces (not shown)"))
      ),
      Options.optional
    ),
    sessionIdle: duration(
      "session-idle",
      "with --http: close a session idle this long (it is restored when its client comes back); default 30m"
    ).pipe(Options.withDefault(30 * 60_000)),
    downstream: Options.text("downstream").pipe(
      Options.withPseudoName("URL"),
      Options.withDescription("the downstream server's Streamable HTTP URL, instead of a command after --"),
      Options.optional
    ),
    session: Options.text("session").pipe(
      Options.withPseudoName("KEY"),
      Options.withDescription(
        "stdio: the tool-gate session key (default: a new one per start); give one to keep a session, and replay " +
          "retried calls, across restarts"
      ),
      Options.optional
    ),
    name: Options.text("name").pipe(
      Options.withPseudoName("SERVER"),
      Options.withDescription("judge the tools as mcp__SERVER__TOOL (Claude Code's naming) instead of TOOL"),
      Options.mapEffect((name) =>
        /^[A-Za-z0-9_-]{1,64}$/.test(name)
          ? Either.right(name)
          : Either.left(invalid(`--name must be 1 to 64 letters, digits, _ or -, got "${name}"`))
      ),
      Options.optional
    ),
    ask: Options.choice("ask", ["operators", "client", "both"]).pipe(
      Options.withDescription(
        "who answers approvals: operators (console, CLI, HTTP), client (the client's user, by MCP elicitation) or both"
      ),
      Options.withDefault("operators" as const)
    ),
    command: Args.text({ name: "command" }).pipe(
      Args.withDescription("after --: the command that starts the downstream MCP server (stdio)"),
      Args.repeated
    )
  },
  (config) =>
    Effect.gen(function*() {
      const [{ McpGateway }] = yield* Effect.promise(() => Promise.all([import("@tool-gate/mcp")]))
      const downstream = yield* Option.match(config.downstream, {
        onSome: (url) =>
          config.command.length > 0
            ? Effect.fail(new InvalidInput({ message: "give either --downstream URL or a command after --, not both" }))
            : Effect.succeed<Gateway.Downstream>({ _tag: "Url", url }),
        onNone: () =>
          config.command.length === 0
            ? Effect.fail(
              new InvalidInput({
                message:
                  "no downstream server: give its command after -- (toolgate mcp --policy P -- npx server) or --downstream URL"
              })
            )
            : Effect.succeed<Gateway.Downstream>({
              _tag: "Command",
              command: config.command[0]!,
              args: config.command.slice(1)
            })
      })
      const policy = yield* Policy.load(config.policy)
      const store = yield* Option.match(config.url, {
        onNone: () =>
          Effect.map(
            Effect.promise(() => import("@tool-gate/sqlite")),
            ({ ToolGateSqlite }) => ({ layer: ToolGateSqlite.layer({ filename: config.db, policy }), where: config.db })
          ),
        onSome: (url) =>
          Effect.flatMap(
            Effect.promise(() => import("@tool-gate/pg")),
            ({ ToolGatePg }) =>
              ToolGatePg.preparedStatementsConfig.pipe(
                Effect.mapError((error) => new InvalidInput({ message: String(error) })),
                Effect.map((preparedStatements) => ({
                  layer: ToolGatePg.layer({ url, policy, preparedStatements }),
                  where: "PostgreSQL"
                }))
              )
          )
      })
      const options = {
        downstream,
        ask: config.ask,
        serverName: Option.getOrUndefined(config.name)
      }
      const target = downstream._tag === "Url" ? downstream.url : [downstream.command, ...downstream.args].join(" ")

      const serve = Effect.gen(function*() {
        yield* Option.match(config.http, {
          onNone: () =>
            Effect.gen(function*() {
              if (Option.isSome(config.token)) {
                return yield* new InvalidInput({ message: "--token protects the HTTP endpoint: give it with --http" })
              }
              const sessionKey = Option.getOrUndefined(config.session)
              yield* Console.error(
                `toolgate mcp: gating ${target} on ${store.where}${
                  sessionKey === undefined ? "" : `, session ${sessionKey}`
                }`
              )
              yield* McpGateway.serveStdio({ ...options, sessionKey })
            }),
          onSome: (port) =>
            Effect.gen(function*() {
              if (Option.isSome(config.session)) {
                return yield* new InvalidInput({
                  message: "--session names the stdio session; over --http each Mcp-Session-Id is a session"
                })
              }
              const served = yield* McpGateway.serveHttp({
                ...options,
                port,
                host: config.host,
                token: Option.getOrUndefined(config.token),
                idleSessionTimeout: config.sessionIdle
              })
              yield* Console.error(`toolgate mcp: serving ${served.url}, gating ${target} on ${store.where}`)
              return yield* served.closed
            })
        })
      })
      yield* Effect.scoped(serve).pipe(
        Effect.provide(store.layer),
        // stdout is the MCP channel: log lines go to stderr, by whichever logger the runtime
        // installed (Effect's default, or the pretty one NodeRuntime.runMain puts in its place)
        Effect.provide(Layer.mergeAll(
          Logger.replace(Logger.defaultLogger, stderrLogger),
          Logger.replace(Logger.prettyLoggerDefault, stderrLogger)
        ))
      )
    })
).pipe(
  Command.withDescription(
    "Put tool-gate in front of an MCP server: toolgate mcp --policy FILE [--db FILE | --url POSTGRES_URL] " +
      "[--http PORT] -- COMMAND [ARGS...] (or --downstream URL); exits 8 when the store or the downstream server " +
      "cannot be reached"
  )
)
