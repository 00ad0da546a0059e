/**
 * The platform's server span per request is made only when a tracer is installed: one provided
 * to the server layer receives a span for every request, with the request's method and path
 * (without one, the span was work nobody could see, and it is skipped).
 */
import { HttpServer } from "@effect/platform"
import { Server } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Context, Effect, Layer, Tracer } from "effect"
import { join } from "node:path"
import { describe, it } from "../support/effectTest.js"
import { tempDir } from "../support/sqlStores.js"
import { authorization, policy, tokenList } from "./support/server.js"

describe("tracing", () => {
  it.live("an installed tracer gets the server span of every request", () =>
    Effect.gen(function*() {
      const builtIn = yield* Effect.tracer
      const spans: Array<Tracer.Span> = []
      const recording = Tracer.make({
        span: (...args) => {
          const span = builtIn.span(...args)
          spans.push(span)
          return span
        },
        context: builtIn.context
      })
      const filename = join(yield* tempDir, "toolgate.db")
      const context = yield* Layer.build(
        Server.layer({ port: 0, tokens: tokenList }).pipe(
          Layer.provideMerge(ToolGateSqlite.layer({ filename, policy })),
          Layer.provide(Layer.setTracer(recording))
        )
      )
      const address = Context.get(context, HttpServer.HttpServer).address
      if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
      const response = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${address.port}/me`, { headers: authorization("approver") })
      )
      expect(response.status).toBe(200)
      const server = spans.filter((span) => span.kind === "server")
      expect(server).toHaveLength(1)
      expect(server[0]!.attributes.get("http.request.method")).toBe("GET")
      expect(server[0]!.attributes.get("url.path")).toBe("/me")
    }))
})
