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
 * import { Effect, Layer, Option } from "effect"
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
import { HttpApiBuilder, HttpApiSwagger, HttpApp, HttpMiddleware } from "@effect/platform"
import type { HttpRouter, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { ServeError } from "@effect/platform/HttpServerError"
import type { ApprovalStore, ToolGate } from "@tool-gate/core"
import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import * as Auth from "./Auth.js"
import * as Http from "./Http.js"
import * as NodeFastPath from "./internal/nodeFastPath.js"
import * as ResponseHeaders from "./internal/responseHeaders.js"
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

const responseHeaders: HttpApp.PreResponseHandler = (request, response) =>
  Effect.succeed(ResponseHeaders.finish(request.url, response))

/**
 * `responseHeaders` after any handler already in place, for every request the served app answers:
 * set once where the server's runtime is captured, not appended by a middleware on each request.
 */
const withResponseHeaders = <A, E, R>(serve: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.locallyWith(
    serve,
    HttpApp.currentPreResponseHandlers,
    Option.match({
      onNone: () => Option.some(responseHeaders),
      onSome: (previous) =>
        Option.some<HttpApp.PreResponseHandler>((request, response) =>
          Effect.flatMap(previous(request, response), (response) => responseHeaders(request, response))
        )
    })
  )

/** The tracer a program has when none is installed: its spans go nowhere. */
const builtInTracer = Effect.runSync(Effect.tracer)

/**
 * The platform's server span for every request, only when a tracer is installed that does
 * something with it: with the built-in one, the span (the request's URL parsed, an attribute per
 * header) was work nobody could see.
 */
const serveTraced = <A, E, R>(serve: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.tracer,
      (tracer) => tracer === builtInTracer ? HttpMiddleware.withTracerDisabledWhen(serve, () => true) : serve
    )
  )

/**
 * The API, its documentation, the web console and the body limit, with authentication, served by
 * whatever `HttpServer` is provided; answers and pending lists are taken before the router
 * (`Http.layerBodyLimitWithLeanRoutes`). Each request gets the platform's server span when a
 * tracer is installed (one provided to this layer or around it).
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
  serveTraced(withResponseHeaders(HttpApiBuilder.serve())).pipe(
    Layer.provide(
      Layer.mergeAll(
        HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
        HttpApiSwagger.layer({ path: ResponseHeaders.docsPath }),
        WebConsole.layer,
        Http.layerBodyLimitWithLeanRoutes(options.maxBodyBytes ?? 64 * 1024)
      )
    ),
    Layer.provide(Http.layer),
    Layer.provide(Auth.layer(options.tokens))
  )

/**
 * Node's HTTP server, closed promptly: a graceful close waits for every connection to end, and
 * event streams (the console's, `audit --follow`) never end by themselves, so on release every
 * connection is cut first (this finalizer is added after the server's own close, so runs before).
 * `layerApp` serves answers, pending lists and plain event streams on this server before the
 * platform (`Http.layerBodyLimitWithLeanRoutes`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNodeServer = (options: Pick<Options, "port" | "host">) =>
  Layer.unwrapEffect(Effect.sync(() => {
    const server = createServer()
    const fastPath = Layer.succeed(NodeFastPath.NodeFastPath, NodeFastPath.attach(server))
    const cutConnections = Layer.scopedDiscard(
      Effect.addFinalizer(() => Effect.sync(() => server.closeAllConnections()))
    )
    return Layer.merge(
      cutConnections.pipe(
        Layer.provideMerge(
          NodeHttpServer.layer(() => server, { port: options.port ?? 7070, host: options.host ?? "127.0.0.1" })
        )
      ),
      fastPath
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
