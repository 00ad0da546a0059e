// A tiny downstream MCP server for the packaging tests (the official SDK's McpServer and zod, both
// installed as dependencies of @tool-gate/mcp): `read_note` answers with the note, `delete_note`
// would delete it. Every call it runs is appended to the file named by argv[2], so a test can tell
// that a denied call never reached it.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { appendFileSync } from "node:fs"
import { z } from "zod"

const ran = (name, args) => appendFileSync(process.argv[2], `${JSON.stringify({ name, args })}\n`)

const server = new McpServer({ name: "notes", version: "1.0.0" })
server.registerTool("read_note", {
  description: "Read a note",
  inputSchema: { name: z.string() }
}, ({ name }) => {
  ran("read_note", { name })
  return { content: [{ type: "text", text: `note ${name}: buy milk` }] }
})
server.registerTool("delete_note", {
  description: "Delete a note",
  inputSchema: { name: z.string() }
}, ({ name }) => {
  ran("delete_note", { name })
  return { content: [{ type: "text", text: `deleted ${name}` }] }
})
await server.connect(new StdioServerTransport())
