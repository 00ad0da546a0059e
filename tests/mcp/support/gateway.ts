/**
 * The MCP gateway as clients meet it: `toolgate mcp` in a real Node process (the repository's
 * launcher, built bundle), in front of tests/mcp/support/filesServer.mjs on a temp folder, with
 * the official SDK's client on the other side, over stdio or Streamable HTTP. Approvals come
 * from `toolgate approve` / `deny` in other processes, as an operator would give them.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { afterEach } from "bun:test"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { bin, type Running, start, toolgate, toolgateJson } from "../../cli/support/cli.js"

export const root = fileURLToPath(new URL("../../..", import.meta.url))
export const filesServer = fileURLToPath(new URL("./filesServer.mjs", import.meta.url))

/** Reads are allowed, deletes denied, writes wait for a person (`soon-*` only 1.5 s), `secret*` never. */
export const policyYaml = `
default: deny
allow: [read_file, count]
deny:
  - id: no-delete
    tool: delete_file
    reason: deleting files is not allowed here
  - id: no-secrets
    tool: write_file
    args:
      path: "secret*"
    reason: secrets are read-only
requireApproval:
  - id: soon
    tool: write_file
    args:
      path: "soon-*"
    ttlMs: 1500
  - id: writes
    tool: write_file
`

/** A temp folder the downstream server works in, with the policy and the database beside it. */
export interface Folder {
  readonly dir: string
  readonly files: string
  readonly db: string
  readonly policy: string
  /** every call the downstream server ran, in order */
  readonly ran: () => ReadonlyArray<{ readonly name: string; readonly args: Record<string, unknown> }>
  readonly read: (name: string) => string | undefined
  /** the `write_file` calls of `name` the server ran */
  readonly writes: (name: string) => ReadonlyArray<{ readonly name: string; readonly args: Record<string, unknown> }>
  readonly close: () => void
}

export const folder = (policy = policyYaml): Folder => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-mcp-"))
  const files = join(dir, "files")
  Bun.spawnSync(["mkdir", "-p", files])
  writeFileSync(join(files, "notes.txt"), "the notes\n")
  writeFileSync(join(dir, "policy.yaml"), policy)
  const log = join(files, ".calls.log")
  const ran = () =>
    existsSync(log)
      ? readFileSync(log, "utf8").trim().split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))
      : []
  return {
    dir,
    files,
    db: join(dir, "toolgate.db"),
    policy: join(dir, "policy.yaml"),
    ran,
    writes: (name) => ran().filter((entry) => entry.name === "write_file" && entry.args.path === name),
    read: (name) => existsSync(join(files, name)) ? readFileSync(join(files, name), "utf8") : undefined,
    close: () => rmSync(dir, { recursive: true, force: true })
  }
}

/** The environment without the user's own TOOLGATE_* settings. */
const environment = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("TOOLGATE_")) env[key] = value
  }
  return env
}

/** `toolgate mcp` arguments for `f`'s store and policy, before `extra` and the downstream command. */
export const gatewayArgs = (f: Folder, extra: ReadonlyArray<string> = []) => [
  "mcp",
  "--policy",
  f.policy,
  "--db",
  f.db,
  ...extra
]

export interface Connected {
  readonly client: Client
  /** the gateway process (stdio) */
  readonly pid: number | undefined
  readonly stderr: () => string
  /** what the client's transport could not read: anything but MCP messages on the gateway's stdout */
  readonly unreadable: () => ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/** An SDK client that starts `toolgate mcp ... -- node filesServer.mjs FILES` over stdio. */
export const stdioClient = async (
  f: Folder,
  options: {
    readonly extra?: ReadonlyArray<string>
    readonly name?: string
    readonly capabilities?: ConstructorParameters<typeof Client>[1]
  } = {}
): Promise<Connected> => {
  const transport = new StdioClientTransport({
    command: "node",
    args: [bin, ...gatewayArgs(f, options.extra), "--", "node", filesServer, f.files],
    cwd: root,
    env: environment(),
    stderr: "pipe"
  })
  let err = ""
  transport.stderr?.on("data", (chunk) => void (err += String(chunk)))
  const client = new Client({ name: options.name ?? "test-agent", version: "1.0.0" }, options.capabilities)
  const unreadable: Array<string> = []
  client.onerror = (error) => void unreadable.push(error.message)
  await client.connect(transport)
  return {
    client,
    pid: transport.pid ?? undefined,
    stderr: () => err,
    unreadable: () => unreadable,
    close: () => client.close()
  }
}

/**
 * The stdio gateways of the test running now, on its folder (`current()`): `connect` starts one;
 * after each test every gateway is closed and the folder removed.
 */
export const stdioGateways = (current: () => Folder | undefined) => {
  const open: Array<Connected> = []
  afterEach(async () => {
    const connections = open.splice(0)
    await Promise.all(connections.map((connected) => connected.close().catch(() => undefined)))
    current()?.close()
    // every test also checks that the gateway wrote nothing but MCP messages on its stdout
    const unreadable = connections.flatMap((connected) => connected.unreadable()).filter((m) => /JSON|parse/i.test(m))
    if (unreadable.length > 0) throw new Error(`the gateway wrote other things on stdout: ${unreadable.join("; ")}`)
  })
  return {
    connect: async (options?: Parameters<typeof stdioClient>[1]) => {
      const connected = await stdioClient(current()!, options)
      open.push(connected)
      return connected
    }
  }
}

/** A free loopback port (for a gateway that must come back on the same one). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

/** `toolgate mcp --http PORT` in front of filesServer.mjs over stdio; resolves once it serves. */
export const httpGateway = async (
  f: Folder,
  port: number,
  extra: ReadonlyArray<string> = []
): Promise<Running & { readonly url: string }> => {
  const running = start([...gatewayArgs(f, ["--http", String(port), ...extra]), "--", "node", filesServer, f.files])
  const url = `http://127.0.0.1:${port}/mcp`
  const deadline = Date.now() + 20_000
  while (!running.stderr().includes("serving http://")) {
    if (Date.now() > deadline) throw new Error(`toolgate mcp --http did not start: ${running.stderr()}`)
    await Bun.sleep(50)
  }
  return { ...running, url }
}

/** An SDK client over Streamable HTTP (with `token` as its bearer token). */
export const httpClient = async (
  url: string,
  options: {
    readonly name?: string
    readonly capabilities?: ConstructorParameters<typeof Client>[1]
    readonly token?: string
  } = {}
) => {
  const transport = new StreamableHTTPClientTransport(
    new URL(url),
    options.token === undefined ? undefined : { requestInit: { headers: { authorization: `Bearer ${options.token}` } } }
  )
  const client = new Client({ name: options.name ?? "test-agent", version: "1.0.0" }, options.capabilities)
  await client.connect(transport)
  return { client, transport, close: () => client.close() }
}

/**
 * Calls a tool, with progress notifications resetting the client's timeout (as the README
 * advises); `timeoutMs` (default 30 s) is how long the client waits without a word.
 */
export const call = (
  client: Client,
  name: string,
  args: Record<string, unknown>,
  onProgress?: (message: string | undefined) => void,
  timeoutMs = 30_000
): Promise<CallToolResult> =>
  client.callTool({ name, arguments: args }, undefined, {
    timeout: timeoutMs,
    resetTimeoutOnProgress: true,
    onprogress: (progress) => onProgress?.(progress.message)
  }) as Promise<CallToolResult>

/** The text of a result's first content item. */
export const textOf = (result: CallToolResult) => {
  const first = result.content[0]
  return first !== undefined && first.type === "text" ? first.text : ""
}

/** The pending requests on `f`'s store, as `toolgate pending --json` lists them. */
export const pending = (f: Folder): Promise<Array<any>> => toolgateJson(["pending", "--db", f.db])

/** Waits until `count` requests are pending on `f`'s store (the gateway paused the call). */
export const pendingSoon = async (f: Folder, count = 1): Promise<Array<any>> => {
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    if (existsSync(f.db)) {
      const list = await pending(f)
      if (list.length >= count) return list
    }
    await Bun.sleep(100)
  }
  throw new Error(`fewer than ${count} pending request(s) on ${f.db}`)
}

/** `toolgate ARGS --db F` in its own process, failing loudly. */
export const operator = async (f: Folder, args: ReadonlyArray<string>) => {
  const result = await toolgate([...args, "--db", f.db])
  if (result.code !== 0) throw new Error(`toolgate ${args.join(" ")} exited ${result.code}: ${result.stderr}`)
  return result
}
