// A user's MCP client (the official SDK's Client over stdio) for the packaging tests: it starts the
// gateway given as its arguments (`node mcp-client.mjs COMMAND ARGS...`), lists the tools, calls
// `read_note` and `delete_note` once each, and prints what it got as one JSON object, with the
// errors its transport reported (a line on the gateway's stdout that is not an MCP message is one).
// The gateway's stderr is this process's.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"

const [command, ...args] = process.argv.slice(2)
const client = new Client({ name: "packaging-client", version: "1.0.0" })
const errors = []
client.onerror = (error) => errors.push(String(error))
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }))
try {
  const { tools } = await client.listTools()
  const allowed = await client.callTool({ name: "read_note", arguments: { name: "groceries" } })
  const denied = await client.callTool({ name: "delete_note", arguments: { name: "groceries" } })
  console.log(JSON.stringify({ tools: tools.map((tool) => tool.name).sort(), allowed, denied, errors }))
} finally {
  await client.close()
}
