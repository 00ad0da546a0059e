/**
 * Bearer tokens: loading (file, environment, JSON) with every problem reported, constant-time
 * verification, roles (auditors read, approvers answer) and session patterns (a token for
 * `team-a-*` neither sees nor answers `team-b-1`), against a real server.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { ToolCall } from "@tool-gate/core"
import { Auth } from "@tool-gate/server"
import { expect, test } from "bun:test"
import { ConfigProvider, Effect, Either, Redacted } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, it } from "../support/effectTest.js"
import { tempDir } from "../support/sqlStores.js"
import { bash, paused, startServer, tokenList } from "./support/server.js"
import { openStream } from "./support/sse.js"

const failure = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.flip(effect))

describe("token lists", () => {
  test("valid JSON gives the tokens", async () => {
    const tokens = await Effect.runPromise(Auth.fromJson(JSON.stringify(tokenList)))
    expect(tokens).toEqual(tokenList)
  })

  test("every problem is reported with its path", async () => {
    const error = await failure(Auth.fromJson(
      JSON.stringify([
        { token: "short", name: " ", role: "admin", sessions: ["team-\\"], extra: 1 },
        { token: "a-long-enough-token-1", name: "ana", role: "approver", sessions: [] },
        { token: "a-long-enough-token-1", name: "bob", role: "auditor" }
      ]),
      "tokens.json"
    ))
    expect(error._tag).toBe("TokensInvalid")
    expect(error.source).toBe("tokens.json")
    expect(error.problems.map((p) => p.path)).toEqual(expect.arrayContaining([
      "0.token",
      "0.name",
      "0.role",
      "0.sessions.0",
      "0.extra",
      "1.sessions"
    ]))
    expect(error.message).toContain("0.token: a token must be at least 16 characters long")
    const duplicate = await failure(Auth.fromJson(JSON.stringify([
      { token: "a-long-enough-token-1", name: "ana", role: "approver" },
      { token: "a-long-enough-token-1", name: "bob", role: "auditor" }
    ])))
    expect(duplicate.problems).toEqual([{ path: "1.token", message: "the same token is listed twice" }])
    const empty = await failure(Auth.fromJson("[]"))
    expect(empty.problems).toEqual([{ path: "", message: "at least one token is needed" }])
    const notJson = await failure(Auth.fromJson("{tokens"))
    expect(notJson.problems[0]!.message).toStartWith("not valid JSON")
  })

  test("from the TOOLGATE_TOKENS environment variable (through Config)", async () => {
    const withEnv = (env: Map<string, string>) =>
      Auth.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(env)))
    const tokens = await Effect.runPromise(withEnv(new Map([["TOOLGATE_TOKENS", JSON.stringify(tokenList)]])))
    expect(tokens).toEqual(tokenList)
    const unset = await failure(withEnv(new Map()))
    expect(unset.message).toBe("Invalid API tokens (TOOLGATE_TOKENS): is not set")
  })

  test("from a JSON file", async () => {
    const result = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* tempDir
        const path = join(dir, "tokens.json")
        writeFileSync(path, JSON.stringify(tokenList))
        const tokens = yield* Auth.fromFile(path)
        const missing = yield* Effect.flip(Auth.fromFile(join(dir, "missing.json")))
        return { tokens, missing }
      })).pipe(Effect.provide(NodeFileSystem.layer))
    )
    expect(result.tokens).toEqual(tokenList)
    expect(result.missing._tag).toBe("TokensInvalid")
    expect(result.missing.source).toEndWith("missing.json")
  })

  test("verification: the exact token only (not a prefix, not an extension, not empty)", async () => {
    const verify = Auth.makeVerifier(tokenList)
    const check = (token: string) =>
      Effect.runPromise(Effect.either(verify(Redacted.make(token)))).then((result) =>
        Either.isRight(result) ? result.right.name : result.left.message
      )
    expect(await check(tokenList[0]!.token)).toBe("ana")
    expect(await check(tokenList[2]!.token)).toBe("alice")
    expect(await check(tokenList[0]!.token.slice(0, -1))).toBe("Unknown bearer token")
    expect(await check(`${tokenList[0]!.token}x`)).toBe("Unknown bearer token")
    expect(await check("")).toStartWith("Missing bearer token")
  })
})

describe("roles and session patterns over HTTP", () => {
  it.live("no token or an unknown token: 401 with a Bearer challenge", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      for (const token of [null, "not-a-real-token-000000", "Basic YW5hOnNlY3JldA=="]) {
        const reply = yield* server.request("GET", "/approvals/pending", {
          token: null,
          headers: token === null ? {} : { authorization: token.startsWith("Basic") ? token : `Bearer ${token}` }
        })
        expect(reply.status).toBe(401)
        expect(reply.json._tag).toBe("Unauthorized")
        expect(reply.headers.get("www-authenticate")).toBe("Bearer realm=\"tool-gate\"")
      }
    }))

  it.live("an auditor reads everything but cannot answer (403)", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s1", "c1"))
      yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("s2"), true)
      const reads = [
        "/approvals/pending",
        `/approvals/${requestId}`,
        "/sessions/s2/approvals",
        "/audit"
      ]
      for (const path of reads) expect((yield* server.request("GET", path, { token: "auditor" })).status).toBe(200)
      // every write endpoint's 403 is in the bad-inputs table
      const answer = yield* server.request("POST", `/approvals/${requestId}/respond`, {
        token: "auditor",
        body: { decision: "approve_once" }
      })
      expect(answer.status).toBe(403)
      expect(answer.json).toEqual({
        _tag: "Forbidden",
        message: "Token \"audit-bot\" has the auditor role; answering needs the approver role"
      })
      expect((yield* server.gate.getRequest(requestId)).status).toBe("pending")
      expect(yield* server.gate.hasApproval("bash", ToolCall.SessionKey.make("s2"))).toBe(true)
    }))

  it.live("a token for team-a-* neither sees nor answers team-b-1", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const a = yield* paused(server.gate, bash("team-a-1", "c1"))
      const b = yield* paused(server.gate, bash("team-b-1", "c2"))
      yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("team-b-1"), true)

      const pending = yield* server.request("GET", "/approvals/pending", { token: "teamA" })
      expect(pending.json.map((r: { requestId: string }) => r.requestId)).toEqual([a])
      // every endpoint's 404 for team-b-1 is in the bad-inputs table
      const refused = yield* server.request("POST", `/approvals/${b}/respond`, {
        token: "teamA",
        body: { decision: "approve_once" }
      })
      expect(refused.status).toBe(404)
      expect((yield* server.gate.getRequest(b)).status).toBe("pending")
      expect(yield* server.gate.hasApproval("bash", ToolCall.SessionKey.make("team-b-1"))).toBe(true)

      const answered = yield* server.request("POST", `/approvals/${a}/respond`, {
        token: "teamA",
        body: { decision: "deny" }
      })
      expect(answered.json.resolution).toMatchObject({ decision: "deny", respondedBy: "alice" })

      // a clear of every session has no session key: only unlimited tokens see it
      yield* server.gate.clearApprovals(undefined, "ops")
      const audit = yield* server.request("GET", "/audit", { token: "teamA" })
      expect(audit.json.length).toBeGreaterThan(0)
      expect(audit.json.every((e: { sessionKey?: string }) => e.sessionKey?.startsWith("team-a-"))).toBe(true)
      const everything = yield* server.request("GET", "/audit", { token: "auditor" })
      expect(everything.json.some((e: { sessionKey?: string }) => e.sessionKey === undefined)).toBe(true)
    }))

  it.live("a limited token cannot tell another session's request, approval or session from a missing one", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const hidden = yield* paused(server.gate, bash("team-b-1", "c1"))
      yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("team-b-1"), true)
      const [grant] = yield* server.gate.sessionApprovals(ToolCall.SessionKey.make("team-b-1"))
      const missing = { request: "req_0000000000000000missing", grant: "sa_0000000000000000missing" }
      /** The same call on what exists in team-b-1 and on what exists nowhere: status and body alike. */
      const same = (
        method: string,
        path: (ids: { request: string; grant: string; session: string }) => string,
        body?: unknown
      ) =>
        Effect.gen(function*() {
          const there = yield* server.request(
            method,
            path({ request: hidden, grant: grant!.id, session: "team-b-1" }),
            { token: "teamA", body }
          )
          const nowhere = yield* server.request(method, path({ ...missing, session: "team-b-nobody" }), {
            token: "teamA",
            body
          })
          expect(there.status).toBe(404)
          expect(nowhere.status).toBe(404)
          const anonymous = (text: string) =>
            text.replaceAll(hidden, "ID").replaceAll(grant!.id, "ID").replaceAll(missing.request, "ID").replaceAll(
              missing.grant,
              "ID"
            )
          expect(anonymous(there.text)).toBe(anonymous(nowhere.text))
          // nothing the caller did not send: not the session, not the token's patterns or name
          for (const secret of ["team-b-1", "team-a", "alice"]) {
            if (!path({ request: hidden, grant: grant!.id, session: "team-b-1" }).includes(secret)) {
              expect(there.text).not.toContain(secret)
            }
          }
        })
      yield* same("GET", ({ request }) => `/approvals/${request}`)
      yield* same("POST", ({ request }) => `/approvals/${request}/respond`, { decision: "approve_once" })
      yield* same("POST", ({ request }) => `/approvals/${request}/extend`, { ttlMs: 1000 })
      yield* same("DELETE", ({ grant }) => `/sessions/team-a-1/approvals/${grant}`)
      yield* same("DELETE", ({ grant, session }) => `/sessions/${session}/approvals/${grant}`)
      yield* same("GET", ({ session }) => `/sessions/${session}/approvals`)
      yield* same("DELETE", ({ session }) => `/sessions/${session}/approvals`)
      yield* same("POST", ({ session }) => `/sessions/${session}/clear`)
      yield* same("GET", ({ session }) => `/approvals/pending?sessionKey=${session}`)
      yield* same("GET", ({ session }) => `/audit?sessionKey=${session}`)
      yield* same("GET", ({ session }) => `/audit/stream?sessionKey=${session}`)
      expect((yield* server.gate.getRequest(hidden)).status).toBe("pending")
      expect(yield* server.gate.hasApproval("bash", ToolCall.SessionKey.make("team-b-1"))).toBe(true)
    }))

  it.live("a limited token's audit query pages past other sessions to fill its limit", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      for (let i = 0; i < 30; i++) yield* server.gate.evaluate({ id: `b${i}`, name: "ls", sessionKey: "team-b-1" })
      for (let i = 0; i < 3; i++) yield* server.gate.evaluate({ id: `a${i}`, name: "ls", sessionKey: "team-a-1" })
      const page = yield* server.request("GET", "/audit?limit=2", { token: "teamA" })
      expect(page.json.map((e: { toolCallId: string }) => e.toolCallId)).toEqual(["a0", "a1"])
      const next = yield* server.request("GET", `/audit?limit=2&afterSeq=${page.json[1].seq}`, { token: "teamA" })
      expect(next.json.map((e: { toolCallId: string }) => e.toolCallId)).toEqual(["a2"])
    }))

  it.live("a limited token's audit query over sparse events: every one found, in order, across page boundaries", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      // 1,203 events, 4 of them in team-a-1, at both ends and around the 500-event page boundary
      const mine = new Set([1, 500, 501, 1203])
      yield* Effect.forEach(Array.from({ length: 1203 }, (_, i) => i + 1), (seq) =>
        server.gate.evaluate({
          id: `e${seq}`,
          name: "ls",
          sessionKey: mine.has(seq) ? "team-a-1" : "team-b-1"
        }), { discard: true })
      const query = (params: string) =>
        Effect.map(
          server.request("GET", `/audit?${params}`, { token: "teamA" }),
          (reply) =>
            reply.json.map((e: { seq: number; sessionKey: string }) => {
              expect(e.sessionKey).toBe("team-a-1")
              return e.seq
            })
        )

      expect(yield* query("limit=1000")).toEqual([1, 500, 501, 1203])
      expect(yield* query("limit=3&afterSeq=1")).toEqual([500, 501, 1203])
      // one event at a time, as a client pages with the last seq it got
      const paged: Array<number> = []
      for (let afterSeq = 0;;) {
        const page = yield* query(`limit=1&afterSeq=${afterSeq}`)
        if (page.length === 0) break
        paged.push(...page)
        afterSeq = page[0]
      }
      expect(paged).toEqual([1, 500, 501, 1203])
      expect(yield* query("limit=1&afterSeq=1203")).toEqual([])
      // an unlimited token pages the whole log
      const all = yield* server.request("GET", "/audit?limit=1000&afterSeq=200", { token: "auditor" })
      expect(all.json.map((e: { seq: number }) => e.seq)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 201))
    }))

  it.live("/me names the token's holder, role and session patterns, never the token", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const me = (token: "approver" | "auditor" | "teamA") => server.request("GET", "/me", { token })
      expect((yield* me("approver")).json).toEqual({ name: "ana", role: "approver" })
      expect((yield* me("auditor")).json).toEqual({ name: "audit-bot", role: "auditor" })
      const teamA = yield* me("teamA")
      expect(teamA.status).toBe(200)
      expect(teamA.json).toEqual({ name: "alice", role: "approver", sessions: ["team-a-*"] })
      expect(teamA.text).not.toContain(tokenList[2]!.token)
      const anonymous = yield* server.request("GET", "/me", { token: null })
      expect(anonymous.status).toBe(401)
      expect(anonymous.json._tag).toBe("Unauthorized")
    }))

  it.live("a limited token's audit stream carries only its sessions", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const stream = yield* openStream(server, { token: "teamA" })
      yield* server.gate.evaluate({ id: "b1", name: "ls", sessionKey: "team-b-1" })
      yield* server.gate.evaluate({ id: "a1", name: "ls", sessionKey: "team-a-1" })
      yield* server.gate.clearApprovals(undefined, "ops")
      yield* server.gate.evaluate({ id: "b2", name: "ls", sessionKey: "team-b-1" })
      yield* server.gate.evaluate({ id: "a2", name: "ls", sessionKey: "team-a-2" })
      const events = yield* stream.take(2)
      expect(events.map((e) => e.data.toolCallId)).toEqual<unknown>(["a1", "a2"])
    }))
})
