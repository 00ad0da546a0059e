// A small real MCP server (the official SDK's McpServer) over a folder, started by the gateway
// as its downstream: `node filesServer.mjs DIR` speaks stdio; `node filesServer.mjs DIR --http`
// serves Streamable HTTP on a free loopback port and prints `listening URL` on stdout.
// Every call it runs is appended to DIR/.calls.log, so tests count what ran.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { appendFileSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import { join, resolve, sep } from "node:path"
import { z } from "zod"

const root = resolve(process.argv[2])
const inside = (path) => {
  const full = resolve(root, path)
  if (full !== root && !full.startsWith(root + sep)) throw new Error(`outside the folder: ${path}`)
  return full
}
const logCall = (name, args) => appendFileSync(join(root, ".calls.log"), `${JSON.stringify({ name, args })}\n`)
const text = (value) => ({ content: [{ type: "text", text: value }] })

const makeServer = () => {
  const server = new McpServer({ name: "files", version: "1.0.0" })
  server.registerTool("read_file", {
    description: "Read a file of the folder",
    inputSchema: { path: z.string() }
  }, ({ path }) => {
    logCall("read_file", { path })
    return text(readFileSync(inside(path), "utf8"))
  })
  server.registerTool("write_file", {
    description: "Write a file of the folder",
    inputSchema: { path: z.string(), content: z.string() }
  }, ({ path, content }) => {
    logCall("write_file", { path, content })
    writeFileSync(inside(path), content)
    return text(`wrote ${content.length} characters to ${path}`)
  })
  server.registerTool("delete_file", {
    description: "Delete a file of the folder",
    inputSchema: { path: z.string() }
  }, ({ path }) => {
    logCall("delete_file", { path })
    writeFileSync(inside(path), "")
    return text(`emptied ${path}`)
  })
  server.registerTool("count", {
    description: "Counts to n, reporting progress, with structured output",
    inputSchema: { n: z.number().int().min(1).max(5) },
    outputSchema: { counted: z.number() }
  }, async ({ n }, extra) => {
    logCall("count", { n })
    const token = extra._meta?.progressToken
    for (let i = 1; i <= n; i++) {
      if (token !== undefined) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken: token, progress: i, total: n }
        })
      }
    }
    return { content: [{ type: "text", text: `counted to ${n}` }], structuredContent: { counted: n } }
  })
  server.registerTool("stop_server", {
    description: "Ends this server's process (its client sees it go)",
    inputSchema: {}
  }, () => {
    logCall("stop_server", {})
    setTimeout(() => process.exit(0), 10)
    return text("stopping")
  })
  server.registerTool("enable_shout", {
    description: "Adds the shout tool (the server's tool list changes)",
    inputSchema: {}
  }, () => {
    logCall("enable_shout", {})
    server.registerTool("shout", {
      description: "Says the text louder",
      inputSchema: { text: z.string().max(20) }
    }, ({ text: said }) => {
      logCall("shout", { text: said })
      return text(said.toUpperCase())
    })
    return text("shout is listed now")
  })
  return server
}

if (process.argv.includes("--http")) {
  const transports = new Map()
  const http = createServer(async (req, res) => {
    const chunks = []
    for await (const chunk of req) chunks.push(chunk)
    const body = chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString("utf8"))
    const id = req.headers["mcp-session-id"]
    let transport = typeof id === "string" ? transports.get(id) : undefined
    if (transport === undefined) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (sessionId) => transports.set(sessionId, transport)
      })
      await makeServer().connect(transport)
    }
    await transport.handleRequest(req, res, body)
  })
  http.listen(0, "127.0.0.1", () => process.stdout.write(`listening http://127.0.0.1:${http.address().port}/mcp\n`))
} else {
  await makeServer().connect(new StdioServerTransport())
}
