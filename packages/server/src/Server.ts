/**
 * The approval API served on Node's HTTP server (`@effect/platform-node`, which also runs under
 * Bun) over whatever `ToolGate` and `ApprovalStore` are provided: the API, its OpenAPI document at
 * `/openapi.json`, Swagger UI at `/docs`, the web console at `/console`, a request body limit, and
 * bearer tokens. Binds 127.0.0.1 unless told otherwise.
 *
 * @example
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Policy } from "@tool-gate/core"
 * import { Auth, Server } from "@tool-gate/server"
 * import { ToolGateSqlite } from "@tool-gate/sqlite"
 * import { Effect, Layer } from "effect"
 *
 * const policy = Policy.unsafeMake({ requireApproval: ["bash"] })
 * const main = Effect.gen(function*() {
 *   const tokens = yield* Auth.fromEnv
 *   return yield* Layer.launch(
 *     Server.layer({ port: 7070, tokens }).pipe(
 *       Layer.provide(ToolGateSqlite.layer({ filename: ".toolgate/toolgate.db", policy }))
 *     )
 *   )
 * })
 *
 * NodeRuntime.runMain(main)
 *
 * @since 0.1.0
 */
import { HttpApiBuilder, HttpApiSwagger, HttpApp, HttpServerResponse } from "@effect/platform"
import type { HttpRouter, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { ServeError } from "@effect/platform/HttpServerError"
import type { ApprovalStore, ToolGate } from "@tool-gate/core"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import * as Auth from "./Auth.js"
import * as Http from "./Http.js"
import * as WebConsole from "./WebConsole.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** default 7070; 0 picks a free port (read it from `HttpServer.HttpServer`'s `address`) */
  readonly port?: number | undefined
  /** default 127.0.0.1: reachable from this machine only */
  readonly host?: string | undefined
  readonly tokens: ReadonlyArray<Auth.TokenConfig>
  /** largest accepted request body, default 64 KiB (a larger one gets 413) */
  readonly maxBodyBytes?: number | undefined
}

// Schema-encoded errors cannot carry headers, and RFC 9110 wants a challenge on every 401: add it
// just before the response is written.
const challenge = HttpApiBuilder.middleware((app) =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(
        response.status === 401
          ? HttpServerResponse.setHeader(response, "www-authenticate", "Bearer realm=\"tool-gate\"")
          : response
      )
    ),
    app
  )
)

/**
 * The API, its documentation, the web console and the body limit, with authentication, served by
 * whatever `HttpServer` is provided.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerApp = (
  options: Pick<Options, "tokens" | "maxBodyBytes">
): Layer.Layer<
  never,
  never,
  HttpServer.HttpServer | HttpRouter.HttpRouter.DefaultServices | ToolGate.ToolGate | ApprovalStore.ApprovalStore
> =>
  HttpApiBuilder.serve().pipe(
    Layer.provide(
      Layer.mergeAll(
        HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
        HttpApiSwagger.layer({ path: "/docs" }),
        WebConsole.layer,
        Http.layerBodyLimit(options.maxBodyBytes ?? 64 * 1024),
        challenge
      )
    ),
    Layer.provide(Http.layer),
    Layer.provide(Auth.layer(options.tokens))
  )

/**
 * Node's HTTP server, closed promptly: a graceful close waits for every connection to end, and
 * event streams (the console's, `audit --follow`) never end by themselves, so on release every
 * connection is cut first (this finalizer is added after the server's own close, so runs before).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNodeServer = (options: Pick<Options, "port" | "host">) =>
  Layer.unwrapEffect(Effect.sync(() => {
    const server = createServer()
    const cutConnections = Layer.scopedDiscard(
      Effect.addFinalizer(() => Effect.sync(() => server.closeAllConnections()))
    )
    return cutConnections.pipe(
      Layer.provideMerge(
        NodeHttpServer.layer(() => server, { port: options.port ?? 7070, host: options.host ?? "127.0.0.1" })
      )
    )
  }))

/**
 * The API served on Node's HTTP server. The `HttpServer` stays in the output, for its address.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<HttpServer.HttpServer, ServeError, ToolGate.ToolGate | ApprovalStore.ApprovalStore> =>
  layerApp(options).pipe(Layer.provideMerge(layerNodeServer(options)))
