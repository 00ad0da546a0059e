/**
 * The MCP gateway over stdio, as a desktop client runs it: the official SDK's client starts
 * `toolgate mcp` (a real Node process), which starts a real downstream MCP server on a temp folder.
 * Operators answer from `toolgate approve` / `deny` in other processes.
 */
import { describe, expect, test } from "bun:test"
import { writeFileSync } from "node:fs"
import {
  call,
  type Folder,
  folder,
  operator,
  pending,
  pendingSoon,
  policyYaml,
  stdioGateways,
  textOf
} from "./support/gateway.js"

let f: Folder
const { connect } = stdioGateways(() => f)

describe("toolgate mcp over stdio", () => {
  test("lists the downstream tools with their input schemas", async () => {
    f = folder()
    const { client } = await connect()
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      "count",
      "delete_file",
      "enable_shout",
      "read_file",
      "stop_server",
      "write_file"
    ])
    const write = tools.find((tool) => tool.name === "write_file")!
    expect(write.inputSchema.properties).toHaveProperty("content")
    expect(write.inputSchema.required).toEqual(["path", "content"])
  })

  test("an allowed call is forwarded and its result returned unchanged (structured content too)", async () => {
    f = folder()
    const { client } = await connect()
    const read = await call(client, "read_file", { path: "notes.txt" })
    expect(read.isError).toBeUndefined()
    expect(textOf(read)).toBe("the notes\n")
    const counted = await call(client, "count", { n: 2 })
    expect(counted.structuredContent).toEqual({ counted: 2 })
    expect(f.ran().map((entry) => entry.name)).toEqual(["read_file", "count"])
  })

  test("a call the policy denies returns the rule's reason as a tool error and never reaches the server", async () => {
    f = folder()
    const { client } = await connect()
    const result = await call(client, "write_file", { path: "secret.txt", content: "leak" })
    expect(result.isError).toBe(true)
    expect(textOf(result)).toContain("no-secrets")
    expect(textOf(result)).toContain("secrets are read-only")
    expect(textOf(result)).toContain("did not run")
    expect(f.read("secret.txt")).toBeUndefined()
    expect(f.ran()).toEqual([])
    // and no request waits for anybody
    expect(await pending(f)).toEqual([])
  })

  test("arguments are judged after the tool's input schema: a wrong type or unknown tool is refused, not forwarded", async () => {
    f = folder()
    const { client } = await connect()
    const wrongType = await call(client, "read_file", { path: ["notes.txt"] })
    expect(wrongType.isError).toBe(true)
    expect(textOf(wrongType)).toContain("input schema")
    const outOfRange = await call(client, "count", { n: 50 })
    expect(outOfRange.isError).toBe(true)
    const unknown = await call(client, "format_disk", {})
    expect(unknown.isError).toBe(true)
    expect(textOf(unknown)).toContain("no tool named")
    expect(f.ran()).toEqual([])
  })

  test("a write that needs approval waits, with progress, until `toolgate approve` in another process; then runs exactly once", async () => {
    f = folder()
    const { client } = await connect()
    const progress: Array<string | undefined> = []
    const result = call(client, "write_file", { path: "out.txt", content: "approved text" }, (m) => progress.push(m))
    const [request] = await pendingSoon(f)
    expect(request.toolCall.name).toBe("write_file")
    expect(request.toolCall.agentId).toBe("test-agent@1.0.0")
    expect(request.toolCall.args).toEqual({ path: "out.txt", content: "approved text" })
    expect(f.read("out.txt")).toBeUndefined()
    await operator(f, ["approve", request.requestId])
    const done = await result
    expect(done.isError).toBeUndefined()
    expect(textOf(done)).toContain("wrote 13 characters")
    expect(f.read("out.txt")).toBe("approved text")
    expect(f.writes("out.txt")).toHaveLength(1)
    expect(progress.some((message) => message?.includes(request.requestId))).toBe(true)
    // the audit trail holds the request, its answer and the run
    const audit = await operator(f, ["audit", "--json"])
    const types = audit.stdout.trim().split("\n").map((line) => JSON.parse(line).type)
    expect(types).toContain("approval.requested")
    expect(types).toContain("approval.resolved")
  })

  test("a person's deny reaches the model with its reason, and nothing runs", async () => {
    f = folder()
    const { client } = await connect()
    const result = call(client, "write_file", { path: "out.txt", content: "x" })
    const [request] = await pendingSoon(f)
    await operator(f, ["deny", request.requestId, "--reason", "not on a Friday"])
    const done = await result
    expect(done.isError).toBe(true)
    expect(textOf(done)).toContain("a person denied this call")
    expect(textOf(done)).toContain("not on a Friday")
    expect(f.read("out.txt")).toBeUndefined()
    expect(f.ran()).toEqual([])
  })

  test("an approval nobody gives in time is a denial the model is told about; the call never runs", async () => {
    f = folder()
    const { client } = await connect()
    const done = await call(client, "write_file", { path: "soon-1.txt", content: "x" })
    expect(done.isError).toBe(true)
    expect(textOf(done)).toContain("nobody answered")
    expect(textOf(done)).toContain("times out is a denial")
    expect(f.read("soon-1.txt")).toBeUndefined()
    // a late answer is refused
    const requests = await operator(f, ["audit", "--json"])
    const expired = requests.stdout.trim().split("\n").map((line) => JSON.parse(line)).find((event) =>
      event.type === "approval.expired"
    )
    expect(expired).toBeDefined()
    expect(f.ran()).toEqual([])
  })

  test("two identical calls waiting together: one approval runs one of them; the other asks again", async () => {
    f = folder()
    const { client } = await connect()
    const args = { path: "twice.txt", content: "once" }
    const first = call(client, "write_file", args)
    const second = call(client, "write_file", args)
    const [request] = await pendingSoon(f)
    await operator(f, ["approve", request.requestId])
    // the other occurrence is a new request of its own
    const next = await (async () => {
      const deadline = Date.now() + 20_000
      while (Date.now() < deadline) {
        const list = await pending(f)
        if (list.length === 1 && list[0].requestId !== request.requestId) return list[0]
        await Bun.sleep(100)
      }
      throw new Error("no second request")
    })()
    expect(next.toolCall.id).not.toBe(request.toolCall.id)
    expect(f.writes("twice.txt")).toHaveLength(1)
    await operator(f, ["deny", next.requestId, "--reason", "once is enough"])
    const results = await Promise.all([first, second])
    expect(results.filter((r) => r.isError === true).map(textOf)[0]).toContain("once is enough")
    expect(results.filter((r) => r.isError !== true)).toHaveLength(1)
    expect(f.writes("twice.txt")).toHaveLength(1)
  })

  test("approve for the session covers the client's later identical calls, not a new session", async () => {
    f = folder()
    const a = await connect({ extra: ["--session", "desk-a"] })
    const args = { path: "log.txt", content: "line" }
    const first = call(a.client, "write_file", args)
    const [request] = await pendingSoon(f)
    await operator(f, ["approve", request.requestId, "--session"])
    expect((await first).isError).toBeUndefined()
    // the same session: runs at once
    expect((await call(a.client, "write_file", args)).isError).toBeUndefined()
    expect(f.writes("log.txt")).toHaveLength(2)
    // another session asks
    const b = await connect({ extra: ["--session", "desk-b"] })
    const other = call(b.client, "write_file", args)
    const [asked] = await pendingSoon(f)
    expect(asked.toolCall.sessionKey).toBe("desk-b")
    await operator(f, ["deny", asked.requestId])
    expect((await other).isError).toBe(true)
    expect(f.writes("log.txt")).toHaveLength(2)
  })

  test("killed while a call waits: the request stays listed and answerable; after a restart the retried call replays the answer, once", async () => {
    f = folder()
    const first = await connect({ extra: ["--session", "desk"] })
    const args = { path: "after-restart.txt", content: "survived" }
    const waiting = call(first.client, "write_file", args)
    const [request] = await pendingSoon(f)
    process.kill(first.pid!, "SIGKILL")
    // the client's call fails cleanly (the connection closed), it does not hang
    await expect(waiting).rejects.toThrow()
    expect(f.ran()).toEqual([])
    // still listed, and answerable with no gateway running
    const listed = await pending(f)
    expect(listed.map((r) => r.requestId)).toEqual([request.requestId])
    await operator(f, ["approve", request.requestId])
    // the client starts the gateway again and retries the same call: the answer is replayed
    const second = await connect({ extra: ["--session", "desk"] })
    const retried = await call(second.client, "write_file", args)
    expect(retried.isError).toBeUndefined()
    expect(f.read("after-restart.txt")).toBe("survived")
    expect(f.writes("after-restart.txt")).toHaveLength(1)
    expect(await pending(f)).toEqual([])
    // the next identical call is a new judgement, not a second run of the approved one
    const again = call(second.client, "write_file", args)
    const [asked] = await pendingSoon(f)
    expect(asked.requestId).not.toBe(request.requestId)
    await operator(f, ["deny", asked.requestId])
    expect((await again).isError).toBe(true)
    expect(f.writes("after-restart.txt")).toHaveLength(1)
  })

  test("a denial given while the gateway was down is replayed to the retried call", async () => {
    f = folder()
    const first = await connect({ extra: ["--session", "desk"] })
    const args = { path: "nope.txt", content: "x" }
    const waiting = call(first.client, "write_file", args)
    const [request] = await pendingSoon(f)
    process.kill(first.pid!, "SIGKILL")
    await expect(waiting).rejects.toThrow()
    await operator(f, ["deny", request.requestId, "--reason", "decided while you were away"])
    const second = await connect({ extra: ["--session", "desk"] })
    const retried = await call(second.client, "write_file", args)
    expect(retried.isError).toBe(true)
    expect(textOf(retried)).toContain("decided while you were away")
    expect(f.ran()).toEqual([])
  })

  test("restarted under a changed policy, an identical call is judged by the new policy, never replayed from the old", async () => {
    f = folder()
    const first = await connect({ extra: ["--session", "desk"] })
    expect(textOf(await call(first.client, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    await first.close()
    writeFileSync(f.policy, policyYaml.replace("allow: [read_file, count]", "allow: [count]"))
    const second = await connect({ extra: ["--session", "desk"] })
    const denied = await call(second.client, "read_file", { path: "notes.txt" })
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("policy rule default")
    expect(f.ran().map((entry) => entry.name)).toEqual(["read_file"])
  })

  test("a call the client cancels stops waiting; its request stays pending, and the retry waits on the same request", async () => {
    f = folder()
    const { client } = await connect()
    const args = { path: "cancelled.txt", content: "x" }
    const controller = new AbortController()
    const cancelled = client.callTool({ name: "write_file", arguments: args }, undefined, { signal: controller.signal })
    const [request] = await pendingSoon(f)
    controller.abort("the user pressed stop")
    await expect(cancelled).rejects.toThrow()
    await Bun.sleep(200)
    expect((await pending(f)).map((r) => r.requestId)).toEqual([request.requestId])
    const retried = call(client, "write_file", args)
    await Bun.sleep(200)
    expect((await pending(f)).map((r) => r.requestId)).toEqual([request.requestId])
    await operator(f, ["approve", request.requestId])
    expect((await retried).isError).toBeUndefined()
    expect(f.writes("cancelled.txt")).toHaveLength(1)
    // nothing of the cancelled call goes on waiting (it would ask again once the other ran)
    await Bun.sleep(300)
    expect(await pending(f)).toEqual([])
  })
})
