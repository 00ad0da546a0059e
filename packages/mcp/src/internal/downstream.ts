/**
 * The downstream MCP server, reached through the official SDK's client: started as a child
 * process speaking stdio, or at a Streamable HTTP URL. Its tools are listed (every page) with
 * their input schemas compiled, and listed again when it says its list changed.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type Tool, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import * as InputSchemas from "./inputSchemas.js"

/** Where the downstream server is. */
export type Target =
  | { readonly _tag: "Command"; readonly command: string; readonly args: ReadonlyArray<string>; readonly cwd?: string }
  | { readonly _tag: "Url"; readonly url: string }

/** A downstream tool with its compiled input schema. */
export interface KnownTool {
  readonly tool: Tool
  readonly validator: InputSchemas.Validator
}

/** The connected downstream server. */
export interface Downstream {
  readonly client: Client
  /** the tools as last listed, by name */
  readonly tools: () => ReadonlyMap<string, KnownTool>
  /** called after the list was read again because the server said it changed */
  onToolsChanged: (() => void) | undefined
  /** called once when the connection to the server ends */
  onClose: (() => void) | undefined
  readonly close: () => Promise<void>
}

const transportFor = (target: Target): Transport => {
  if (target._tag === "Url") return new StreamableHTTPClientTransport(new URL(target.url))
  // the downstream server runs as if started directly: the whole environment, its logs on ours
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
  return new StdioClientTransport({
    command: target.command,
    args: [...target.args],
    env,
    stderr: "inherit",
    ...(target.cwd === undefined ? {} : { cwd: target.cwd })
  })
}

const listAll = async (client: Client): Promise<Map<string, KnownTool>> => {
  const tools = new Map<string, KnownTool>()
  let cursor: string | undefined
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor })
    for (const tool of page.tools) tools.set(tool.name, { tool, validator: InputSchemas.compile(tool.inputSchema) })
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return tools
}

/** Connects to the downstream server and lists its tools. */
export const connect = async (
  target: Target,
  clientInfo: { readonly name: string; readonly version: string }
): Promise<Downstream> => {
  const client = new Client(clientInfo, { capabilities: {} })
  await client.connect(transportFor(target))
  let tools = await listAll(client)
  const downstream: Downstream = {
    client,
    tools: () => tools,
    onToolsChanged: undefined,
    onClose: undefined,
    close: () => client.close()
  }
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    tools = await listAll(client)
    downstream.onToolsChanged?.()
  })
  client.onclose = () => downstream.onClose?.()
  return downstream
}
