/**
 * `toolgate` against a server: `toolgate serve` runs as a Node process on a free loopback port
 * over a SQLite file; the other commands reach it with `--server` and a bearer token, and the
 * server decides who answers and which sessions a token may see.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { writeFileSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"
import { join } from "node:path"
import {
  type Fixture,
  fixture,
  run,
  type Running,
  serve,
  start,
  toolgate,
  toolgateHere,
  toolgateJson
} from "./support/cli.js"

const tokens = {
  approver: "approver-token-0123456789",
  auditor: "auditor-token-0123456789",
  teamA: "team-a-approver-token-0123"
}

let f: Fixture
let server: Running
let url: string

beforeAll(async () => {
  f = await fixture()
  ;({ server, url } = await serve(f, [
    { token: tokens.approver, name: "ana", role: "approver" },
    { token: tokens.auditor, name: "audit-bot", role: "auditor" },
    { token: tokens.teamA, name: "alice", role: "approver", sessions: ["team-a-*"] }
  ]))
}, 60_000)

afterAll(async () => {
  expect(await server.stop()).toBe(0)
  await f.close()
})

/** A port just freed, so nothing listens there. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo
      probe.close(() => resolve(port))
    })
  })

const as = (token: keyof typeof tokens) => ["--server", url, "--token", tokens[token]]

const bash = (sessionKey: string, id: string, command = `echo ${id}`) => ({
  id,
  name: "bash",
  sessionKey,
  args: { command }
})

describe("toolgate against a server", () => {
  test("serve prints where it listens and serves the API and the console", async () => {
    expect((await fetch(`${url}/health`)).status).toBe(200)
    expect((await fetch(`${url}/console`)).status).toBe(200)
    expect(server.stderr()).toBe("")
  })

  test("pending and approve through the server; the token's name answers; a second, different answer exits 4", async () => {
    const id = await f.pause(bash("srv-1", "c1"))
    const pending = await toolgateJson(["pending", ...as("approver"), "--session", "srv-1"])
    expect(pending.map((r: any) => r.requestId)).toEqual([id])

    const approved = await toolgate(["approve", id, ...as("approver"), "--actor", "someone-else"])
    expect(approved).toMatchObject({ code: 0, stderr: "" })
    expect(approved.stdout.trim()).toBe(`approved ${id} (bash {"command":"echo c1"}) by ana`)
    expect((await toolgateHere(["approve", id, ...as("approver")])).code).toBe(0)

    const second = await toolgate(["deny", id, ...as("approver"), "--reason", "no"])
    expect(second.code).toBe(4)
    expect(second.stderr.trim()).toBe(
      `toolgate: Approval request ${id} was already approved by ana; this answer was not applied`
    )
    expect((await run(f.gate.getRequest(id))).resolution).toMatchObject({ status: "approved", respondedBy: "ana" })
  })

  test("TOOLGATE_SERVER and TOOLGATE_TOKEN stand for --server and --token", async () => {
    const id = await f.pause(bash("srv-env", "c1"))
    const json = await toolgateJson(["deny", id, "--reason", "from env"], {
      TOOLGATE_SERVER: url,
      TOOLGATE_TOKEN: tokens.approver
    })
    expect(json).toMatchObject({ status: "denied", resolution: { reason: "from env", respondedBy: "ana" } })
  })

  test("tokens: none or unknown exits 6, wrong role exits 7, another session's is not found (3); nothing is applied", async () => {
    const id = await f.pause(bash("srv-auth", "c1"))
    const cases: Array<[Array<string>, number, string]> = [
      [
        ["approve", id, "--server", url],
        6,
        "toolgate: Missing bearer token: send the header Authorization: Bearer <token>"
      ],
      [["approve", id, "--server", url, "--token", "not-a-token-of-ours-000"], 6, "toolgate: Unknown bearer token"],
      [["pending", "--server", url, "--token", "not-a-token-of-ours-000"], 6, "toolgate: Unknown bearer token"],
      [
        ["approve", id, ...as("auditor")],
        7,
        "toolgate: Token \"audit-bot\" has the auditor role; answering needs the approver role"
      ],
      // to a token limited to team-a-*, srv-auth and its requests do not exist
      [["approve", id, ...as("teamA")], 3, `toolgate: No approval request with id ${id}`],
      [["pending", ...as("teamA"), "--session", "srv-auth"], 3, "toolgate: No such session"],
      [["audit", "--follow", ...as("teamA"), "--session", "srv-auth"], 3, "toolgate: No such session"],
      [
        ["audit", "--follow", "--server", url, "--token", "not-a-token-of-ours-000"],
        6,
        "toolgate: Unknown bearer token"
      ]
    ]
    // the first three as processes, the rest in this process
    const results = await Promise.all(cases.map(([args], i) => (i < 3 ? toolgate(args) : toolgateHere(args))))
    results.forEach((result, i) => {
      const [args, code, message] = cases[i]!
      expect({ args, code: result.code }).toEqual({ args, code })
      expect(result.stderr).toContain(message)
      expect(result.stderr.trim().split("\n")).toHaveLength(1)
    })
    expect((await run(f.gate.getRequest(id))).status).toBe("pending")

    // a limited token lists only its sessions; the auditor reads everything
    const teamA = await f.pause(bash("team-a-1", "c1"))
    expect((await toolgateJson(["pending", ...as("teamA")])).map((r: any) => r.requestId)).toEqual([teamA])
    const all = (await toolgateJson(["pending", ...as("auditor")])).map((r: any) => r.requestId)
    expect(all).toContain(id)
    expect(all).toContain(teamA)
  })

  test("unknown id exits 3, expired exits 5, bad inputs exit 2", async () => {
    const unknown = await toolgate(["approve", "req_nope", ...as("approver")])
    expect(unknown.code).toBe(3)
    expect(unknown.stderr.trim()).toBe("toolgate: No approval request with id req_nope")

    const late = await f.pause({ id: "q1", name: "quick", sessionKey: "srv-late" })
    await Bun.sleep(100)
    const expired = await toolgate(["approve", late, ...as("approver")])
    expect(expired.code).toBe(5)
    expect(expired.stderr).toContain(`toolgate: Approval request ${late} expired at `)

    const id = await f.pause(bash("srv-bad", "c1"))
    for (
      const [args, message] of [
        [["approve", id, "--args", "{oops"], "--args is not valid JSON"],
        [["extend", id, "--ttl", "forever"], "--ttl: expected a duration"],
        [["extend", id, "--ttl", "400d"], "--ttl: must be a whole number of milliseconds from 1 ms to a year"],
        [["approve", id, "--session", "--session-ttl", "0.1ms"], "--session-ttl: must be a whole number"],
        [["approve", id, "--args", "{\"__proto__\":{}}"], "--args are not acceptable arguments"],
        [["deny", " "], "the id must not be blank"],
        [["pending", "--session", ""], "--session must not be blank"]
      ] as const
    ) {
      const result = await toolgateHere([...args, ...as("approver")])
      expect({ args, code: result.code }).toEqual({ args, code: 2 })
      expect(result.stderr).toContain(message)
    }
  })

  test("an edit is judged by the server's policy; extend; session approvals listed, revoked, cleared", async () => {
    const id = await f.pause(bash("srv-edit", "c1"))
    const refused = await toolgate(["approve", id, ...as("approver"), "--args", "{\"command\":\"rm -rf /\"}", "--json"])
    // the policy's denial, not an approval: a script checking $? must not go on
    expect(refused.code).toBe(9)
    expect(JSON.parse(refused.stdout)).toMatchObject({
      status: "denied",
      resolution: { deniedBy: "policy", reason: expect.stringContaining("no-rm") }
    })
    const again = await toolgate(["approve", id, ...as("approver"), "--args", "{\"command\":\"rm -rf /\"}"])
    expect(again.code).toBe(9)
    expect(again.stdout).toStartWith(
      `denied by policy ${id} (bash {"command":"echo c1"}): the edited arguments {"command":"rm -rf /"} from ana were refused`
    )

    const id2 = await f.pause(bash("srv-edit", "c2"))
    const extended = await toolgateJson(["extend", id2, ...as("approver"), "--ttl", "1h"])
    expect(extended.expiresAt).toBeGreaterThan(Date.now() + 50 * 60 * 1000)
    // through the server too: a shorter --ttl keeps the deadline, --shorten brings it forward
    const kept = await toolgateJson(["extend", id2, ...as("approver"), "--ttl", "10m"])
    expect(kept.expiresAt).toBe(extended.expiresAt)
    const shortened = await toolgateJson(["extend", id2, ...as("approver"), "--ttl", "10m", "--shorten"])
    expect(shortened.expiresAt).toBeLessThanOrEqual(Date.now() + 10 * 60 * 1000)
    expect(shortened.expiresAt).toBeGreaterThan(Date.now() + 9 * 60 * 1000)
    await toolgate(["approve", id2, ...as("approver"), "--session"])
    const [grant] = await toolgateJson(["approvals", "list", ...as("auditor"), "--session", "srv-edit"])
    expect(grant).toMatchObject({ scope: "exact", grantedBy: "ana", requestId: id2 })
    const denied = await toolgateHere(["approvals", "revoke", grant.id, ...as("auditor"), "--session", "srv-edit"])
    expect(denied.code).toBe(7)
    const revoked = await toolgate(["approvals", "revoke", grant.id, ...as("approver"), "--session", "srv-edit"])
    expect(revoked.stdout.trim()).toBe(`revoked ${grant.id} (bash, session srv-edit)`)
    expect((await toolgateHere(["approvals", "revoke", grant.id, ...as("approver"), "--session", "srv-edit"])).code)
      .toBe(3)
    const cleared = await toolgateHere(["approvals", "clear", ...as("approver"), "--session", "srv-edit"])
    expect(cleared.stdout.trim()).toBe("cleared 0 session approval(s) of srv-edit")
  })

  test("audit through the server, and --follow over its event stream sees a later answer", async () => {
    const id = await f.pause(bash("srv-audit", "c1"))
    const follower = start(["audit", "--follow", "--json", ...as("auditor"), "--session", "srv-audit"])
    try {
      await follower.line(/"approval\.requested"/)
      await toolgate(["deny", id, ...as("approver"), "--reason", "streamed"])
      const resolved = JSON.parse(await follower.line(/"approval\.resolved"/))
      expect(resolved).toMatchObject({ requestId: id, outcome: "denied", actor: "ana", reason: "streamed" })
    } finally {
      expect(await follower.stop()).toBe(0)
    }
    const events = (await toolgate(["audit", ...as("auditor"), "--session", "srv-audit", "--json"])).stdout.trim()
      .split("\n")
      .map((line) => JSON.parse(line))
    expect(events.map((e) => e.outcome)).toEqual(["pending", "denied"])
    const after = await toolgateHere([
      "audit",
      ...as("auditor"),
      "--session",
      "srv-audit",
      "--after",
      String(events[0].seq)
    ])
    expect(after.stdout.trim()).toMatch(
      new RegExp(`^#${events[1].seq}  \\S+  approval\\.resolved  denied  session=srv-audit`)
    )
  })

  test("no server at the URL exits 8; serve refuses a bad token file (exit 2) and a taken port (exit 8)", async () => {
    const port = await freePort()
    const gone = await toolgate(["pending", "--server", `http://127.0.0.1:${port}`, "--token", tokens.approver])
    expect(gone.code).toBe(8)
    expect(gone.stderr.trim()).toBe(
      `toolgate: Server http://127.0.0.1:${port}: cannot connect (connect ECONNREFUSED 127.0.0.1:${port})`
    )

    const badTokens = join(f.dir, "bad-tokens.json")
    writeFileSync(badTokens, JSON.stringify([{ token: "short", name: "x", role: "boss" }]))
    const refused = await toolgate(["serve", "--db", f.db, "--port", "0", "--tokens", badTokens])
    expect(refused.code).toBe(2)
    expect(refused.stderr.trim()).toStartWith(
      `toolgate: Invalid API tokens (${badTokens}): 0.token: a token must be at least 16 characters long; 0.role: Expected "approver"`
    )
    expect(refused.stderr.trim().split("\n")).toHaveLength(1)

    const env = { TOOLGATE_TOKENS: JSON.stringify([{ token: tokens.approver, name: "ana", role: "approver" }]) }
    const takenPort = new URL(url).port
    const taken = await toolgate(["serve", "--db", f.db, "--port", takenPort], env)
    expect(taken.code).toBe(8)
    expect(taken.stdout).toBe("")
    expect(taken.stderr.trim()).toBe(
      `toolgate: cannot listen on 127.0.0.1:${takenPort}: the address is already in use: another process listens on ` +
        `port ${takenPort} (stop it or pick another --port) (EADDRINUSE)`
    )
    // an address that is not this machine's (TEST-NET-1, reserved for documentation)
    const elsewhere = await toolgate(["serve", "--db", f.db, "--port", "0", "--host", "192.0.2.1"], env)
    expect(elsewhere.code).toBe(8)
    expect(elsewhere.stderr.trim()).toBe(
      "toolgate: cannot listen on 192.0.2.1:0: the address is not one of this machine's (check --host) (EADDRNOTAVAIL)"
    )
  })

  test(
    "audit --follow outlives a server restart: it reconnects after the last event seen, nothing missed or repeated",
    async () => {
      const port = String(await freePort())
      const env = { TOOLGATE_TOKENS: JSON.stringify([{ token: tokens.approver, name: "ana", role: "approver" }]) }
      const serveOnPort = () => start(["serve", "--db", f.db, "--policy", f.policyFile, "--port", port], env)
      let restartable = serveOnPort()
      await restartable.line(/^toolgate: serving /)
      const id = await f.pause(bash("srv-restart", "c1"))
      const follower = start([
        "audit",
        "--follow",
        "--json",
        "--server",
        `http://127.0.0.1:${port}`,
        "--token",
        tokens.approver,
        "--session",
        "srv-restart"
      ])
      try {
        await follower.line(/"approval\.requested"/)
        expect(await restartable.stop()).toBe(0)
        await run(
          f.gate.respond(id, { decision: "deny", reason: "while the server was down", respondedBy: "agent-side" })
        )
        restartable = serveOnPort()
        const resolved = JSON.parse(await follower.line(/"approval\.resolved"/))
        expect(resolved).toMatchObject({ requestId: id, reason: "while the server was down" })
        expect(follower.lines.filter((line) => line.includes("approval.requested"))).toHaveLength(1)
      } finally {
        expect(await follower.stop()).toBe(0)
        await restartable.stop()
      }
    },
    60_000
  )
})
