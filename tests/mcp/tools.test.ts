/**
 * What the MCP gateway's policy judges: the downstream tools as listed now (a tool the server adds
 * later is listed, checked and judged too), under their own names or as `mcp__SERVER__TOOL`
 * (`--name`), with rules imported from a Claude Code settings file; and the policy's rules that
 * no listed tool has are warned about when the gateway starts.
 */
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, test } from "bun:test"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { toolgate } from "../cli/support/cli.js"
import { call, type Folder, folder, operator, pendingSoon, stdioGateways, textOf } from "./support/gateway.js"

let f: Folder
const { connect } = stdioGateways(() => f)

describe("the tools the MCP gateway judges", () => {
  test("a tool the server adds while running is announced, listed, checked against its schema and judged", async () => {
    f = folder(`
default: deny
allow: [enable_shout]
requireApproval: [shout]
`)
    const { client } = await connect()
    let changed = 0
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++)
    expect((await client.listTools()).tools.map((tool) => tool.name)).not.toContain("shout")
    expect(textOf(await call(client, "enable_shout", {}))).toBe("shout is listed now")
    const deadline = Date.now() + 10_000
    while (changed === 0 && Date.now() < deadline) await Bun.sleep(20)
    expect(changed).toBeGreaterThan(0)
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain("shout")
    // its schema is known: too long a text never reaches anybody
    const tooLong = await call(client, "shout", { text: "x".repeat(21) })
    expect(textOf(tooLong)).toContain("input schema")
    // and the policy judges it
    const waiting = call(client, "shout", { text: "hello" })
    const [request] = await pendingSoon(f)
    expect(request.toolCall.name).toBe("shout")
    await operator(f, ["approve", request.requestId])
    expect(textOf(await waiting)).toBe("HELLO")
    expect(f.ran().map((entry) => entry.name)).toEqual(["enable_shout", "shout"])
  })

  test("--name: tools judged as mcp__SERVER__TOOL, with rules imported from a Claude Code settings file", async () => {
    f = folder()
    const settings = join(f.dir, "settings.json")
    writeFileSync(
      settings,
      JSON.stringify({
        permissions: {
          allow: ["mcp__files__read_file"],
          ask: ["mcp__files__write_file"],
          deny: ["mcp__files__delete_file"]
        }
      })
    )
    const imported = await toolgate(["policy", "import", "--from", "claude", settings, "--out", f.policy])
    expect(imported.code).toBe(0)
    const { client } = await connect({ extra: ["--name", "files"] })
    expect(textOf(await call(client, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    const denied = await call(client, "delete_file", { path: "notes.txt" })
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("claude.deny[0]")
    const waiting = call(client, "write_file", { path: "asked.txt", content: "x" })
    const [request] = await pendingSoon(f)
    expect(request.toolCall.name).toBe("mcp__files__write_file")
    expect(request.rule.id).toBe("claude.ask[0]")
    await operator(f, ["deny", request.requestId])
    expect((await waiting).isError).toBe(true)
    expect(f.ran().map((entry) => entry.name)).toEqual(["read_file"])
  })

  test("the downstream server gone: the gateway ends, saying why, and its client sees the connection close", async () => {
    f = folder(`
default: deny
allow: [stop_server]
`)
    const connected = await connect()
    let closed = false
    connected.client.onclose = () => void (closed = true)
    const exited = new Promise<number | null>((resolve) => {
      const check = setInterval(() => {
        try {
          process.kill(connected.pid!, 0)
        } catch {
          clearInterval(check)
          resolve(null)
        }
      }, 50)
    })
    await call(connected.client, "stop_server", {}).catch(() => undefined)
    await exited
    expect(closed).toBe(true)
    expect(connected.stderr()).toContain("closed the connection")
  })

  test("rules naming tools or arguments the server does not have are warned about at start (on stderr)", async () => {
    f = folder(`
default: deny
allow: [read_fil]
deny:
  - tool: write_file
    args:
      pth: "secret*"
`)
    const connected = await connect()
    await connected.client.listTools()
    const deadline = Date.now() + 5_000
    while (!connected.stderr().includes("pth") && Date.now() < deadline) await Bun.sleep(20)
    expect(connected.stderr()).toContain("read_fil")
    expect(connected.stderr()).toContain("read_file")
    expect(connected.stderr()).toContain("pth")
    // on stderr only: stdout is the MCP channel, and the client read nothing else there
    expect(connected.unreadable()).toEqual([])
  })
})
