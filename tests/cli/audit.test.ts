/**
 * `toolgate audit` for auditors, on the SQLite file and through a server (the same table of cases
 * in both modes): JSON Lines in the HTTP API's shape (`args` an object, `time` in RFC 3339 beside
 * `at`), the HTTP filters (`--session`, `--tool`, `--outcome`, `--since`, `--until`, times in
 * RFC 3339 or epoch milliseconds), and `--follow` with filters over the server's event stream.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Fixture, fixture, run, type Running, serve, start, toolgate } from "./support/cli.js"

const auditorToken = "auditor-token-0123456789"

let f: Fixture
let server: Running
let url: string

beforeAll(async () => {
  f = await fixture()
  ;({ server, url } = await serve(f, [{ token: auditorToken, name: "audit-bot", role: "auditor" }]))
  // one session's trail: a request (pending) denied by a human, an allowed call, a call the policy denies
  const id = await f.pause({ id: "c1", name: "bash", sessionKey: "jq", args: { command: "deploy", env: "staging" } })
  await run(f.gate.respond(id, { decision: "deny", reason: "not today", respondedBy: "ana" }))
  await run(f.gate.evaluate({ id: "c2", name: "ls", sessionKey: "jq", args: { path: "/tmp" } }))
  await run(f.gate.evaluate({ id: "c3", name: "bash", sessionKey: "jq", args: { command: "rm -rf /" } }))
  await run(f.gate.evaluate({ id: "c4", name: "ls", sessionKey: "other" }))
}, 60_000)

afterAll(async () => {
  expect(await server.stop()).toBe(0)
  await f.close()
})

const modes = {
  file: () => ["--db", f.db],
  server: () => ["--server", url, "--token", auditorToken]
}

/** `toolgate audit ARGS --json` as parsed JSON Lines, failing loudly when the command failed. */
const jsonLines = async (args: ReadonlyArray<string>): Promise<Array<any>> => {
  const result = await toolgate(["audit", ...args, "--json"])
  if (result.code !== 0) throw new Error(`toolgate audit ${args.join(" ")} exited ${result.code}: ${result.stderr}`)
  const text = result.stdout.trimEnd()
  return text === "" ? [] : text.split("\n").map((line) => JSON.parse(line))
}

describe.each(Object.keys(modes) as Array<keyof typeof modes>)("toolgate audit (%s)", (mode) => {
  const target = () => modes[mode]()

  test("JSON Lines: args as objects, time in RFC 3339 beside at", async () => {
    const events = await jsonLines([...target(), "--session", "jq"])
    expect(events.map((e) => `${e.type} ${e.outcome}`)).toEqual([
      "approval.requested pending",
      "approval.resolved denied",
      "decision allow",
      "decision deny"
    ])
    // what `jq '.args.env'` reads
    expect(events[0].args.env).toBe("staging")
    expect(events[1].args).toEqual({ command: "deploy", env: "staging" })
    expect(events[3].args).toEqual({ command: "rm -rf /" })
    for (const event of events) {
      expect(event.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      expect(Date.parse(event.time)).toBe(event.at)
      // seq, at, time lead every line
      expect(Object.keys(event).slice(0, 3)).toEqual(["seq", "at", "time"])
    }
  })

  test("--tool, --outcome and --session narrow the log as GET /audit does", async () => {
    const ls = await jsonLines([...target(), "--tool", "ls"])
    expect(ls.map((e) => [e.toolCallId, e.sessionKey])).toEqual([["c2", "jq"], ["c4", "other"]])
    const denied = await jsonLines([...target(), "--outcome", "denied"])
    expect(denied.map((e) => [e.type, e.reason, e.actor])).toEqual([["approval.resolved", "not today", "ana"]])
    const both = await jsonLines([...target(), "--session", "jq", "--tool", "bash", "--outcome", "deny"])
    expect(both.map((e) => e.toolCallId)).toEqual(["c3"])
  })

  test("--since and --until take RFC 3339 (any offset) and epoch milliseconds, both ends inclusive", async () => {
    const all = await jsonLines([...target()])
    const from = all[1]
    const to = all[3]
    const expected = all.filter((e) => e.at >= from.at && e.at <= to.at).map((e) => e.seq)
    expect(expected.length).toBeGreaterThanOrEqual(3)
    const rfc = await jsonLines([...target(), "--since", from.time, "--until", to.time])
    expect(rfc.map((e) => e.seq)).toEqual(expected)
    const epoch = await jsonLines([...target(), "--since", String(from.at), "--until", String(to.at)])
    expect(epoch.map((e) => e.seq)).toEqual(expected)
    // the same instant written with an offset of +02:00
    const shifted = new Date(from.at + 2 * 3_600_000).toISOString().replace("Z", "+02:00")
    const offset = await jsonLines([...target(), "--since", shifted, "--until", to.time])
    expect(offset.map((e) => e.seq)).toEqual(expected)
    expect(await jsonLines([...target(), "--since", new Date(all.at(-1).at + 1).toISOString()])).toEqual([])
  })

  test("a time that is not one is a usage error naming the option; nothing is read", async () => {
    for (
      const [option, value] of [
        ["--since", "2026-02-30T00:00:00Z"],
        ["--until", "yesterday"],
        ["--since", "2026-11-24T24:00:00Z"],
        ["--until", "Infinity"]
      ] as const
    ) {
      const result = await toolgate(["audit", ...target(), option, value])
      expect({ option, value, code: result.code }).toEqual({ option, value, code: 2 })
      expect(result.stderr).toContain(`${option} must be an RFC 3339 date-time`)
      expect(result.stdout).toBe("")
    }
  })
})

test("audit --follow through the server: the filters hold for the replay and the live tail", async () => {
  const follower = start([
    "audit",
    "--follow",
    "--json",
    ...modes.server(),
    "--tool",
    "ls",
    "--since",
    new Date(Date.now() - 3_600_000).toISOString()
  ])
  try {
    await follower.line(/"toolCallId":"c4"/)
    await run(f.gate.evaluate({ id: "live-bash", name: "bash", sessionKey: "live", args: { command: "rm x" } }))
    await run(f.gate.evaluate({ id: "live-ls", name: "ls", sessionKey: "live", args: { path: "/" } }))
    const live = JSON.parse(await follower.line(/"toolCallId":"live-ls"/))
    expect(live.args).toEqual({ path: "/" })
    expect(follower.lines.map((line) => JSON.parse(line).toolCallId)).toEqual(["c2", "c4", "live-ls"])
  } finally {
    expect(await follower.stop()).toBe(0)
  }
})
