/**
 * `toolgate audit verify` as users run it (Node processes of the bin): on the SQLite file an
 * untouched log verifies and prints its head, which verifies again as `--anchor`; an event edited
 * or deleted in the file is reported with its seq and exit 1; through `toolgate serve` with a
 * token, the server's report, and a token limited to some sessions is refused.
 */
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { join } from "node:path"
import { type Fixture, fixture, type Running, serve, toolgate, toolgateHere } from "./support/cli.js"

/** A fixture with events in its log: a request paused (and so its event) per call. */
const withEvents = async (calls = 4) => {
  const f = await fixture()
  for (let i = 0; i < calls; i++) {
    await f.pause({ id: `c${i}`, name: "bash", sessionKey: i % 2 === 0 ? "team-a-1" : "other", args: { n: i } })
  }
  return f
}

/** Edits the fixture's file as anyone holding it could. */
const edit = (f: Fixture, statement: string) => {
  const db = new Database(f.db)
  try {
    db.run("PRAGMA busy_timeout = 5000")
    db.run(statement)
  } finally {
    db.close()
  }
}

describe("toolgate audit verify on the SQLite file", () => {
  let f: Fixture
  beforeAll(async () => {
    f = await withEvents()
  }, 60_000)
  afterAll(() => f.close())

  test("an untouched log verifies and prints its head; the head verifies again as --anchor; --json the report", async () => {
    const verified = await toolgate(["audit", "verify", "--db", f.db])
    expect(verified.stderr).toBe("")
    expect(verified.code).toBe(0)
    expect(verified.stdout).toContain("audit log verified: 4 event(s), chained from seq 1")
    const anchor = verified.stdout.match(/^head: (4:[0-9a-f]{64})$/m)![1]!
    // a subcommand's own options come first (@effect/cli), or the parent's before `verify`
    const again = await toolgate(["audit", "verify", "--anchor", anchor, "--db", f.db])
    expect(again.code).toBe(0)
    expect((await toolgateHere(["audit", "--db", f.db, "verify", "--anchor", anchor])).code).toBe(0)
    const json = await toolgate(["audit", "verify", "--db", f.db, "--json"])
    expect(json.code).toBe(0)
    expect(JSON.parse(json.stdout)).toEqual({
      valid: true,
      events: 4,
      chainStart: 1,
      head: { seq: 4, hash: anchor.slice(2) }
    })
  })

  test("an anchor that no longer holds: exit 1 with the seq; a malformed one is a usage error", async () => {
    const wrong = await toolgate(["audit", "verify", "--anchor", `2:${"0".repeat(64)}`, "--db", f.db])
    expect(wrong.code).toBe(1)
    expect(wrong.stdout).toContain("audit log broken at seq 2 (anchor)")
    const beyond = await toolgateHere(["audit", "verify", "--anchor", `9:${"0".repeat(64)}`, "--db", f.db])
    expect(beyond.code).toBe(1)
    expect(beyond.stdout).toContain("audit log broken at seq 5 (missing)")
    const malformed = await toolgateHere(["audit", "verify", "--anchor", "4-abc", "--db", f.db])
    expect(malformed.code).toBe(2)
    expect(malformed.stderr).toContain("--anchor")
  })

  test("a mistyped --db is a usage error, and no file is created", async () => {
    const missing = await toolgateHere(["audit", "verify", "--db", join(f.dir, "nope.db")])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("no database at")
  })
})

describe("toolgate audit verify on a tampered file", () => {
  test("an event edited in the file: exit 1, reported at its seq as altered", async () => {
    const f = await withEvents()
    try {
      edit(f, `UPDATE toolgate_events SET event = replace(event, '"c2"', '"c9"') WHERE seq = 3`)
      const result = await toolgate(["audit", "verify", "--db", f.db])
      expect(result.code).toBe(1)
      expect(result.stdout).toContain("audit log broken at seq 3 (altered)")
      expect(result.stdout).toContain("2 event(s) before it verified")
    } finally {
      await f.close()
    }
  }, 60_000)

  test("an event deleted from the file: exit 1, reported as its seq missing", async () => {
    const f = await withEvents()
    try {
      edit(f, "DELETE FROM toolgate_events WHERE seq = 2")
      const result = await toolgate(["audit", "verify", "--db", f.db, "--json"])
      expect(result.code).toBe(1)
      expect(JSON.parse(result.stdout)).toMatchObject({ valid: false, events: 1, problem: { seq: 2, kind: "missing" } })
    } finally {
      await f.close()
    }
  }, 60_000)
})

describe("toolgate audit verify through a server", () => {
  const tokens = { auditor: "auditor-token-0123456789", teamA: "team-a-approver-token-0123" }
  let f: Fixture
  let server: Running
  let url: string
  beforeAll(async () => {
    f = await withEvents()
    ;({ server, url } = await serve(f, [
      { token: tokens.auditor, name: "audit-bot", role: "auditor" },
      { token: tokens.teamA, name: "alice", role: "approver", sessions: ["team-a-*"] }
    ]))
  }, 60_000)
  afterAll(async () => {
    expect(await server.stop()).toBe(0)
    await f.close()
  })

  test("an auditor's token: the server's report; a token limited to some sessions: refused (exit 7)", async () => {
    const verified = await toolgate(["audit", "verify", "--server", url, "--token", tokens.auditor])
    expect(verified.stderr).toBe("")
    expect(verified.code).toBe(0)
    expect(verified.stdout).toMatch(/^head: 4:[0-9a-f]{64}$/m)
    edit(f, `UPDATE toolgate_events SET event = replace(event, '"c3"', '"c9"') WHERE seq = 4`)
    const broken = await toolgate(["audit", "verify", "--server", url, "--token", tokens.auditor])
    expect(broken.code).toBe(1)
    expect(broken.stdout).toContain("audit log broken at seq 4 (altered)")
    const limited = await toolgate(["audit", "verify", "--server", url, "--token", tokens.teamA])
    expect(limited.code).toBe(7)
    expect(limited.stderr).toContain("limited to some sessions")
  }, 60_000)
})
