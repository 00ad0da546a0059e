/**
 * Streamable HTTP sessions that outlive the gateway process. A session id is a random UUID
 * followed by what the client said when it initialized (its name,
 * version and whether it can elicit), so a gateway started again can take a request of a session
 * it never saw: it rebuilds the session from its id, and a call the client retries there gets the
 * same tool-gate session and the same call id, so it replays the answer given meanwhile.
 *
 * Knowing a session id is what lets a client act in that session, as with any MCP server: the UUID
 * is 122 random bits, and the tool-gate session key is a digest of it, so that nobody who reads
 * session keys (an auditor, the console) learns an id to act with. What follows the UUID is the
 * client's own claim about itself, trusted no more than the `clientInfo` it sends when
 * initializing.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js"
import { createHash, randomUUID, timingSafeEqual } from "node:crypto"
import type * as Calls from "./calls.js"
import * as Sessions from "./sessions.js"

/** What a session id carries besides its random part. */
interface Claimed {
  readonly name: string
  readonly version: string
  readonly elicitation: boolean
}

const idPattern = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{1,1024})$/

const sessionIdOf = (uuid: string, claimed: Claimed) =>
  `${uuid}.${Buffer.from(JSON.stringify([claimed.name, claimed.version, claimed.elicitation])).toString("base64url")}`

const parse = (id: string): { readonly uuid: string; readonly claimed: Claimed } | undefined => {
  const match = idPattern.exec(id)
  if (match === null) return undefined
  try {
    const value: unknown = JSON.parse(Buffer.from(match[2]!, "base64url").toString("utf8"))
    if (
      Array.isArray(value) && value.length === 3 && typeof value[0] === "string" && typeof value[1] === "string" &&
      typeof value[2] === "boolean"
    ) {
      return { uuid: match[1]!, claimed: { name: value[0], version: value[1], elicitation: value[2] } }
    }
  } catch {
    // not one of ours
  }
  return undefined
}

/** The tool-gate session of an MCP session: a digest of its secret part, never the part itself. */
const sessionKeyOf = (uuid: string) => `mcp-${createHash("sha256").update(uuid).digest("hex").slice(0, 32)}`

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** What an initialize request says of the client, read before the SDK handles it. */
const claimedBy = (body: unknown): Claimed => {
  const params = isRecord(body) && isRecord(body.params) ? body.params : {}
  const info = isRecord(params.clientInfo) ? params.clientInfo : {}
  const text = (u: unknown, fallback: string) => typeof u === "string" ? u.slice(0, 200) : fallback
  return {
    name: text(info.name, "unknown"),
    version: text(info.version, "0"),
    elicitation: isRecord(params.capabilities) && params.capabilities.elicitation !== undefined
  }
}

interface Entry {
  readonly transport: WebStandardStreamableHTTPServerTransport
  readonly server: Server
  /** whether a call of the session is running or waiting */
  readonly busy: () => boolean
  lastSeen: number
}

const jsonRpcError = (status: number, code: number, message: string) =>
  new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), {
    status,
    headers: { "content-type": "application/json" }
  })

const sameSecret = (given: string, expected: string) => {
  const digest = (text: string) => createHash("sha256").update(text).digest()
  return timingSafeEqual(digest(given), digest(expected))
}

/**
 * The sessions of one gateway and the fetch handler that serves them at `/mcp`; with `token`, a
 * request must carry it as `Authorization: Bearer TOKEN`.
 */
export const make = (gateway: Calls.Gateway, options: { readonly token?: string | undefined } = {}) => {
  const entries = new Map<string, Entry>()
  // two requests of one unknown session may come at once: it is restored once
  const restoring = new Map<string, Promise<Entry>>()

  const open = async (sessionId: string | undefined, claimed: () => Claimed): Promise<Entry> => {
    const uuid = sessionId === undefined ? randomUUID() : parse(sessionId)!.uuid
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => sessionId ?? sessionIdOf(uuid, claimed()),
      onsessioninitialized: (id) => void entries.set(id, entry),
      onsessionclosed: (id) => void entries.delete(id)
    })
    const { busy, server } = Sessions.make(gateway, { sessionKey: sessionKeyOf(uuid) })
    const entry: Entry = { transport, server, busy, lastSeen: Date.now() }
    transport.onclose = () => {
      if (transport.sessionId !== undefined) entries.delete(transport.sessionId)
    }
    await server.connect(transport)
    return entry
  }

  const post = (url: string, body: unknown, sessionId?: string) =>
    new Request(url, {
      method: "POST",
      headers: {
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        ...(sessionId === undefined
          ? {}
          : { "mcp-session-id": sessionId, "mcp-protocol-version": LATEST_PROTOCOL_VERSION })
      },
      body: JSON.stringify(body)
    })

  /** A session this process never saw (it started after the session did): initialized as its id says. */
  const restore = async (url: string, sessionId: string, claimed: Claimed): Promise<Entry> => {
    const entry = await open(sessionId, () => claimed)
    const initialize = {
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: claimed.elicitation ? { elicitation: {} } : {},
        clientInfo: { name: claimed.name, version: claimed.version }
      }
    }
    await (await entry.transport.handleRequest(post(url, initialize))).text()
    await (await entry.transport.handleRequest(
      post(url, { jsonrpc: "2.0", method: "notifications/initialized" }, sessionId)
    )).text()
    return entry
  }

  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url)
    if (url.pathname !== "/mcp") return new Response("not found: the MCP endpoint is /mcp\n", { status: 404 })
    // a page in a browser may post to a loopback address (DNS rebinding): only same-origin callers
    const origin = request.headers.get("origin")
    if (origin !== null && origin !== url.origin) {
      return jsonRpcError(403, -32000, `requests from origin ${origin} are not accepted`)
    }
    if (options.token !== undefined) {
      const given = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1]
      if (given === undefined || !sameSecret(given, options.token)) {
        return new Response(
          JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Unauthorized" }, id: null }),
          {
            status: 401,
            headers: { "content-type": "application/json", "www-authenticate": "Bearer" }
          }
        )
      }
    }
    const sessionId = request.headers.get("mcp-session-id")
    if (sessionId === null) {
      if (request.method !== "POST") return jsonRpcError(400, -32000, "Bad Request: no session id")
      const body: unknown = await request.json().catch(() => undefined)
      const entry = await open(undefined, () => claimedBy(body))
      const response = await entry.transport.handleRequest(request, { parsedBody: body })
      // not an initialize request: the SDK refused it and no session began
      if (entry.transport.sessionId === undefined) await entry.server.close()
      return response
    }
    let entry = entries.get(sessionId)
    if (entry === undefined) {
      const known = parse(sessionId)
      if (known === undefined) return jsonRpcError(404, -32001, "Session not found")
      let restored = restoring.get(sessionId)
      if (restored === undefined) {
        restored = restore(url.href, sessionId, known.claimed).finally(() => restoring.delete(sessionId))
        restoring.set(sessionId, restored)
      }
      entry = await restored
    }
    entry.lastSeen = Date.now()
    return entry.transport.handleRequest(request)
  }

  /**
   * Closes the sessions no request came for in `idleMs` and with no call running. Nothing is lost:
   * a request with the id later restores the session (its session approvals are in the store).
   */
  const closeIdle = async (idleMs: number): Promise<number> => {
    const now = Date.now()
    const idle = Array.from(entries.values()).filter((entry) => !entry.busy() && now - entry.lastSeen > idleMs)
    await Promise.all(idle.map((entry) => entry.server.close().catch(() => undefined)))
    return idle.length
  }

  const close = async () => {
    await Promise.all(Array.from(entries.values(), (entry) => entry.server.close()))
    entries.clear()
  }

  const toolsChanged = () => {
    for (const entry of entries.values()) void entry.server.sendToolListChanged().catch(() => undefined)
  }

  return { handle, close, closeIdle, toolsChanged }
}
