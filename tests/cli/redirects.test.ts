/**
 * `toolgate` against a server that answers with a redirect: the CLI follows none. A redirect could
 * lead to another host whose answer ("no pending approvals") would be shown as the server's, or
 * turn an approval into a request the server never sees; so the command says the server answered
 * with a redirect, where it leads, sends nothing further and exits 8. Real HTTP servers on loopback:
 * one that redirects, one at the other end that would answer and must receive no request.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test"
import { type AddressInfo, createServer } from "node:net"
import { toolgate } from "./support/cli.js"

interface Seen {
  readonly method: string
  readonly path: string
  readonly authorization: string | null
}

const token = "approver-token-0123456789"
const elsewhere: Array<Seen> = []
const redirector: Array<Seen> = []
const seen = (request: Request): Seen => ({
  method: request.method,
  path: new URL(request.url).pathname,
  authorization: request.headers.get("authorization")
})

// What another host would answer: no pending approvals, an empty audit log, any answer accepted.
const other = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (request) => {
    elsewhere.push(seen(request))
    return Response.json([])
  }
})
const otherUrl = `http://127.0.0.1:${other.port}`

let status = 302
// The audit stream's first connection succeeds and ends at once (a restart), later ones redirect.
let streamConnections = 0
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (request) => {
    const entry = seen(request)
    redirector.push(entry)
    if (entry.path === "/audit/stream" && streamConnections++ === 0) {
      return new Response("", { status: 200, headers: { "content-type": "text/event-stream" } })
    }
    return new Response(null, { status, headers: { location: `${otherUrl}${entry.path}` } })
  }
})
const url = `http://127.0.0.1:${server.port}`
const remote = ["--server", url, "--token", token]

beforeAll(() => {
  elsewhere.length = 0
})

afterEach(() => {
  redirector.length = 0
  streamConnections = 0
})

afterAll(async () => {
  await server.stop(true)
  await other.stop(true)
})

const commands: Array<readonly [string, ReadonlyArray<string>, string, string]> = [
  ["pending", ["pending"], "GET", "/approvals/pending"],
  ["audit", ["audit"], "GET", "/audit"],
  ["approve", ["approve", "req-1"], "POST", "/approvals/req-1/respond"],
  ["deny", ["deny", "req-1", "--reason", "no"], "POST", "/approvals/req-1/respond"]
]

describe("a server that answers with a redirect", () => {
  for (const code of [301, 302, 307, 308]) {
    for (const [name, args, method, path] of commands) {
      test(`${code} to ${name}: the redirect is reported, not followed`, async () => {
        status = code
        const result = await toolgate([...args, ...remote])
        expect(result.stdout).toBe("")
        expect(result.stderr).toBe(
          `toolgate: Server ${url}: answered ${method} ${path} with a redirect (${code}) to ${otherUrl}${path};`
            + " toolgate follows no redirect: give --server the URL that answers itself\n"
        )
        expect(result.code).toBe(8)
        expect(redirector.map((r) => [r.method, r.path, r.authorization])).toEqual([
          [method, path, `Bearer ${token}`]
        ])
        expect(elsewhere).toEqual([])
      })
    }
  }

  test("audit --follow stops at a redirect when it reconnects, rather than retrying", async () => {
    status = 307
    const result = await toolgate(["audit", "--follow", ...remote])
    expect(result.stderr).toBe(
      `toolgate: Server ${url}: answered GET /audit/stream with a redirect (307) to ${otherUrl}/audit/stream;`
        + " toolgate follows no redirect: give --server the URL that answers itself\n"
    )
    expect(result.code).toBe(8)
    expect(redirector.map((r) => r.path)).toEqual(["/audit/stream", "/audit/stream"])
    expect(elsewhere).toEqual([])
  }, 30_000)

  test("audit --follow meeting a redirect at once stops with the same report", async () => {
    status = 308
    streamConnections = 1
    const result = await toolgate(["audit", "--follow", ...remote])
    expect(result.stderr).toContain(`answered GET /audit/stream with a redirect (308) to ${otherUrl}/audit/stream`)
    expect(result.code).toBe(8)
    expect(redirector.map((r) => r.path)).toEqual(["/audit/stream"])
    expect(elsewhere).toEqual([])
  }, 30_000)

  test("a redirect with no Location says so", async () => {
    status = 302
    const bare = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response(null, { status: 303 })
    })
    try {
      const result = await toolgate(["pending", "--server", `http://127.0.0.1:${bare.port}`, "--token", token])
      expect(result.stderr).toBe(
        `toolgate: Server http://127.0.0.1:${bare.port}: answered GET /approvals/pending with a redirect (303)`
          + " with no location; toolgate follows no redirect: give --server the URL that answers itself\n"
      )
      expect(result.code).toBe(8)
    } finally {
      await bare.stop(true)
    }
  })

  test("a Location carrying control characters is printed escaped, as every line", async () => {
    // Raw bytes on a socket: HTTP libraries refuse to send such a header, a hostile server need not.
    const raw = createServer((socket) => {
      socket.once("data", () => {
        socket.end(Buffer.from(
          "HTTP/1.1 302 Found\r\nlocation: /\u009b2J\u009b1;1H\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
          "latin1"
        ))
      })
    })
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve))
    const rawUrl = `http://127.0.0.1:${(raw.address() as AddressInfo).port}`
    try {
      const result = await toolgate(["pending", "--server", rawUrl, "--token", token])
      expect(result.code).toBe(8)
      expect(result.stderr).toBe(
        `toolgate: Server ${rawUrl}: answered GET /approvals/pending with a redirect (302) to /\\u009b2J\\u009b1;1H;`
          + " toolgate follows no redirect: give --server the URL that answers itself\n"
      )
      expect(result.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/)
    } finally {
      await new Promise((resolve) => raw.close(resolve))
    }
  })
})
