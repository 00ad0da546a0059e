/**
 * An MCP gateway: tool-gate in front of any MCP server's tools, for any MCP client. The gateway
 * is an MCP server itself (over stdio, or Streamable HTTP at `/mcp`) that lists the downstream
 * server's tools with their input schemas and passes every `tools/call` through the `ToolGate`
 * in context, with the same store, console, CLI and audit trail as the library:
 *
 * - allowed: forwarded, and the downstream result returned unchanged;
 * - denied (by policy, by a person, or by expiry): a tool error result whose text tells the model
 *   why, so it can go on;
 * - needs a person: the call waits up to the TTL with progress notifications, listed as pending
 *   everywhere; with `ask: "client"` or `"both"` the client's own user may answer (elicitation).
 *
 * Arguments are judged after they validate against the tool's input schema, and exactly the
 * judged value is forwarded. One MCP session is one tool-gate session; the client's name@version
 * is the agent id; a call's id is stable (its tool, arguments and occurrence), so a retried call
 * replays its decision. When the store cannot be reached, every call is refused, never forwarded.
 *
 * @example
 * import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
 * import { Policy } from "@tool-gate/core"
 * import { McpGateway } from "@tool-gate/mcp"
 * import { ToolGateSqlite } from "@tool-gate/sqlite"
 * import { Effect, Logger } from "effect"
 *
 * const policy = Policy.unsafeMake({ requireApproval: ["write_file"], allow: ["read_*"], default: "deny" })
 *
 * const gateway = McpGateway.serveStdio({
 *   downstream: { _tag: "Command", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] }
 * })
 *
 * const main = gateway.pipe(
 *   Effect.scoped,
 *   Effect.provide(ToolGateSqlite.layer({ filename: "toolgate.db", policy })),
 *   Effect.tapErrorCause(Effect.logError),
 *   // stdout carries the MCP messages alone: log to stderr
 *   Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true })))
 * )
 *
 * NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
 *
 * @since 0.1.0
 */
import { getRequestListener } from "@hono/node-server"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Policy, ToolGate } from "@tool-gate/core"
import { Deferred, Duration, Effect, Redacted, Schedule, Schema } from "effect"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import type { Readable, Writable } from "node:stream"
import type * as Calls from "./internal/calls.js"
import * as Downstreams from "./internal/downstream.js"
import * as HttpSessions from "./internal/httpSessions.js"
import * as Sessions from "./internal/sessions.js"

/**
 * Where the downstream MCP server is: a command started as a child process speaking stdio (with
 * this process's environment; its stderr is this process's), or a Streamable HTTP URL.
 *
 * @since 0.1.0
 * @category models
 */
export type Downstream = Downstreams.Target

/**
 * Who answers a call that needs approval: `operators` (the console, the CLI, the HTTP API, as for
 * any request), `client` (the client's own user through MCP elicitation; their refusal denies) or
 * `both` (whoever answers first; the client's refusal leaves it to the operators). Every request
 * is durable and listed whoever answers it; a client that cannot elicit leaves it to the operators.
 *
 * @since 0.1.0
 * @category models
 */
export type Ask = Calls.Ask

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly downstream: Downstream
  /** default `operators` */
  readonly ask?: Ask | undefined
  /**
   * The downstream server's name: its tools are judged as `mcp__NAME__TOOL` (Claude Code's
   * naming), so one policy serves several gateways. Without it the policy judges the tool's own name.
   */
  readonly serverName?: string | undefined
  /** between progress notifications while a call waits for a person (default 5 seconds) */
  readonly progressInterval?: Duration.DurationInput | undefined
  /** how long a forwarded call may run without the downstream server reporting progress (default 10 minutes) */
  readonly callTimeout?: Duration.DurationInput | undefined
}

/**
 * @since 0.1.0
 * @category errors
 */
export class DownstreamUnavailable extends Schema.TaggedError<DownstreamUnavailable>()("DownstreamUnavailable", {
  target: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `cannot reach the downstream MCP server ${this.target}: ${detail}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class DownstreamClosed extends Schema.TaggedError<DownstreamClosed>()("DownstreamClosed", {
  target: Schema.String
}) {
  override get message(): string {
    return `the downstream MCP server ${this.target} closed the connection`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class CannotListen extends Schema.TaggedError<CannotListen>()("CannotListen", {
  address: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `cannot listen on ${this.address}: ${detail}`
  }
}

const describe = (target: Downstream) => target._tag === "Url" ? target.url : [target.command, ...target.args].join(" ")

/**
 * The downstream server, connected for the scope, with its tools listed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const connect = (
  downstream: Downstream
): Effect.Effect<Downstreams.Downstream, DownstreamUnavailable, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => Downstreams.connect(downstream, Sessions.serverInfo),
      catch: (cause) => new DownstreamUnavailable({ target: describe(downstream), cause })
    }),
    (connected) => Effect.promise(() => connected.close().catch(() => undefined))
  )

/**
 * The downstream tools as `Policy.lint` takes them: a policy's rules and argument paths that no
 * listed tool has are reported against them.
 *
 * @since 0.1.0
 * @category utils
 */
export const lintTools = (
  downstream: Downstreams.Downstream,
  serverName?: string
): ReadonlyArray<Policy.Tool> =>
  Array.from(downstream.tools().values(), ({ tool }) => ({
    name: judgedName(serverName)(tool.name),
    parameters: tool.inputSchema
  }))

const judgedName = (serverName: string | undefined) => (tool: string) =>
  serverName === undefined ? tool : `mcp__${serverName}__${tool}`

/** The gate over the downstream tools; the policy's rules that no listed tool can meet are logged as warnings. */
const gatewayOf = (options: Options, downstream: Downstreams.Downstream) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const warnings = Policy.lint(gate.policy, { tools: lintTools(downstream, options.serverName) })
    yield* Effect.forEach(
      warnings,
      (warning) => Effect.logWarning(`policy ${warning.path}: ${warning.message} (${warning.kind})`),
      { discard: true }
    )
    return {
      gate,
      downstream,
      judgedName: judgedName(options.serverName),
      ask: options.ask ?? "operators",
      progressInterval: Duration.decode(options.progressInterval ?? "5 seconds"),
      callTimeout: Duration.decode(options.callTimeout ?? "10 minutes")
    } satisfies Calls.Gateway
  })

/** Fails once the downstream connection ends. */
const downstreamClosed = (options: Options, downstream: Downstreams.Downstream) =>
  Effect.flatMap(Deferred.make<never, DownstreamClosed>(), (closed) => {
    downstream.onClose = () =>
      Deferred.unsafeDone(closed, Effect.fail(new DownstreamClosed({ target: describe(options.downstream) })))
    return Deferred.await(closed)
  })

/**
 * Serves one client over stdio (this process's stdin and stdout, or the given streams) until it
 * disconnects. The session key is `sessionKey` when given (so a client that starts the gateway
 * again continues its session: its retried calls replay their answers) or a new `mcp-UUID`.
 * Nothing but MCP messages may be written to stdout meanwhile: log to stderr.
 *
 * @since 0.1.0
 * @category running
 */
export const serveStdio = (
  options: Options & {
    readonly sessionKey?: string | undefined
    readonly stdin?: Readable | undefined
    readonly stdout?: Writable | undefined
  }
): Effect.Effect<void, DownstreamUnavailable | DownstreamClosed, ToolGate.ToolGate | Scope.Scope> =>
  Effect.gen(function*() {
    const downstream = yield* connect(options.downstream)
    const gateway = yield* gatewayOf(options, downstream)
    const { server } = Sessions.make(gateway, { sessionKey: options.sessionKey ?? `mcp-${randomUUID()}` })
    downstream.onToolsChanged = () => void server.sendToolListChanged().catch(() => undefined)
    const ended = yield* Deferred.make<void>()
    const transport = new StdioServerTransport(options.stdin, options.stdout)
    transport.onclose = () => Deferred.unsafeDone(ended, Effect.void)
    yield* Effect.acquireRelease(
      Effect.promise(() => server.connect(transport)),
      () => Effect.promise(() => server.close().catch(() => undefined))
    )
    // stdin ending is the client going away
    const input = options.stdin ?? process.stdin
    input.once("end", () => Deferred.unsafeDone(ended, Effect.void))
    yield* Effect.raceFirst(Deferred.await(ended), downstreamClosed(options, downstream))
  })

/**
 * Serves any number of clients over Streamable HTTP at `http://HOST:PORT/mcp` for the scope
 * (port 0 picks a free one); returns the endpoint's URL. Each `Mcp-Session-Id` is a tool-gate
 * session, and a session outlives a restart of the gateway: a client that goes on with its
 * session id after a restart keeps its session and replays its calls' answers (idle sessions are
 * closed the same way, and come back alike). Requests from a browser page of another origin are
 * refused; with `token`, requests without it too.
 *
 * @since 0.1.0
 * @category running
 */
export const serveHttp = (
  options: Options & {
    readonly port: number
    readonly host?: string | undefined
    /** when given, every request must carry `Authorization: Bearer TOKEN` (else 401) */
    readonly token?: Redacted.Redacted | undefined
    /** a session with no request and no call for this long is closed, and restored when it comes back (default 30 minutes) */
    readonly idleSessionTimeout?: Duration.DurationInput | undefined
  }
): Effect.Effect<
  { readonly url: string; readonly closed: Effect.Effect<never, DownstreamClosed> },
  DownstreamUnavailable | CannotListen,
  ToolGate.ToolGate | Scope.Scope
> =>
  Effect.gen(function*() {
    const downstream = yield* connect(options.downstream)
    const gateway = yield* gatewayOf(options, downstream)
    const sessions = HttpSessions.make(gateway, {
      token: options.token === undefined ? undefined : Redacted.value(options.token)
    })
    downstream.onToolsChanged = () => sessions.toolsChanged()
    const idleMs = Duration.toMillis(options.idleSessionTimeout ?? "30 minutes")
    yield* Effect.promise(() => sessions.closeIdle(idleMs)).pipe(
      Effect.tap((closed) => closed > 0 ? Effect.logInfo(`closed ${closed} idle MCP session(s)`) : Effect.void),
      Effect.repeat(Schedule.spaced(Duration.millis(Math.min(60_000, Math.max(10, idleMs / 2))))),
      Effect.forkScoped
    )
    const host = options.host ?? "127.0.0.1"
    const server = createServer(getRequestListener(sessions.handle))
    const address = yield* Effect.acquireRelease(
      Effect.async<AddressInfo, CannotListen>((resume) => {
        const fail = (cause: unknown) =>
          resume(Effect.fail(new CannotListen({ address: `${host}:${options.port}`, cause })))
        server.once("error", fail)
        server.listen(options.port, host, () => {
          server.off("error", fail)
          resume(Effect.succeed(server.address() as AddressInfo))
        })
      }),
      () =>
        Effect.promise(async () => {
          await sessions.close()
          server.closeAllConnections()
          await new Promise((resolve) => server.close(resolve))
        })
    )
    const shownHost = address.address.includes(":") ? `[${address.address}]` : address.address
    return { url: `http://${shownHost}:${address.port}/mcp`, closed: downstreamClosed(options, downstream) }
  })
