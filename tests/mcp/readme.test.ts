/**
 * The README's MCP gateway section as a user follows it: its desktop configuration and its policy
 * are files under examples/ (the README shows them whole), and that configuration, with its paths
 * made local, runs the gateway in front of the real `@modelcontextprotocol/server-filesystem`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { bin, toolgate } from "../cli/support/cli.js"
import { call, type Folder, folder, operator, pendingSoon, root, textOf } from "./support/gateway.js"

const readme = readFileSync(join(root, "README.md"), "utf8")

/** The README's blocks marked `<!-- file: examples/NAME -->`, with their text. */
const fileBlocks = () =>
  Array.from(readme.matchAll(/<!-- file: (\S+) -->\n```\w*\n([\s\S]*?)```\n/g), ([, file, text]) => ({
    file: file!,
    text: text!
  }))

describe("the README's MCP gateway section", () => {
  test("shows the desktop configuration and the policy exactly as examples/ holds them", () => {
    const blocks = fileBlocks()
    expect(blocks.map((block) => block.file)).toEqual(["examples/mcp-desktop.json", "examples/mcp-files.yaml"])
    for (const block of blocks) expect(block.text).toBe(readFileSync(join(root, block.file), "utf8"))
  })

  test("the policy is valid with no warning", async () => {
    const checked = await toolgate(["policy", "check", "--strict", "examples/mcp-files.yaml"])
    expect(checked.stderr).toBe("")
    expect(checked.code).toBe(0)
  })

  describe("the configuration, run in front of the real filesystem server", () => {
    let f: Folder
    let client: Client

    beforeAll(async () => {
      f = folder(readFileSync(join(root, "examples/mcp-files.yaml"), "utf8"))
      mkdirSync(join(f.files, ".ssh"))
      writeFileSync(join(f.files, ".ssh", "id_ed25519"), "PRIVATE KEY")
      const config = JSON.parse(readFileSync(join(root, "examples/mcp-desktop.json"), "utf8"))
      const { args } = config.mcpServers.files as { args: Array<string> }
      // from `npx -y @tool-gate/cli mcp ...`: this checkout's bin, local paths, and the server
      // installed in node_modules instead of fetched by npx
      const manifest = createRequire(join(root, "package.json")).resolve(
        "@modelcontextprotocol/server-filesystem/package.json"
      )
      const server = join(manifest, "..", JSON.parse(readFileSync(manifest, "utf8")).bin["mcp-server-filesystem"])
      const local = args.slice(args.indexOf("@tool-gate/cli") + 1).map((arg) =>
        arg === "/home/me/.toolgate/files.yaml"
          ? f.policy
          : arg === "/home/me/.toolgate/toolgate.db"
          ? f.db
          : arg === "/home/me/projects"
          ? f.files
          : arg
      )
      const downstream = local.indexOf("--")
      expect(local.slice(downstream + 1, downstream + 4)).toEqual([
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem"
      ])
      local.splice(downstream + 1, 3, "node", server)
      const transport = new StdioClientTransport({ command: "node", args: [bin, ...local], cwd: root, stderr: "pipe" })
      client = new Client({ name: "desktop", version: "1.0.0" })
      await client.connect(transport)
    }, 60_000)

    afterAll(async () => {
      await client?.close()
      f?.close()
    })

    test("reads are allowed, keys are denied in any case, writes wait for a person", async () => {
      const notes = join(f.files, "notes.txt")
      expect(textOf(await call(client, "read_text_file", { path: notes }))).toBe("the notes\n")
      for (const key of [join(f.files, ".ssh", "id_ed25519"), join(f.files, ".SSH", "id_ed25519")]) {
        const denied = await call(client, "read_text_file", { path: key })
        expect(denied.isError).toBe(true)
        expect(textOf(denied)).toContain("keys stay private")
      }
      const written = join(f.files, "plan.md")
      const waiting = call(client, "write_file", { path: written, content: "# plan\n" })
      const [request] = await pendingSoon(f)
      expect(request.toolCall.sessionKey).toBe("desktop-files")
      expect(request.prompt).toContain("a file is about to change")
      expect(f.read("plan.md")).toBeUndefined()
      await operator(f, ["approve", request.requestId])
      expect((await waiting).isError).toBeUndefined()
      expect(f.read("plan.md")).toBe("# plan\n")
      // a tool the policy does not name is denied by its default
      const other = await call(client, "read_multiple_files", { paths: [notes] })
      expect(other.isError).toBe(true)
      expect(textOf(other)).toContain("policy rule default")
    })
  })
})
