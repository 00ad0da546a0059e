/**
 * Who answers a call that waits behind the MCP gateway: the client's own user through MCP
 * elicitation (`--ask client | both`), an operator with edited arguments, first answer winning
 * exactly once; and a store the gateway cannot use, which refuses every call.
 */
import { CancelledNotificationSchema, ElicitRequestSchema, type ElicitResult } from "@modelcontextprotocol/sdk/types.js"
import { Database } from "bun:sqlite"
import { describe, expect, test } from "bun:test"
import { toolgate } from "../cli/support/cli.js"
import { call, type Folder, folder, operator, pending, pendingSoon, stdioGateways, textOf } from "./support/gateway.js"

let f: Folder
const { connect } = stdioGateways(() => f)

/** A client whose user answers every elicitation with `answer` (after `delayMs`), recording the messages. */
const elicitingClient = async (
  extra: ReadonlyArray<string>,
  answer: () => Promise<ElicitResult> | ElicitResult
) => {
  const connected = await connect({ extra, capabilities: { capabilities: { elicitation: {} } } })
  const asked: Array<string> = []
  const cancelled: Array<string> = []
  connected.client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message)
    return answer()
  })
  // read as they come: the SDK's own handler skips a request numbered 0, as the first question is
  connected.client.setNotificationHandler(CancelledNotificationSchema, (notification) => {
    cancelled.push(String(notification.params.requestId))
  })
  return { ...connected, asked, cancelled }
}

describe("answers to calls waiting behind the MCP gateway", () => {
  test("--ask client: the client's user approves in the client; the call runs once and the answer is theirs", async () => {
    f = folder()
    const { asked, client } = await elicitingClient(["--ask", "client"], () => ({
      action: "accept",
      content: { decision: "approve_once" }
    }))
    const result = await call(client, "write_file", { path: "asked.txt", content: "yes" })
    expect(result.isError).toBeUndefined()
    expect(f.writes("asked.txt")).toHaveLength(1)
    expect(asked).toHaveLength(1)
    expect(asked[0]).toContain("write_file")
    expect(asked[0]).toContain("asked.txt")
    const audit = await operator(f, ["audit", "--json"])
    const resolved = audit.stdout.trim().split("\n").map((line) => JSON.parse(line)).find((event) =>
      event.type === "approval.resolved"
    )
    expect(resolved.actor).toBe("mcp-client:test-agent@1.0.0")
  })

  test("--ask client: the user declining denies the call", async () => {
    f = folder()
    const { client } = await elicitingClient(["--ask", "client"], () => ({ action: "decline" }))
    const result = await call(client, "write_file", { path: "declined.txt", content: "no" })
    expect(result.isError).toBe(true)
    expect(textOf(result)).toContain("declined")
    expect(f.ran()).toEqual([])
  })

  test("--ask both: an operator answers first; the user's later answer changes nothing", async () => {
    f = folder()
    let release: (result: ElicitResult) => void = () => undefined
    const { asked, cancelled, client } = await elicitingClient(
      ["--ask", "both"],
      () => new Promise<ElicitResult>((resolve) => (release = resolve))
    )
    const waiting = call(client, "write_file", { path: "both.txt", content: "x" })
    const [request] = await pendingSoon(f)
    expect(asked).toHaveLength(1)
    await operator(f, ["deny", request.requestId, "--reason", "the operator said no"])
    const result = await waiting
    expect(textOf(result)).toContain("the operator said no")
    // the question is withdrawn from the client once the request is answered elsewhere
    const deadline = Date.now() + 5_000
    while (cancelled.length === 0 && Date.now() < deadline) await Bun.sleep(20)
    expect(cancelled).toHaveLength(1)
    release({ action: "accept", content: { decision: "approve_once" } })
    await Bun.sleep(300)
    // still denied, by the operator, exactly once
    const audit = await operator(f, ["audit", "--json"])
    const resolutions = audit.stdout.trim().split("\n").map((line) => JSON.parse(line)).filter((event) =>
      event.type === "approval.resolved"
    )
    expect(resolutions).toHaveLength(1)
    expect(resolutions[0].outcome).toBe("denied")
    expect(f.ran()).toEqual([])
  })

  test("--ask both: the user declining leaves the request to the operators", async () => {
    f = folder()
    const { client } = await elicitingClient(["--ask", "both"], () => ({ action: "decline" }))
    const waiting = call(client, "write_file", { path: "later.txt", content: "x" })
    const [request] = await pendingSoon(f)
    await Bun.sleep(300)
    expect((await pending(f)).map((r) => r.requestId)).toEqual([request.requestId])
    await operator(f, ["approve", request.requestId])
    expect((await waiting).isError).toBeUndefined()
    expect(f.writes("later.txt")).toHaveLength(1)
  })

  test("an operator's edited arguments run as edited, checked against the tool's schema; an edit the schema refuses never runs", async () => {
    f = folder()
    const connected = await connect()
    const first = call(connected.client, "write_file", { path: "draft.txt", content: "rough" })
    const [request] = await pendingSoon(f)
    await operator(f, [
      "approve",
      request.requestId,
      "--policy",
      f.policy,
      "--args",
      JSON.stringify({ path: "draft.txt", content: "polished" })
    ])
    expect((await first).isError).toBeUndefined()
    expect(f.read("draft.txt")).toBe("polished")

    const second = call(connected.client, "write_file", { path: "typed.txt", content: "text" })
    const [next] = await pendingSoon(f)
    await operator(f, [
      "approve",
      next.requestId,
      "--policy",
      f.policy,
      "--args",
      JSON.stringify({ path: "typed.txt", content: 42 })
    ])
    const refused = await second
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toContain("input schema")
    expect(f.read("typed.txt")).toBeUndefined()
    expect(f.writes("typed.txt")).toHaveLength(0)
  })

  test("a store the gateway cannot write to refuses every call with a clear error; none is forwarded", async () => {
    f = folder()
    const connected = await connect()
    expect(textOf(await call(connected.client, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    // another process holds the database's write lock past the gateway's busy timeout
    const holder = new Database(f.db)
    holder.exec("BEGIN IMMEDIATE")
    try {
      const refused = await call(connected.client, "read_file", { path: "notes.txt" })
      expect(refused.isError).toBe(true)
      expect(textOf(refused)).toContain("approval store is unavailable")
      expect(textOf(refused)).toContain("did not run")
    } finally {
      holder.exec("ROLLBACK")
      holder.close()
    }
    expect(f.ran().map((entry) => entry.name)).toEqual(["read_file"])
    // the store back, calls go through again
    expect(textOf(await call(connected.client, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
  })

  test("a store that cannot be opened stops the gateway at start with exit code 8, before any client call", async () => {
    f = folder()
    const result = await toolgate([
      "mcp",
      "--policy",
      f.policy,
      "--url",
      "postgres://nobody@127.0.0.1:1/none",
      "--",
      "node",
      "-e",
      "setTimeout(() => {}, 60000)"
    ])
    expect(result.code).toBe(8)
    expect(result.stderr).toContain("PostgreSQL")
  })

  test("TOOLGATE_PG_PREPARED_STATEMENTS other than true or false is a usage error naming it, with --url", async () => {
    f = folder()
    const args = ["mcp", "--policy", f.policy, "--url", "postgres://nobody@127.0.0.1:1/none", "--", "node", "-e", "0"]
    const result = await toolgate(args, { TOOLGATE_PG_PREPARED_STATEMENTS: "sometimes" })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("TOOLGATE_PG_PREPARED_STATEMENTS")
    expect(result.stderr).not.toContain("internal error")
    // false is taken: the gateway goes on to open the store (unreachable here: exit code 8)
    expect((await toolgate(args, { TOOLGATE_PG_PREPARED_STATEMENTS: "false" })).code).toBe(8)
  })
})
