/**
 * The approval API's happy paths against a real server on loopback over a SQLite file: every
 * endpoint once, answers waking gate waiters, double answers, expiry and the documentation.
 */
import { AuditEvent, ToolCall } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Either, Fiber, Schema } from "effect"
import { describe, it } from "../support/effectTest.js"
import { awaitPending, bash, paused, startServer } from "./support/server.js"

describe("HTTP approval API", () => {
  it.live("health answers without a token", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const reply = yield* server.request("GET", "/health", { token: null })
      expect(reply.status).toBe(200)
      expect(reply.json).toEqual({ status: "ok" })
    }))

  it.live("pending lists every pending request, oldest first, overall and per session", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const first = yield* paused(server.gate, bash("s1", "c1"))
      const second = yield* paused(server.gate, bash("s2", "c2"))
      const third = yield* paused(server.gate, bash("s1", "c3"))
      const all = yield* server.request("GET", "/approvals/pending")
      expect(all.status).toBe(200)
      expect(all.json.map((r: { requestId: string }) => r.requestId)).toEqual([first, second, third])
      const s1 = yield* server.request("GET", "/approvals/pending?sessionKey=s1")
      expect(s1.json.map((r: { requestId: string }) => r.requestId)).toEqual([first, third])
      expect(s1.json[0]).toMatchObject({ status: "pending", toolCall: { id: "c1", name: "bash", sessionKey: "s1" } })
    }))

  it.live("one request by id", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s1", "c1", "npm test"))
      const reply = yield* server.request("GET", `/approvals/${requestId}`, { token: "auditor" })
      expect(reply.status).toBe(200)
      expect(reply.json).toMatchObject({
        requestId,
        status: "pending",
        toolCall: { args: { command: "npm test" } },
        rule: { id: "requireApproval[0]" }
      })
    }))

  it.live("an answer through HTTP wakes a gate waiter in this process; respondedBy is the token's name", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const waiter = yield* Effect.fork(
        server.gate.gate(bash("s1", "c1"), (allowed) => Effect.succeed(`ran ${allowed.call.args.command}`))
      )
      const [request] = yield* awaitPending(server, 1, "?sessionKey=s1")
      const reply = yield* server.request("POST", `/approvals/${request!.requestId}/respond`, {
        body: { decision: "approve_once", respondedBy: "mallory" }
      })
      expect(reply.status).toBe(200)
      expect(reply.json).toMatchObject({
        status: "approved",
        resolution: { decision: "approve_once", respondedBy: "ana" }
      })
      expect(yield* Fiber.join(waiter)).toBe("ran echo c1")
      const [resolved] = yield* server.store.events({ sessionKey: "s1", outcome: "approved" })
      expect(resolved).toMatchObject({ type: "approval.resolved", actor: "ana" })
    }))

  it.live("approve with edited arguments: the waiter runs the edit", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const waiter = yield* Effect.fork(
        server.gate.gate(bash("s1", "c1", "rm -rf build"), (allowed) => Effect.succeed(allowed.call.args.command))
      )
      const [request] = yield* awaitPending(server)
      const reply = yield* server.request("POST", `/approvals/${request!.requestId}/respond`, {
        body: { decision: "approve_once", editedArgs: { command: "rm -rf build/tmp" } }
      })
      expect(reply.json.resolution.editedArgs).toEqual({ command: "rm -rf build/tmp" })
      expect(yield* Fiber.join(waiter)).toBe("rm -rf build/tmp")
    }))

  it.live("an edit the policy denies: 200 with the request denied by the policy (deniedBy), the waiter denied", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const waiter = yield* Effect.fork(Effect.either(
        server.gate.gate(bash("s1", "c1", "uptime"), (allowed) => Effect.succeed(allowed.call.args.command))
      ))
      const [request] = yield* awaitPending(server)
      const reply = yield* server.request("POST", `/approvals/${request!.requestId}/respond`, {
        body: { decision: "approve_once", editedArgs: { command: "shutdown now" } }
      })
      expect(reply.status).toBe(200)
      expect(reply.json).toMatchObject({
        status: "denied",
        resolution: {
          status: "denied",
          decision: "approve_once",
          deniedBy: "policy",
          respondedBy: "ana",
          editedArgs: { command: "shutdown now" },
          reason: expect.stringContaining("no-shutdown")
        }
      })
      expect((yield* server.request("GET", `/approvals/${request!.requestId}`)).json.resolution.deniedBy).toBe("policy")
      const outcome = yield* Fiber.join(waiter)
      expect(Either.isLeft(outcome) && outcome.left._tag).toBe("ToolDenied")
    }))

  it.live("deny with a reason: the waiter fails with ToolDenied carrying it", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const waiter = yield* Effect.fork(Effect.either(server.gate.gate(bash("s1", "c1"), () => Effect.succeed("ran"))))
      const [request] = yield* awaitPending(server)
      const reply = yield* server.request("POST", `/approvals/${request!.requestId}/respond`, {
        body: { decision: "deny", reason: "not on a Friday" }
      })
      expect(reply.json).toMatchObject({ status: "denied", resolution: { reason: "not on a Friday" } })
      const result = yield* Fiber.join(waiter)
      if (Either.isRight(result)) throw new Error("expected a denial")
      expect(result.left).toMatchObject({ _tag: "ToolDenied", outcome: "denied", reason: "not on a Friday" })
    }))

  it.live("two clients answer the same request at once: one wins, the other gets 409 with a message", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("team-a-1", "c1"))
      const path = `/approvals/${requestId}/respond`
      const [ana, alice] = yield* Effect.all([
        server.request("POST", path, { body: { decision: "approve_once" } }),
        server.request("POST", path, { token: "teamA", body: { decision: "deny", reason: "no" } })
      ], { concurrency: 2 })
      const replies = [ana!, alice!].sort((a, b) => a.status - b.status)
      expect(replies.map((r) => r.status)).toEqual([200, 409])
      const winner = replies[0]!.json.resolution.respondedBy
      expect(replies[1]!.json).toMatchObject({ _tag: "AlreadyResolved", requestId, respondedBy: winner })
      expect(replies[1]!.json.message).toContain(`already ${replies[0]!.json.status} by ${winner}`)
      const events = yield* server.store.events({ sessionKey: "team-a-1" })
      expect(events.filter((e) => e.type === "approval.resolved")).toHaveLength(1)
    }))

  it.live("the same answer twice is idempotent: 200 with the first resolution", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("team-a-1", "c1"))
      const path = `/approvals/${requestId}/respond`
      const first = yield* server.request("POST", path, { body: { decision: "approve_once" } })
      const again = yield* server.request("POST", path, { token: "teamA", body: { decision: "approve_once" } })
      expect([first.status, again.status]).toEqual([200, 200])
      expect(again.json).toEqual(first.json)
      expect(again.json.resolution.respondedBy).toBe("ana")
    }))

  it.live("an answer after the TTL is 410; an unknown id is 404", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, { id: "q1", name: "quick", sessionKey: "s1" })
      expect((yield* server.gate.awaitDecision(requestId)).status).toBe("expired")
      const late = yield* server.request("POST", `/approvals/${requestId}/respond`, {
        body: { decision: "approve_once" }
      })
      expect(late.status).toBe(410)
      expect(late.json).toMatchObject({ _tag: "RequestExpired", requestId })
      expect(late.json.message).toContain("late answers are refused")
      const unknown = yield* server.request("POST", "/approvals/req_nope/respond", { body: { decision: "deny" } })
      expect(unknown.status).toBe(404)
      expect(unknown.json).toEqual({
        _tag: "RequestNotFound",
        requestId: "req_nope",
        message: "No approval request with id req_nope"
      })
    }))

  it.live("extend gives a pending request more time and is audited with the approver", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s1", "c1"))
      const before = yield* server.gate.getRequest(requestId)
      const reply = yield* server.request("POST", `/approvals/${requestId}/extend`, { body: { ttlMs: 3_600_000 } })
      expect(reply.status).toBe(200)
      expect(reply.json.expiresAt).toBeGreaterThan(before.expiresAt + 3_000_000)
      const [extended] = yield* server.store.events({ sessionKey: "s1", outcome: "pending", afterSeq: 1 })
      expect(extended).toMatchObject({ type: "approval.extended", actor: "ana", expiresAt: reply.json.expiresAt })
    }))

  it.live("extend never shortens: a shorter ttlMs keeps the deadline; allowShorten brings it forward", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s1", "c1"))
      const before = yield* server.gate.getRequest(requestId)
      const seq = yield* server.store.lastSeq
      const kept = yield* server.request("POST", `/approvals/${requestId}/extend`, { body: { ttlMs: 60_000 } })
      expect(kept.status).toBe(200)
      expect(kept.json.expiresAt).toBe(before.expiresAt)
      expect(yield* server.store.lastSeq).toBe(seq)
      const notShortened = yield* server.request("POST", `/approvals/${requestId}/extend`, {
        body: { ttlMs: 60_000, allowShorten: false }
      })
      expect(notShortened.json.expiresAt).toBe(before.expiresAt)
      const shortened = yield* server.request("POST", `/approvals/${requestId}/extend`, {
        body: { ttlMs: 60_000, allowShorten: true }
      })
      expect(shortened.status).toBe(200)
      expect(shortened.json.expiresAt).toBeLessThan(before.expiresAt)
      expect((yield* server.gate.getRequest(requestId)).expiresAt).toBe(shortened.json.expiresAt)
      const events = yield* server.store.events({ sessionKey: "s1", afterSeq: seq })
      expect(events.map((e) => [e.type, e.actor, e.expiresAt])).toEqual([
        ["approval.extended", "ana", shortened.json.expiresAt]
      ])
      const bad = yield* server.request("POST", `/approvals/${requestId}/extend`, {
        body: { ttlMs: 60_000, allowShorten: "yes" }
      })
      expect(bad.status).toBe(400)
    }))

  it.live("session approvals: approve for the session, list, revoke one, clear by DELETE and by POST", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s1", "c1"))
      yield* server.request("POST", `/approvals/${requestId}/respond`, {
        body: { decision: "approve_session", scope: "tool" }
      })
      const listed = yield* server.request("GET", "/sessions/s1/approvals", { token: "auditor" })
      expect(listed.status).toBe(200)
      expect(listed.json).toHaveLength(1)
      expect(listed.json[0]).toMatchObject({ sessionKey: "s1", toolName: "bash", scope: "tool", grantedBy: "ana" })
      expect(yield* server.gate.hasApproval("bash", ToolCall.SessionKey.make("s1"))).toBe(true)

      const revoked = yield* server.request("DELETE", `/sessions/s1/approvals/${listed.json[0].id}`)
      expect(revoked.status).toBe(200)
      expect(revoked.json.revokedAt).toBeNumber()
      expect((yield* server.request("GET", "/sessions/s1/approvals")).json).toEqual([])
      expect(yield* server.gate.hasApproval("bash", ToolCall.SessionKey.make("s1"))).toBe(false)

      yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
      yield* server.gate.recordApproval("deploy", ToolCall.SessionKey.make("s1"), true)
      const cleared = yield* server.request("DELETE", "/sessions/s1/approvals")
      expect(cleared.json).toEqual({ sessionKey: "s1", cleared: 2 })
      yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
      const clearedByPost = yield* server.request("POST", "/sessions/s1/clear")
      expect(clearedByPost.json).toEqual({ sessionKey: "s1", cleared: 1 })
      const [clear] = yield* server.store.events({ sessionKey: "s1", outcome: "cleared" })
      expect(clear).toMatchObject({ type: "approvals.cleared", actor: "ana" })
    }))

  it.live("audit query filters by session, tool, outcome, time and sequence, with a limit", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* server.gate.evaluate({ id: "a", name: "ls", sessionKey: "s1" })
      yield* server.gate.evaluate({ id: "b", name: "rm", sessionKey: "s1" })
      yield* server.gate.evaluate({ id: "c", name: "ls", sessionKey: "s2" })
      yield* server.gate.evaluate({ id: "d", name: "LS", sessionKey: "s1" })
      const seqs = (query: string) =>
        Effect.map(server.request("GET", `/audit${query}`, { token: "auditor" }), (r) => {
          expect(r.status).toBe(200)
          return r.json.map((e: { seq: number }) => e.seq)
        })
      expect(yield* seqs("")).toEqual([1, 2, 3, 4])
      expect(yield* seqs("?sessionKey=s1")).toEqual([1, 2, 4])
      expect(yield* seqs("?toolName=ls")).toEqual([1, 3, 4])
      expect(yield* seqs("?outcome=deny")).toEqual([2])
      expect(yield* seqs("?afterSeq=2&limit=1")).toEqual([3])
      const all = yield* server.store.events()
      expect(yield* seqs(`?since=${all[1]!.at}&until=${all[2]!.at}`)).toEqual(
        all.filter((e) => e.at >= all[1]!.at && e.at <= all[2]!.at).map((e) => e.seq)
      )
      const full = yield* server.request("GET", "/audit?limit=2", { token: "auditor" })
      expect(full.json.map((e: unknown) => Schema.decodeUnknownSync(AuditEvent.Json)(e))).toEqual(all.slice(0, 2))
    }))

  it.live("the OpenAPI document and Swagger UI are served", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const spec = yield* server.request("GET", "/openapi.json", { token: null })
      expect(spec.status).toBe(200)
      expect(spec.json.info.title).toBe("tool-gate approval API")
      expect(Object.keys(spec.json.paths)).toEqual(expect.arrayContaining([
        "/approvals/pending",
        "/approvals/{requestId}/respond",
        "/sessions/{sessionKey}/approvals",
        "/audit/stream",
        "/audit/head",
        "/me",
        "/health"
      ]))
      expect(spec.json.paths["/me"].get.security).toEqual([{ bearer: [] }])
      expect(spec.json.paths["/me"].get.responses["200"].content["application/json"].schema).toEqual({
        $ref: "#/components/schemas/Identity"
      })
      expect(spec.json.paths["/health"].get.responses["503"].content["application/json"].schema).toEqual({
        $ref: "#/components/schemas/Unavailable"
      })
      const respond = spec.json.paths["/approvals/{requestId}/respond"].post
      expect(Object.keys(respond.responses)).toEqual(
        expect.arrayContaining(["200", "400", "401", "403", "404", "409", "410", "413", "503"])
      )
      expect(spec.json.components.securitySchemes).toBeDefined()
      const docs = yield* server.request("GET", "/docs", { token: null })
      expect(docs.status).toBe(200)
      expect(docs.headers.get("content-type")).toContain("text/html")
      expect(docs.text).toContain("swagger-ui")
    }))
})
