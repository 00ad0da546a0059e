/**
 * The headers every answer carries, against a real server on loopback: API answers (pending
 * arguments, audit events, identities, errors) and the event stream are never stored by a cache
 * and never sniffed into another type; the console and Swagger UI cannot be framed, and Swagger
 * UI's CSP allows exactly its own inline script and style. Sequence numbers are decimal only.
 */
import { expect } from "bun:test"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { describe, it } from "../support/effectTest.js"
import { authorization, bash, paused, startServer } from "./support/server.js"

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`

describe("HTTP response headers", () => {
  it.live("API answers and errors are no-store and nosniff", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s1", "c1"))
      const replies = [
        yield* server.request("GET", "/approvals/pending"),
        yield* server.request("GET", `/approvals/${requestId}`),
        yield* server.request("GET", "/audit"),
        yield* server.request("GET", "/audit/head"),
        yield* server.request("GET", "/me"),
        yield* server.request("GET", "/sessions/s1/approvals"),
        yield* server.request("GET", "/approvals/req_unknown"),
        yield* server.request("GET", "/me", { token: "wrong-token-0123456789" }),
        yield* server.request("POST", `/approvals/${requestId}/respond`, { raw: "{" }),
        yield* server.request("GET", "/openapi.json")
      ]
      expect(replies.map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200, 200, 404, 401, 400, 200])
      for (const reply of replies) {
        expect(reply.headers.get("cache-control")).toBe("no-store")
        expect(reply.headers.get("x-content-type-options")).toBe("nosniff")
      }
    }))

  it.live("the event stream is no-store and nosniff", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const controller = new AbortController()
      const response = yield* Effect.promise(() =>
        fetch(`${server.url}/audit/stream`, { headers: authorization(undefined), signal: controller.signal })
      )
      controller.abort()
      expect(response.status).toBe(200)
      expect(response.headers.get("cache-control")).toBe("no-store")
      expect(response.headers.get("x-content-type-options")).toBe("nosniff")
    }))

  it.live("the console's files are nosniff and cannot be framed", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      for (const path of ["/console", "/console/console.js", "/console/console.css"]) {
        const reply = yield* server.request("GET", path, { token: null })
        expect(reply.status).toBe(200)
        expect(reply.headers.get("x-content-type-options")).toBe("nosniff")
        expect(reply.headers.get("x-frame-options")).toBe("DENY")
        expect(reply.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
      }
    }))

  it.live("Swagger UI cannot be framed and runs only its own inline script and style", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const reply = yield* server.request("GET", "/docs", { token: null })
      expect(reply.status).toBe(200)
      expect(reply.headers.get("x-content-type-options")).toBe("nosniff")
      expect(reply.headers.get("x-frame-options")).toBe("DENY")
      const csp = reply.headers.get("content-security-policy") ?? ""
      expect(csp).toContain("frame-ancestors 'none'")
      expect(csp).toContain("default-src 'none'")
      expect(csp).not.toContain("unsafe-inline")
      const scripts = [...reply.text.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((match) => match[1]!)
      const styles = [...reply.text.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((match) => match[1]!)
      expect(scripts.length).toBe(1)
      expect(styles.length).toBe(1)
      const directive = (name: string) =>
        csp.split(";").map((part) => part.trim()).find((part) => part.startsWith(name))
      expect(directive("script-src ")).toBe(`script-src ${scripts.map(sha256).join(" ")}`)
      expect(directive("style-src ")).toContain(sha256(styles[0]!))
    }))
})

describe("sequence numbers are decimal integers only", () => {
  const bad = ["1e3", "0x1", "%201", "1.0", "-1", "01", "9007199254740992", "1%20"]
  it.live("afterSeq: anything else is a 400", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      for (const value of bad) {
        const audit = yield* server.request("GET", `/audit?afterSeq=${value}`)
        expect([value, audit.status, audit.json?._tag]).toEqual([value, 400, "HttpApiDecodeError"])
      }
      expect((yield* server.request("GET", "/audit?afterSeq=0")).status).toBe(200)
      expect((yield* server.request("GET", "/audit?afterSeq=9007199254740991")).status).toBe(200)
    }))

  it.live("Last-Event-ID: anything else is a 400", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      for (const value of ["1e3", "0x1", "1.0", "-1", "01", "9007199254740992"]) {
        const reply = yield* server.request("GET", "/audit/stream", { headers: { "last-event-id": value } })
        expect([value, reply.status, reply.json?._tag]).toEqual([value, 400, "HttpApiDecodeError"])
      }
      const stream = yield* server.request("GET", "/audit/stream?afterSeq=1e3")
      expect(stream.status).toBe(400)
    }))
})
