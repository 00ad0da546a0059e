/**
 * The console's page and assets over plain HTTP (no browser): public, self-contained, strict
 * about what it may load; the data behind it still needs a token.
 */
import { expect } from "bun:test"
import { Effect } from "effect"
import { startServer } from "../server/support/server.js"
import { describe, it } from "../support/effectTest.js"

describe("web console page", () => {
  it.live("is public static HTML with its own script and style only; the data needs the token", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const page = yield* server.request("GET", "/console", { token: null })
      expect(page.status).toBe(200)
      expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(page.headers.get("content-security-policy")).toContain("script-src 'self'")
      expect(page.text).not.toMatch(/https?:\/\//)
      const script = yield* server.request("GET", "/console/console.js", { token: null })
      expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
      const root = yield* Effect.promise(() => fetch(`${server.url}/`, { redirect: "manual" }))
      expect([root.status, root.headers.get("location")]).toEqual([302, "/console"])
      expect((yield* server.request("GET", "/approvals/pending", { token: null })).status).toBe(401)
    }))
})
