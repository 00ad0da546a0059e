/**
 * `toolgate` on the SQLite file (no server): every answering and reading command as a Node
 * process, against requests an agent (this process's gate) created on the same file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Chunk, Stream } from "effect"
import { execSync } from "node:child_process"
import { type Fixture, fixture, run, start, toolgate, toolgateHere, toolgateJson } from "./support/cli.js"

let f: Fixture
let db: Array<string>

beforeAll(async () => {
  f = await fixture()
  db = ["--db", f.db]
  // the first run builds the bundle; later runs reuse it
  const help = await toolgate(["--help"])
  expect(help.code).toBe(0)
  expect(help.stdout).toContain("$ toolgate")
}, 60_000)
afterAll(() => f.close())

const bash = (sessionKey: string, id: string, command = `echo ${id}`) => ({
  id,
  name: "bash",
  sessionKey,
  args: { command }
})

describe("toolgate on the SQLite file", () => {
  test("--help on every command (in this process; the bin's own --help runs above)", async () => {
    const commands = [
      [],
      ["serve"],
      ["pending"],
      ["approve"],
      ["deny"],
      ["extend"],
      ["approvals"],
      ["approvals", "list"],
      ["approvals", "revoke"],
      ["approvals", "clear"],
      ["audit"],
      ["policy"],
      ["policy", "check"],
      ["demo"]
    ]
    const results = await Promise.all(commands.map((command) => toolgateHere([...command, "--help"])))
    results.forEach((result, i) => {
      expect(result.code).toBe(0)
      expect(result.stdout).toContain("USAGE")
      // @effect/cli names a subcommand alone in its usage line
      expect(result.stdout).toContain(`$ ${commands[i]!.at(-1) ?? "toolgate"}`)
    })
    expect(results[3]!.stdout).toContain("[--scope exact | tool] [--session-ttl DURATION] [--args JSON]")
    expect(results[5]!.stdout).toContain("--ttl DURATION")
  })

  test("pending lists requests oldest first, per session or all, as text and JSON", async () => {
    const first = await f.pause(bash("pend-1", "c1"))
    const second = await f.pause({ ...bash("pend-2", "c2"), agentId: "bot", intentId: "ship" })

    const text = await toolgate(["pending", ...db])
    expect(text.code).toBe(0)
    const lines = text.stdout.trim().split("\n")
    const mine = lines.filter((line) => line.includes(first) || line.includes(second))
    expect(mine).toHaveLength(2)
    expect(mine[0]).toStartWith(`${first}  pend-1  bash {"command":"echo c1"}  rule=requireApproval[0]  expires in `)
    expect(mine[1]).toContain("agent=bot  intent=ship")

    const json = await toolgateJson(["pending", ...db, "--session", "pend-2"])
    expect(json).toHaveLength(1)
    expect(json[0]).toMatchObject({
      requestId: second,
      status: "pending",
      toolCall: { id: "c2", name: "bash", sessionKey: "pend-2", args: { command: "echo c2" }, agentId: "bot" },
      rule: { id: "requireApproval[0]", source: "requireApproval" }
    })

    const none = await toolgateHere(["pending", ...db, "--session", "nobody"])
    expect(none.stdout.trim()).toBe("no pending approvals")
    expect(JSON.parse((await toolgateHere(["pending", ...db, "--session", "nobody", "--json"])).stdout)).toEqual([])
  })

  test("approve once: applied exactly once; the same answer again is idempotent, a different one is refused (exit 4)", async () => {
    const id = await f.pause(bash("once", "c1"))
    const approved = await toolgate(["approve", id, ...db, "--actor", "ana"])
    expect(approved).toMatchObject({ code: 0, stderr: "" })
    expect(approved.stdout.trim()).toBe(`approved ${id} (bash {"command":"echo c1"}) by ana`)

    const again = await toolgate(["approve", id, ...db, "--actor", "bob"])
    expect(again.code).toBe(0)
    expect(again.stdout).toContain("by ana")

    const denied = await toolgate(["deny", id, ...db, "--reason", "changed my mind"])
    expect(denied.code).toBe(4)
    expect(denied.stdout).toBe("")
    expect(denied.stderr.trim()).toBe(
      `toolgate: Approval request ${id} was already approved by ana; this answer was not applied`
    )

    const request = await run(f.gate.getRequest(id))
    expect(request.resolution).toMatchObject({ status: "approved", decision: "approve_once", respondedBy: "ana" })
    const audit = await toolgate(["audit", ...db, "--session", "once", "--json"])
    expect(audit.stdout.split("\n").filter((line) => line.includes("\"approval.resolved\""))).toHaveLength(1)
  })

  test("the actor defaults to the OS user", async () => {
    const id = await f.pause(bash("os-user", "c1"))
    const json = await toolgateJson(["approve", id, ...db])
    expect(json.resolution.respondedBy).toBe(execSync("id -un", { encoding: "utf8" }).trim())
  })

  test("deny with a reason, as JSON; the agent's waiter sees it", async () => {
    const id = await f.pause(bash("deny", "c1"))
    const json = await toolgateJson(["deny", id, ...db, "--reason", "not on a Friday", "--actor", "ana"])
    expect(json).toMatchObject({
      requestId: id,
      status: "denied",
      resolution: { reason: "not on a Friday", respondedBy: "ana" }
    })
    const waited = await run(f.gate.awaitDecision(id))
    expect(waited.status).toBe("denied")
    const text = await toolgateHere(["deny", id, ...db, "--reason", "not on a Friday", "--actor", "ana"])
    expect(text.stdout.trim()).toBe(`denied ${id} (bash {"command":"echo c1"}) by ana: not on a Friday`)
  })

  test("approve for the session with scope tool; approvals list, revoke and clear", async () => {
    const id = await f.pause(bash("sess", "c1"))
    const approved = await toolgate(["approve", id, ...db, "--session", "--scope", "tool", "--actor", "ana"])
    expect(approved.code).toBe(0)
    expect(approved.stdout).toMatch(/for the session \(session approval sa_[0-9a-f-]+\)/)

    const [grant] = await toolgateJson(["approvals", "list", ...db, "--session", "sess"])
    expect(grant).toMatchObject({
      sessionKey: "sess",
      toolName: "bash",
      scope: "tool",
      grantedBy: "ana",
      requestId: id
    })
    const listed = await toolgateHere(["approvals", "list", ...db, "--session", "sess"])
    expect(listed.stdout.trim()).toStartWith(`${grant.id}  sess  bash  scope=tool  by=ana  request=${id}`)
    expect((await run(f.gate.evaluate(bash("sess", "c2", "anything else"))))._tag).toBe("Allow")

    // an id from another session is not found under this one
    const elsewhere = await toolgateHere(["approvals", "revoke", grant.id, ...db, "--session", "other"])
    expect(elsewhere.code).toBe(3)
    expect(elsewhere.stderr.trim()).toBe(`toolgate: No active session approval with id ${grant.id}`)

    const revoked = await toolgate(["approvals", "revoke", grant.id, ...db, "--session", "sess"])
    expect(revoked.stdout.trim()).toBe(`revoked ${grant.id} (bash, session sess)`)
    expect((await toolgateHere(["approvals", "list", ...db, "--session", "sess"])).stdout.trim()).toBe(
      "no session approvals in sess"
    )

    // a session approval that lapses
    const id2 = await f.pause(bash("sess", "c3"))
    await toolgate(["approve", id2, ...db, "--session", "--session-ttl", "2h"])
    const [lapsing] = await toolgateJson(["approvals", "list", ...db, "--session", "sess"])
    expect(lapsing.expiresAt).toBeGreaterThan(Date.now() + 90 * 60 * 1000)
    expect(lapsing.expiresAt).toBeLessThanOrEqual(Date.now() + 2 * 60 * 60 * 1000)
    const cleared = await toolgate(["approvals", "clear", ...db, "--session", "sess"])
    expect(cleared).toMatchObject({ code: 0, stdout: "cleared 1 session approval(s) of sess\n" })
  })

  test("approve with edited arguments: judged by the policy again", async () => {
    const id = await f.pause(bash("edit", "c1"))
    const edited = await toolgateJson([
      "approve",
      id,
      ...db,
      "--policy",
      f.policyFile,
      "--args",
      "{\"command\":\"echo safer\"}"
    ])
    expect(edited).toMatchObject({ status: "approved", resolution: { editedArgs: { command: "echo safer" } } })
  })

  test("an edit the policy denies: \"denied by policy\" and exit 9, so a script checking $? never reads it as approved", async () => {
    const id = await f.pause(bash("edit", "c3"))
    const refused = await toolgate([
      "approve",
      id,
      ...db,
      "--actor",
      "ana",
      "--policy",
      f.policyFile,
      "--args",
      "{\"command\":\"rm -rf /\"}"
    ])
    expect(refused.code).toBe(9)
    expect(refused.stdout.trim()).toBe(
      `denied by policy ${id} (bash {"command":"echo c3"}): the edited arguments {"command":"rm -rf /"} from ana were refused: ` +
        "edited arguments are denied by policy rule no-rm: never delete"
    )
    expect(refused.stderr).toBe("")
    const request = await run(f.gate.getRequest(id))
    expect(request.status).toBe("denied")
    expect(request.resolution?.deniedBy).toBe("policy")

    const id2 = await f.pause(bash("edit", "c4"))
    const json = await toolgate([
      "approve",
      id2,
      ...db,
      "--policy",
      f.policyFile,
      "--args",
      "{\"command\":\"rm -rf /\"}",
      "--json"
    ])
    expect(json.code).toBe(9)
    expect(JSON.parse(json.stdout)).toMatchObject({
      status: "denied",
      resolution: { deniedBy: "policy", decision: "approve_once" }
    })
  })

  test("bad inputs: each a one-line message and exit 2, nothing applied (two as processes, the table in this process)", async () => {
    const id = await f.pause(bash("bad", "c1"))
    const cases: Array<[Array<string>, string]> = [
      [["approve", id, ...db, "--args", "{\"command\": "], "--args is not valid JSON"],
      [["approve", id, ...db, "--args", "[\"ls\"]"], "--args must be a JSON object of arguments"],
      [
        ["approve", id, ...db, "--args", "{\"command\":\"ls\"}"],
        "--args needs the policy (--policy FILE or TOOLGATE_POLICY)"
      ],
      [["approve", id, ...db, "--scope", "tool"], "--scope applies only with --session"],
      [["approve", id, ...db, "--session-ttl", "1h"], "--session-ttl applies only with --session"],
      [["approve", id, ...db, "--session", "--session-ttl", "whenever"], "--session-ttl: expected a duration"],
      [
        ["approve", id, ...db, "--session", "--scope", "everything"],
        "Expected one of the following cases: exact, tool"
      ],
      [["extend", id, ...db, "--ttl", "soon"], "--ttl: expected a duration such as 90s, 10m, 2h"],
      [["extend", id, ...db, "--ttl", "0s"], "--ttl: must be a whole number of milliseconds from 1 ms to a year"],
      [["extend", id, ...db, "--ttl", "366d"], "--ttl: must be a whole number of milliseconds from 1 ms to a year"],
      [["extend", id, ...db, "--ttl", "99999999999999999999999999d"], "--ttl: must be a whole number"],
      [["extend", id, ...db, "--ttl", "0.5ms"], "--ttl: must be a whole number"],
      [["extend", id, ...db, "--ttl", "Infinity s"], "--ttl: expected a duration"],
      [["extend", id, ...db, "--ttl", "1e400s"], "--ttl: expected a duration"],
      [["extend", id, ...db, "--ttl", "-5m"], "--ttl: expected a duration"],
      [["approve", id, ...db, "--session", "--session-ttl", "400d"], "--session-ttl: must be a whole number"],
      [["approve", id, ...db, "--session", "--session-ttl", "0ms"], "--session-ttl: must be a whole number"],
      [
        [
          "approve",
          id,
          ...db,
          "--policy",
          f.policyFile,
          "--args",
          `{"a":${"[".repeat(100_000)}${"]".repeat(100_000)}}`
        ],
        "--args"
      ],
      [
        ["approve", id, ...db, "--policy", f.policyFile, "--args", "{\"__proto__\":{\"x\":1}}"],
        "--args are not acceptable arguments"
      ],
      [["approve", id, ...db, "--policy", f.policyFile, "--args", "null"], "--args must be a JSON object"],
      [["approve", id, ...db, "--policy", f.policyFile, "--args", "\"rm -rf /\""], "--args must be a JSON object"],
      [["extend", id, ...db], "--ttl"],
      [["audit", ...db, "--after", "-1"], "--after must be 0 or more"],
      [["deny", `${id}\u001b[2J`, ...db], "the id must not contain control characters, got \"" + id + "\\u001b[2J\""],
      [["deny", id, ...db, "--actor", "ana\u001b[8m"], "--actor must not contain control characters"],
      [["deny", id, ...db, "--actor", " "], "--actor must not be blank"],
      // decoded as a session key before anything is read: a key no call can have is a usage error
      [["pending", ...db, "--session", "s1\u009b2J"], "--session must not contain control characters"],
      [["approvals", "list", ...db, "--session", "k".repeat(401)], "--session"],
      [["demo", "agent", "--resume", "cp_not-a-token"], "cp_not-a-token"],
      [["extend", id, ...db, "--ttl", "1s\u001b]0;x\u0007\napproved"], "got \"1s\\u001b]0;x\\u0007\\napproved\""],
      [["pending", "--server", "ftp://example.com"], "--server must be an http:// or https:// URL"],
      // @effect/cli's own message quotes the value: one escaped line, no forged second line
      [
        ["audit", ...db, "--after", "1\napproved req_1 by ana\u001b[2K"],
        "'1\\napproved req_1 by ana\\u001b[2K' is not a integer"
      ],
      [["pending", "--server", "not a url"], "--server must be an http:// or https:// URL"],
      // never quoted: it is a secret (fetch's own complaint about the header quoted it)
      [
        ["pending", "--server", "http://127.0.0.1:9", "--token", "secret-0123456789\r\nX-Evil: 1"],
        "--token must be visible ASCII characters"
      ],
      [["serve", ...db, "--port", "70000"], "--port must be from 0 to 65535"],
      [["approve", ...db], "id"],
      [
        ["pending", "--db", `${f.dir}/typo.db`],
        `no database at ${f.dir}/typo.db: give the file your agents use with --db`
      ],
      [["frobnicate"], "Invalid subcommand"],
      [[], "missing command"]
    ]
    const results = await Promise.all(cases.map(([args], i) => (i < 2 ? toolgate(args) : toolgateHere(args))))
    results.forEach((result, i) => {
      expect({ args: cases[i]![0], code: result.code }).toEqual({ args: cases[i]![0], code: 2 })
      expect(result.stderr).toContain(cases[i]![1])
      expect(result.stderr).not.toContain("    at ")
      expect(result.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/)
      expect(result.stderr.trim().split("\n")).toHaveLength(1)
      expect(result.stderr).not.toContain("secret-0123456789")
    })
    expect((await run(f.gate.getRequest(id))).status).toBe("pending")
  })

  test("unknown ids: exit 3", async () => {
    for (
      const [i, args] of [["approve", "req_nope"], ["deny", "req_nope"], ["extend", "req_nope", "--ttl", "5m"]]
        .entries()
    ) {
      const result = await (i === 0 ? toolgate : toolgateHere)([...args, ...db])
      expect(result.code).toBe(3)
      expect(result.stderr.trim()).toBe("toolgate: No approval request with id req_nope")
    }
  })

  test("expired: a late answer or extension is refused with exit 5, recorded as expired", async () => {
    const id = await f.pause({ id: "q1", name: "quick", sessionKey: "late" })
    await Bun.sleep(100)
    const late = await toolgate(["approve", id, ...db])
    expect(late.code).toBe(5)
    expect(late.stderr.trim()).toMatch(
      new RegExp(`^toolgate: Approval request ${id} expired at \\S+Z; late answers are refused$`)
    )
    expect((await toolgate(["extend", id, ...db, "--ttl", "10m"])).code).toBe(5)
    expect((await run(f.gate.getRequest(id))).status).toBe("expired")
  })

  test("extend gives a pending request more time; an answered one is refused (exit 4)", async () => {
    const id = await f.pause(bash("ext", "c1"))
    const before = (await run(f.gate.getRequest(id))).expiresAt
    const extended = await toolgateJson(["extend", id, ...db, "--ttl", "2h", "--actor", "ana"])
    expect(extended.expiresAt).toBeGreaterThan(before + 60 * 60 * 1000)
    // a TTL shorter than the time left keeps the deadline, and says so
    const kept = await toolgateHere(["extend", id, ...db, "--ttl", "90 minutes"])
    expect(kept.stdout).toMatch(
      new RegExp(
        `^kept ${id}: it expires at ${new Date(extended.expiresAt).toISOString()}, in (1h 59m|2h 0m), .*--shorten`
      )
    )
    expect((await run(f.gate.getRequest(id))).expiresAt).toBe(extended.expiresAt)
    const text = await toolgateHere(["extend", id, ...db, "--ttl", "90 minutes", "--shorten"])
    expect(text.stdout).toMatch(
      new RegExp(`^extended ${id} \\(bash \\{"command":"echo c1"\\}\\): expires at \\S+Z, in 1h 30m`)
    )
    expect((await run(f.gate.getRequest(id))).expiresAt).toBeLessThan(extended.expiresAt)
    await toolgateHere(["deny", id, ...db])
    expect((await toolgate(["extend", id, ...db, "--ttl", "1h"])).code).toBe(4)
  })

  test("extend --ttl shorter than the time left keeps the deadline; --shorten brings it forward", async () => {
    const id = await f.pause(bash("ext-short", "c1"))
    const before = await run(f.gate.getRequest(id))
    // 5 minutes left: asking for 1 minute must not leave the operator with 1 minute
    const kept = await toolgate(["extend", id, ...db, "--ttl", "1m"])
    expect(kept.code).toBe(0)
    expect(kept.stdout).toMatch(new RegExp(`^kept ${id}: it expires at ${new Date(before.expiresAt).toISOString()}`))
    expect(await run(f.gate.getRequest(id))).toEqual(before)
    const shortened = await toolgateJson(["extend", id, ...db, "--ttl", "1m", "--shorten", "--actor", "ana"])
    expect(shortened.expiresAt).toBeLessThan(before.expiresAt)
    expect(shortened.expiresAt).toBeLessThanOrEqual(Date.now() + 60_000)
    expect((await run(f.gate.getRequest(id))).expiresAt).toBe(shortened.expiresAt)
    // one extension event, the shortening one: keeping the deadline wrote none
    const events = await run(Stream.runCollect(Stream.take(f.gate.auditLog({ sessionKey: "ext-short" }), 2)))
    expect(Chunk.toArray(events).map((e) => [e.type, e.actor])).toEqual([
      ["approval.requested", undefined],
      ["approval.extended", "ana"]
    ])
  })

  test("audit: the log in order, filtered by session, after a sequence number; text and JSON lines", async () => {
    const id = await f.pause(bash("aud", "c1"))
    await toolgate(["deny", id, ...db, "--reason", "no", "--actor", "ana"])
    const events = (await toolgate(["audit", ...db, "--session", "aud", "--json"])).stdout.trim().split("\n").map((
      line
    ) => JSON.parse(line))
    expect(events.map((e) => `${e.type} ${e.outcome}`)).toEqual([
      "approval.requested pending",
      "approval.resolved denied"
    ])
    expect(events[1]).toMatchObject({ requestId: id, actor: "ana", reason: "no", sessionKey: "aud" })

    const all = (await toolgateHere(["audit", ...db, "--json"])).stdout.trim().split("\n").map((line) =>
      JSON.parse(line).seq
    )
    expect(all).toEqual([...all].sort((a, b) => a - b))
    const after = (await toolgateHere(["audit", ...db, "--json", "--after", String(events[0].seq)])).stdout.trim()
      .split("\n")
    expect(JSON.parse(after[0]!).seq).toBe(events[0].seq + 1)

    const text = await toolgate(["audit", ...db, "--session", "aud"])
    expect(text.stdout.trim().split("\n")[1]).toMatch(
      new RegExp(
        `^#${
          events[1].seq
        }  \\S+Z  approval.resolved  denied  session=aud  tool=bash  request=${id}  rule=requireApproval\\[0\\]  by=ana  reason="no"$`
      )
    )
  })

  test("audit --follow prints the log, then a decision made later in another process", async () => {
    const id = await f.pause(bash("follow", "c1"))
    const follower = start(["audit", "--follow", "--json", ...db, "--session", "follow"])
    try {
      await follower.line(/"approval\.requested"/)
      await run(f.gate.respond(id, { decision: "approve_once", respondedBy: "agent-side" }))
      const resolved = JSON.parse(await follower.line(/"approval\.resolved"/))
      expect(resolved).toMatchObject({ requestId: id, outcome: "approved", actor: "agent-side" })
    } finally {
      expect(await follower.stop()).toBe(0)
    }
  })

  test("environment: TOOLGATE_DB and TOOLGATE_POLICY", async () => {
    const id = await f.pause(bash("env", "c1"))
    const pending = await toolgateJson(["pending", "--session", "env"], { TOOLGATE_DB: f.db })
    expect(pending[0].requestId).toBe(id)
    const edited = await toolgateJson(["approve", id, "--args", "{\"command\":\"echo env\"}"], {
      TOOLGATE_DB: f.db,
      TOOLGATE_POLICY: f.policyFile
    })
    expect(edited.status).toBe("approved")
  })

  test("an invalid --policy stops the command with its problems (exit 1); an unusable file exits 8", async () => {
    const bad = await toolgate(["pending", ...db, "--policy", "examples/quickstart.ts"])
    expect(bad.code).toBe(1)
    expect(bad.stderr.trim()).toBe(
      "toolgate: Invalid policy examples/quickstart.ts: unknown file type: expected a .json, .yaml or .yml file"
    )

    const notADatabase = `${f.dir}/policy.yaml`
    const broken = await toolgate(["pending", "--db", notADatabase])
    expect(broken.code).toBe(8)
    expect(broken.stderr).toStartWith("toolgate: Approval store failed during ")
    expect(broken.stderr.trim().split("\n")).toHaveLength(1)
  })

  test(
    "demo runs the README demo: the agent pauses, toolgate approves from another process, the agent resumes",
    async () => {
      const demo = await toolgate(["demo"])
      expect(demo.code).toBe(0)
      expect(demo.stdout).toMatch(/\$ npx toolgate approve req_[0-9a-f-]{36} --db \.toolgate\/demo\.db\napproved req_/)
      expect(demo.stdout).toContain("done after 2 model turns.")
    },
    60_000
  )
})
