/**
 * The MCP gateway on PostgreSQL (`--url`): its pauses are answered by a gate in another process on
 * the same database, and a database that stops taking connections makes it refuse every call
 * (never forward one) until it is back.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { type ApprovalRequest, Policy, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { bin } from "../cli/support/cli.js"
import { describePostgres } from "../support/postgresSuite.js"
import { call, filesServer, type Folder, folder, policyYaml, root, textOf } from "./support/gateway.js"

describePostgres("MCP gateway", (url) => {
  const database = `tg_mcp_${Date.now().toString(36)}`
  const admin = async (statement: string) => {
    const runtime = ManagedRuntime.make(ToolGatePg.layerClient({ url: Redacted.make(url) }))
    try {
      const { SqlClient } = await import("@effect/sql")
      await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)))
    } finally {
      await runtime.dispose()
    }
  }
  const databaseUrl = () => {
    const parsed = new URL(url)
    parsed.pathname = `/${database}`
    return parsed.toString()
  }

  let f: Folder
  let client: Client
  let answering: ManagedRuntime.ManagedRuntime<ToolGate.ToolGate, unknown>

  beforeAll(async () => {
    await admin(`CREATE DATABASE ${database}`)
    f = folder()
    const transport = new StdioClientTransport({
      command: "node",
      args: [bin, "mcp", "--policy", f.policy, "--url", databaseUrl(), "--", "node", filesServer, f.files],
      cwd: root,
      stderr: "pipe"
    })
    client = new Client({ name: "pg-agent", version: "1.0.0" })
    await client.connect(transport)
    const policy = await Effect.runPromise(Policy.fromYaml(policyYaml))
    answering = ManagedRuntime.make(ToolGatePg.layer({ url: Redacted.make(databaseUrl()), policy }))
  }, 60_000)

  afterAll(async () => {
    await client?.close()
    await answering?.dispose()
    await admin(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`).catch(() => undefined)
    await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    f?.close()
  })

  const pendingNow = () => answering.runPromise(Effect.flatMap(ToolGate.ToolGate, (gate) => gate.pending()))

  test("allowed, denied, and a pause answered by another process's gate on the same database", async () => {
    expect(textOf(await call(client, "read_file", { path: "notes.txt" }))).toBe("the notes\n")
    expect(textOf(await call(client, "delete_file", { path: "notes.txt" }))).toContain("no-delete")
    const waiting = call(client, "write_file", { path: "pg.txt", content: "via postgres" })
    let requests: ReadonlyArray<ApprovalRequest.ApprovalRequest> = []
    const deadline = Date.now() + 20_000
    while (requests.length === 0 && Date.now() < deadline) {
      requests = await pendingNow()
      if (requests.length === 0) await Bun.sleep(100)
    }
    expect(requests).toHaveLength(1)
    expect(requests[0]!.toolCall.agentId).toBe("pg-agent@1.0.0")
    await answering.runPromise(
      Effect.flatMap(
        ToolGate.ToolGate,
        (gate) => gate.respond(requests[0]!.requestId, { decision: "approve_once", respondedBy: "pg-operator" })
      )
    )
    expect((await waiting).isError).toBeUndefined()
    expect(f.read("pg.txt")).toBe("via postgres")
  })

  test(
    "the database refusing connections: every call refused with the store named, none forwarded; back, calls go through",
    async () => {
      const ranBefore = f.ran().length
      await answering.dispose()
      await admin(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`)
      await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}'`)
      try {
        const refused = await call(client, "read_file", { path: "notes.txt" })
        expect(refused.isError).toBe(true)
        expect(textOf(refused)).toContain("approval store is unavailable")
        expect(f.ran()).toHaveLength(ranBefore)
      } finally {
        await admin(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`)
      }
      const deadline = Date.now() + 20_000
      let result = await call(client, "read_file", { path: "notes.txt" })
      while (result.isError === true && Date.now() < deadline) {
        await Bun.sleep(200)
        result = await call(client, "read_file", { path: "notes.txt" })
      }
      expect(textOf(result)).toBe("the notes\n")
      const policy = await Effect.runPromise(Policy.fromYaml(policyYaml))
      answering = ManagedRuntime.make(ToolGatePg.layer({ url: Redacted.make(databaseUrl()), policy }))
    },
    60_000
  )
})
