/**
 * The MCP gateway over Streamable HTTP: `toolgate mcp --http PORT` (a real Node process) with
 * SDK clients over HTTP, in front of the files server over stdio or at its own HTTP URL.
 */
import { afterEach, describe, expect, test } from "bun:test"
import type { Running } from "../cli/support/cli.js"
import { start } from "../cli/support/cli.js"
import {
  call,
  filesServer,
  type Folder,
  folder,
  freePort,
  gatewayArgs,
  httpClient,
  httpGateway,
  operator,
  pending,
  pendingSoon,
  textOf
} from "./support/gateway.js"

let f: Folder
const running: Array<Running> = []
const closing: Array<() => Promise<void>> = []

afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close().catch(() => undefined)))
  await Promise.all(running.splice(0).map((r) => r.stop()))
  f?.close()
})

const gateway = async (port: number, extra: ReadonlyArray<string> = []) => {
  const started = await httpGateway(f, port, extra)
  running.push(started)
  return started
}

const client = async (url: string, name?: string, token?: string) => {
  const connected = await httpClient(url, {
    ...(name === undefined ? {} : { name }),
    ...(token === undefined ? {} : { token })
  })
  closing.push(connected.close)
  return connected
}

describe("toolgate mcp over Streamable HTTP", () => {
  test("allowed, denied by policy, approved by an operator: each as over stdio", async () => {
    f = folder()
    const { url } = await gateway(await freePort())
    const { client: c } = await client(url)
    expect((await c.listTools()).tools.map((tool) => tool.name)).toContain("write_file")
    expect(textOf(await call(c, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    const denied = await call(c, "delete_file", { path: "notes.txt" })
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("deleting files is not allowed here")
    const progress: Array<string | undefined> = []
    const waiting = call(c, "write_file", { path: "web.txt", content: "over http" }, (m) => progress.push(m))
    const [request] = await pendingSoon(f)
    await operator(f, ["approve", request.requestId])
    expect((await waiting).isError).toBeUndefined()
    expect(f.read("web.txt")).toBe("over http")
    expect(f.writes("web.txt")).toHaveLength(1)
    expect(progress.some((message) => message?.includes(request.requestId))).toBe(true)
  })

  test("a denial and an expiry reach the model as tool errors; nothing runs", async () => {
    f = folder()
    const { url } = await gateway(await freePort())
    const { client: c } = await client(url)
    const waiting = call(c, "write_file", { path: "no.txt", content: "x" })
    const [request] = await pendingSoon(f)
    await operator(f, ["deny", request.requestId, "--reason", "use the staging folder"])
    const denied = await waiting
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("use the staging folder")
    const expired = await call(c, "write_file", { path: "soon-2.txt", content: "x" })
    expect(expired.isError).toBe(true)
    expect(textOf(expired)).toContain("nobody answered")
    expect(f.ran()).toEqual([])
  })

  test("each MCP session is its own tool-gate session: a session approval covers that client only", async () => {
    f = folder()
    const { url } = await gateway(await freePort())
    const a = await client(url, "agent-a")
    const b = await client(url, "agent-b")
    const args = { path: "shared.txt", content: "a" }
    const first = call(a.client, "write_file", args)
    const [request] = await pendingSoon(f)
    expect(request.toolCall.agentId).toBe("agent-a@1.0.0")
    await operator(f, ["approve", request.requestId, "--session"])
    expect((await first).isError).toBeUndefined()
    expect((await call(a.client, "write_file", args)).isError).toBeUndefined()
    const other = call(b.client, "write_file", args)
    const [asked] = await pendingSoon(f)
    expect(asked.toolCall.agentId).toBe("agent-b@1.0.0")
    expect(asked.toolCall.sessionKey).not.toBe(request.toolCall.sessionKey)
    await operator(f, ["deny", asked.requestId])
    expect((await other).isError).toBe(true)
    expect(f.writes("shared.txt")).toHaveLength(2)
    // the session key an auditor reads does not give away the id that acts in the session
    for (const [session, key] of [[a, request.toolCall.sessionKey], [b, asked.toolCall.sessionKey]] as const) {
      const secret = session.transport.sessionId!.split(".")[0]!
      expect(secret).toMatch(/^[0-9a-f-]{36}$/)
      expect(key).not.toContain(secret)
    }
  })

  test("killed while a call waits: listed and answerable meanwhile; restarted, the client's session goes on and its retry replays the answer once", async () => {
    f = folder()
    const port = await freePort()
    const first = await gateway(port)
    const { client: c } = await client(first.url)
    const args = { path: "kept.txt", content: "kept" }
    // over HTTP the SDK's client learns of a lost call only when it has waited its timeout without
    // a word (progress comes every 5 seconds while the gateway lives)
    const waiting = call(c, "write_file", args, undefined, 7_000)
    const [request] = await pendingSoon(f)
    await first.stop()
    await expect(waiting).rejects.toThrow(/timed out/)
    expect((await pending(f)).map((r) => r.requestId)).toEqual([request.requestId])
    await operator(f, ["approve", request.requestId])
    await gateway(port)
    // the same client object, the same Mcp-Session-Id: the gateway restores the session
    const retried = await call(c, "write_file", args)
    expect(retried.isError).toBeUndefined()
    expect(f.read("kept.txt")).toBe("kept")
    expect(f.writes("kept.txt")).toHaveLength(1)
    expect(await pending(f)).toEqual([])
  })

  test("a made-up session id is not found; a page of another origin is refused", async () => {
    f = folder()
    const { url } = await gateway(await freePort())
    const made = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": "not-a-session"
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
    })
    expect(made.status).toBe(404)
    const foreign = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        origin: "http://evil.example"
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "page", version: "1" } }
      })
    })
    expect(foreign.status).toBe(403)
  })

  test("--token: a request without the bearer token, or with another, is refused (401); with it, calls go through", async () => {
    f = folder()
    const token = "s3cret-token-of-the-gateway"
    const { url } = await gateway(await freePort(), ["--token", token])
    const initialize = (authorization?: string) =>
      fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...(authorization === undefined ? {} : { authorization })
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } }
        })
      })
    const missing = await initialize()
    expect(missing.status).toBe(401)
    expect(missing.headers.get("www-authenticate")).toBe("Bearer")
    expect((await initialize(`Bearer ${token}x`)).status).toBe(401)
    expect((await initialize(token)).status).toBe(401)
    const { client: c } = await client(url, undefined, token)
    expect(textOf(await call(c, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    // a client without it cannot even start a session
    await expect(httpClient(url)).rejects.toThrow()
  })

  test("an idle session is closed and comes back with its next request: its session approvals still hold", async () => {
    f = folder()
    const started = await gateway(await freePort(), ["--session-idle", "300ms"])
    const { client: c } = await client(started.url)
    const args = { path: "idle.txt", content: "x" }
    const first = call(c, "write_file", args)
    const [request] = await pendingSoon(f)
    // a session with a call waiting is not idle, however long it waits
    await Bun.sleep(900)
    expect(started.stderr()).not.toContain("idle MCP session")
    await operator(f, ["approve", request.requestId, "--session"])
    expect((await first).isError).toBeUndefined()
    const deadline = Date.now() + 10_000
    while (!started.stderr().includes("closed 1 idle MCP session") && Date.now() < deadline) await Bun.sleep(50)
    expect(started.stderr()).toContain("closed 1 idle MCP session")
    // the same client goes on: restored, same tool-gate session, so its session approval covers this
    expect((await call(c, "write_file", args)).isError).toBeUndefined()
    expect(f.writes("idle.txt")).toHaveLength(2)
    expect(await pending(f)).toEqual([])
  })

  test("a downstream server at a Streamable HTTP URL (--downstream)", async () => {
    f = folder()
    const downstream = Bun.spawn(["node", filesServer, f.files, "--http"], { stdout: "pipe", stderr: "inherit" })
    closing.push(async () => {
      downstream.kill()
      await downstream.exited
    })
    const reader = downstream.stdout.pipeThrough(new TextDecoderStream()).getReader()
    let out = ""
    while (!out.includes("\n")) out += (await reader.read()).value ?? ""
    const downstreamUrl = out.trim().replace(/^listening /, "")
    const port = await freePort()
    const started = start([...gatewayArgs(f, ["--http", String(port), "--downstream", downstreamUrl])])
    running.push(started)
    const deadline = Date.now() + 20_000
    while (!started.stderr().includes("serving http://") && Date.now() < deadline) await Bun.sleep(50)
    const { client: c } = await client(`http://127.0.0.1:${port}/mcp`)
    expect(textOf(await call(c, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    const denied = await call(c, "write_file", { path: "secret.key", content: "x" })
    expect(textOf(denied)).toContain("secrets are read-only")
    expect(f.ran().map((entry) => entry.name)).toEqual(["read_file"])
  })
})
