/**
 * The Node fast path (`internal/nodeFastPath.ts`): a listener installed on the server sees each
 * request before the platform; a request it declines reaches the platform as it came, body and
 * all; once its scope closes, every request goes to the platform again. `Server.layer` installs
 * the lean routes there only when nothing would miss the platform's work: no tracer installed
 * (the platform's server span) and `Auth.layer`'s bearer check (one that reads nothing but the
 * token). What the lean routes answer there is held equal to the router's in lean-routes.test.ts,
 * bad-inputs.test.ts and headers.test.ts, which run against `Server.layer`.
 */
import { HttpApiBuilder, HttpApp, HttpServer } from "@effect/platform"
import { type ApprovalStore, ToolGate } from "@tool-gate/core"
import { Auth, Http, Server } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { expect } from "bun:test"
import { Context, Effect, Exit, Fiber, Layer, Option, Scope, Tracer } from "effect"
import { createServer, request as httpRequest } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import * as NodeFastPath from "../../packages/server/src/internal/nodeFastPath.js"
import { describe, it } from "../support/effectTest.js"
import { tempDir } from "../support/sqlStores.js"
import { paused, policy, tokenList, tokens } from "./support/server.js"

const post = (url: string, body: string) =>
  Effect.promise(() =>
    fetch(url, { method: "POST", body, headers: { "content-type": "application/json" } }).then((r) => r.text())
  )

describe("the Node fast path", () => {
  it.live("a request that arrives before any handler is in place waits for one, then is answered", () =>
    Effect.gen(function*() {
      const server = createServer()
      NodeFastPath.attach(server)
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      yield* Effect.addFinalizer(() => Effect.promise(() => new Promise((resolve) => server.close(resolve))))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      // listening, with no handler yet (as the platform's server between its listen and its serve)
      const answer = post(`${url}/early`, "{\"c\":3}").pipe(Effect.fork)
      const early = yield* answer
      yield* Effect.sleep("100 millis")
      server.on("request", (request, response) => {
        let body = ""
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => response.end(`platform ${request.url} ${body}`))
      })
      expect(yield* Fiber.join(early)).toBe("platform /early {\"c\":3}")
    }))

  it.live("takes what its listener takes, leaves the rest to the platform as it came, and leaves once closed", () =>
    Effect.gen(function*() {
      const server = createServer()
      // the platform's listener: says who answered, with the body it read
      server.on("request", (request, response) => {
        let body = ""
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => response.end(`platform ${request.url} ${body}`))
      })
      const fastPath = NodeFastPath.attach(server)
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      yield* Effect.addFinalizer(() => Effect.promise(() => new Promise((resolve) => server.close(resolve))))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

      const scope = yield* Scope.make()
      yield* Scope.extend(
        fastPath.install((request, response) => {
          if (request.url !== "/fast") return false
          response.end("fast")
          return true
        }),
        scope
      )
      expect(fastPath.installed()).toBe(true)
      expect(yield* post(`${url}/fast`, "{}")).toBe("fast")
      expect(yield* post(`${url}/other`, "{\"a\":1}")).toBe("platform /other {\"a\":1}")

      yield* Scope.close(scope, Exit.void)
      expect(fastPath.installed()).toBe(false)
      expect(yield* post(`${url}/fast`, "{\"b\":2}")).toBe("platform /fast {\"b\":2}")
    }))

  /** `app` over a fresh gate on a port of its own: whether it put the lean routes on the fast path. */
  const build = (app: Layer.Layer<HttpServer.HttpServer, unknown, ToolGate.ToolGate | ApprovalStore.ApprovalStore>) =>
    Effect.gen(function*() {
      const filename = join(yield* tempDir, "toolgate.db")
      const context = yield* Layer.build(app.pipe(Layer.provideMerge(ToolGateSqlite.layer({ filename, policy }))))
      const address = Context.get(context, HttpServer.HttpServer).address
      if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
      return {
        installed: Context.unsafeGet(context as Context.Context<never>, NodeFastPath.NodeFastPath).installed(),
        gate: Context.get(context, ToolGate.ToolGate),
        url: `http://127.0.0.1:${address.port}`
      }
    })

  it.live("Server.layer takes answers and pending lists on it, and answers them", () =>
    Effect.gen(function*() {
      const { gate, installed, url } = yield* build(Server.layer({ port: 0, tokens: tokenList }))
      expect(installed).toBe(true)
      const requestId = yield* paused(gate, { id: "fast-1", name: "bash", sessionKey: "fast", args: { c: 1 } })
      const headers = { authorization: `Bearer ${tokens.approver}`, "content-type": "application/json" }
      const listed = yield* Effect.promise(() =>
        fetch(`${url}/approvals/pending?sessionKey=fast`, { headers }).then((r) => r.json())
      )
      expect((listed as Array<{ requestId: string }>).map((request) => request.requestId)).toEqual([requestId])
      const answer = (decision: string) =>
        Effect.promise(() =>
          fetch(`${url}/approvals/${requestId}/respond`, {
            method: "POST",
            headers,
            body: JSON.stringify({ decision })
          }).then(async (r) => ({ status: r.status, cache: r.headers.get("cache-control"), body: await r.json() }))
        )
      const first = yield* answer("approve_once")
      expect(first.status).toBe(200)
      expect(first.cache).toBe("no-store")
      expect((first.body as { resolution: { decision: string } }).resolution.decision).toBe("approve_once")
      // answered once: a conflicting second answer is refused
      const conflicting = yield* answer("deny")
      expect(conflicting.status).toBe(409)
      expect(conflicting.cache).toBe("no-store")
    }))

  /** A POST over Node's client, with exactly the headers given (fetch would add a content type). */
  const rawPost = (url: string, path: string, headers: Record<string, string>, body: string) =>
    Effect.promise(() =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const { hostname, port } = new URL(url)
        const request = httpRequest({
          host: hostname,
          port,
          method: "POST",
          path,
          headers: { ...headers, "content-length": String(Buffer.byteLength(body)) }
        }, (response) => {
          let text = ""
          response.on("data", (chunk) => (text += chunk))
          response.on("end", () => resolve({ status: response.statusCode!, body: text }))
        })
        request.on("error", reject)
        request.end(body)
      })
    )

  it.live("a request that fails a check gets the platform's refusal, whatever its Host and content type", () =>
    Effect.gen(function*() {
      const { url } = yield* build(Server.layer({ port: 0, tokens: tokenList }))
      const body = JSON.stringify({ decision: "approve_once" })
      const unknown = { authorization: "Bearer not-a-token-0123456789" }
      for (
        const headers of [
          { ...unknown, host: "elsewhere/x", "content-type": "application/json" },
          // no content type at all: read as JSON
          unknown
        ]
      ) {
        const reply = yield* rawPost(url, "/approvals/req_unknown/respond", headers, body)
        expect(reply.status).toBe(401)
        expect(JSON.parse(reply.body)._tag).toBe("Unauthorized")
      }
    }))

  it.live("not with a tracer installed, a bearer check of one's own, or a handler of every response", () =>
    Effect.gen(function*() {
      const builtIn = yield* Effect.tracer
      const recording = Tracer.make({ span: (...args) => builtIn.span(...args), context: (f) => f() })
      // the app of Server.layerApp, with a check that is not Auth.layer's
      const ownCheck = Layer.succeed(
        Auth.Authentication,
        Auth.Authentication.of({ bearer: Auth.makeVerifier(tokenList) })
      )
      const own = yield* build(
        HttpApiBuilder.serve().pipe(
          Layer.provide(Http.layerBodyLimitWithLeanRoutes(64 * 1024)),
          Layer.provide(Http.layer),
          Layer.provide(ownCheck),
          Layer.provideMerge(Server.layerNodeServer({ port: 0 }))
        )
      )
      expect(own.installed).toBe(false)
      // a handler of the program's own for every response
      const marked = yield* build(
        Layer.locallyWith(
          Server.layer({ port: 0, tokens: tokenList }),
          HttpApp.currentPreResponseHandlers,
          () => Option.some((_request, response) => Effect.succeed(response))
        )
      )
      expect(marked.installed).toBe(false)
      // last: the tracer stays set on this fiber while the test's scope is open
      const traced = yield* build(
        Server.layer({ port: 0, tokens: tokenList }).pipe(Layer.provide(Layer.setTracer(recording)))
      )
      expect(traced.installed).toBe(false)
    }))
})
