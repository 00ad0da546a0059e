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

  it.live("every module the page imports, and every module they import, is served as JavaScript with the page's headers", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const page = yield* server.request("GET", "/console", { token: null })
      const entries = [...page.text.matchAll(/<script type="module" src="([^"]+)"><\/script>/g)].map((match) =>
        match[1]!
      )
      expect(entries).toEqual(["/console/console.js"])
      const seen = new Set<string>()
      const pending = [...entries]
      while (pending.length > 0) {
        const path = pending.pop()!
        if (seen.has(path)) continue
        seen.add(path)
        const module = yield* server.request("GET", path, { token: null })
        expect([path, module.status]).toEqual([path, 200])
        expect(module.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
        expect(module.headers.get("x-content-type-options")).toBe("nosniff")
        expect(module.headers.get("content-security-policy")).toContain("script-src 'self'")
        for (const [, specifier] of module.text.matchAll(/^import [^"]* from "([^"]+)"$/gm)) {
          // relative, so same origin: the CSP allows nothing else
          expect(specifier).toStartWith("./")
          pending.push(new URL(specifier!, `http://console${path}`).pathname)
        }
      }
      // the page is split in modules, the hidden-character list shared with the CLI among them
      expect(seen.size).toBeGreaterThan(5)
      expect(seen.has("/console/hiddenCharacters.js")).toBe(true)
      // the types beside that list are for the CLI's compiler, not served
      expect((yield* server.request("GET", "/console/hiddenCharacters.d.ts", { token: null })).status).toBe(404)
    }))
})
