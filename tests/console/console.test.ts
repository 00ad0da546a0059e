/**
 * The web console in headless Chromium against a real server on loopback over a SQLite file:
 * listing, every kind of answer (checked through the API and the audit log), reload, dismissing,
 * two tabs, live updates through the audit stream, expiry, tokens.
 */
import type { ApprovalRequest, AuditEvent } from "@tool-gate/core"
import { ToolCall } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, Schedule } from "effect"
import { bash, paused, startServer, type TestServer } from "../server/support/server.js"
import { card, cardCount, describeBrowser, openConsole, ui } from "./support/browser.js"

/** The request as the API has it now. */
const fetchRequest = (server: TestServer, requestId: string) =>
  Effect.map(server.request("GET", `/approvals/${requestId}`), (reply) => reply.json as ApprovalRequest.ApprovalRequest)

const resolvedEvents = (server: TestServer, requestId: string) =>
  Effect.map(
    server.store.events({ limit: 1000 }),
    (events): Array<AuditEvent.AuditEvent> =>
      events.filter((event) => event.requestId === requestId && event.type === "approval.resolved")
  )

describeBrowser("web console", (it) => {
  it.live("lists every pending request grouped by session, with tool, args, agent, intent, rule and time left", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const sessions = ["s-b", "s-a", "s-c"]
      for (let i = 0; i < 30; i++) {
        const sessionKey = sessions[i % 3]!
        yield* paused(server.gate, { ...bash(sessionKey, `c${i}`), agentId: `agent-${i}`, intentId: `intent-${i}` })
      }
      // arguments come from agents: markup in them is text, never a live element
      const markup = yield* paused(server.gate, bash("s-a", "markup", `<img src=x onerror="window.pwned=1">`))
      const page = yield* openConsole(server)
      yield* cardCount(page, 31)
      expect(
        yield* ui(() =>
          page.locator("section.session").evaluateAll((s) => s.map((e) => e.getAttribute("data-session")))
        )
      )
        .toEqual(["s-a", "s-b", "s-c"])
      for (const sessionKey of sessions) {
        const expected = sessionKey === "s-a" ? 11 : 10
        expect(yield* ui(() => page.locator(`section[data-session="${sessionKey}"] article.request`).count())).toBe(
          expected
        )
      }
      expect(yield* ui(() => page.locator("#pending-count").textContent())).toBe("31 pending")

      const [first] = yield* server.gate.pending({ sessionKey: ToolCall.SessionKey.make("s-b") })
      const text = yield* ui(() => card(page, first!.requestId).innerText())
      expect(text).toContain("bash")
      expect(text).toContain(`"command": "echo c0"`)
      expect(text).toContain("agent-0")
      expect(text).toContain("intent-0")
      expect(text).toContain("requireApproval[0]")
      expect(text).toMatch(/[45]:\d\d left/)

      expect(yield* ui(() => card(page, markup).locator("pre.args").textContent())).toContain(`<img src=x onerror=`)
      expect(yield* ui(() => card(page, markup).locator("img").count())).toBe(0)
      expect(yield* ui(() => page.evaluate("window.pwned"))).toBeUndefined()
    }))

  it.live("approve once: the request is approved by the token's name and leaves the list", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server)
      yield* ui(() => card(page, requestId).getByRole("button", { name: "Approve once" }).click())
      yield* ui(() => card(page, requestId).waitFor({ state: "detached" }))
      const request = yield* fetchRequest(server, requestId)
      expect(request).toMatchObject({
        status: "approved",
        resolution: { decision: "approve_once", respondedBy: "ana" }
      })
      yield* ui(() => page.getByText("bash in session s-1: approved once by ana").waitFor())
    }))

  it.live("approve for the session, with the exact arguments or the whole tool", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const exact = yield* paused(server.gate, bash("s-1", "c1", "npm test"))
      const tool = yield* paused(server.gate, bash("s-2", "c2", "npm run lint"))
      const page = yield* openConsole(server)

      yield* ui(async () => {
        await card(page, exact).getByLabel("Session approval scope").selectOption("exact")
        await card(page, exact).getByRole("button", { name: "Approve for session" }).click()
        await card(page, exact).waitFor({ state: "detached" })
        await card(page, tool).getByLabel("Session approval scope").selectOption("tool")
        await card(page, tool).getByRole("button", { name: "Approve for session" }).click()
        await card(page, tool).waitFor({ state: "detached" })
      })

      const s1 = (yield* server.request("GET", "/sessions/s-1/approvals")).json
      expect(s1).toHaveLength(1)
      expect(s1[0]).toMatchObject({
        toolName: "bash",
        scope: "exact",
        args: `{"command":"npm test"}`,
        grantedBy: "ana"
      })
      const s2 = (yield* server.request("GET", "/sessions/s-2/approvals")).json
      expect(s2).toHaveLength(1)
      expect(s2[0]).toMatchObject({ toolName: "bash", scope: "tool", grantedBy: "ana" })
      expect((yield* fetchRequest(server, tool)).resolution).toMatchObject({ decision: "approve_session" })
    }))

  it.live("deny with a reason: the request and its audit event carry it", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1", "rm -rf /tmp/x"))
      const page = yield* openConsole(server)
      yield* ui(async () => {
        await card(page, requestId).getByRole("button", { name: "Deny…" }).click()
        await card(page, requestId).getByLabel("Reason").fill("not on a Friday")
        await card(page, requestId).getByRole("button", { name: "Deny", exact: true }).click()
        await card(page, requestId).waitFor({ state: "detached" })
      })
      const request = yield* fetchRequest(server, requestId)
      expect(request).toMatchObject({
        status: "denied",
        resolution: { decision: "deny", reason: "not on a Friday", respondedBy: "ana" }
      })
      const events = yield* resolvedEvents(server, requestId)
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({ outcome: "denied", reason: "not on a Friday", actor: "ana" })
    }))

  it.live("edit args then approve: invalid JSON is refused in the page, the edit is what gets approved", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1", "rm -rf build"))
      const page = yield* openConsole(server)
      const target = card(page, requestId)
      const approve = target.getByRole("button", { name: "Approve with these arguments" })
      yield* ui(async () => {
        await target.getByRole("button", { name: "Edit args…" }).click()
        await target.getByLabel("Arguments (JSON)").fill(`{"command": "rm -rf build/tmp"`)
        await target.getByText(/^Not valid JSON/).waitFor()
      })
      expect(yield* ui(() => approve.isDisabled())).toBe(true)
      yield* ui(async () => {
        await target.getByLabel("Arguments (JSON)").fill(`["rm"]`)
        await target.getByText("The arguments must be a JSON object ({ ... })").waitFor()
        await target.getByLabel("Arguments (JSON)").fill(`{"command": "rm -rf build/tmp"}`)
        await approve.click()
        await target.waitFor({ state: "detached" })
      })
      const request = yield* fetchRequest(server, requestId)
      expect(request).toMatchObject({
        status: "approved",
        toolCall: { args: { command: "rm -rf build" } },
        resolution: { decision: "approve_once", editedArgs: { command: "rm -rf build/tmp" } }
      })
      const [event] = yield* resolvedEvents(server, requestId)
      expect(event).toMatchObject({ args: `{"command":"rm -rf build"}`, editedArgs: `{"command":"rm -rf build/tmp"}` })
    }))

  it.live("reload keeps the token and shows everything still pending, dismissed ones too", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const ids = [
        yield* paused(server.gate, bash("s-1", "c1")),
        yield* paused(server.gate, bash("s-1", "c2")),
        yield* paused(server.gate, bash("s-2", "c3"))
      ]
      const page = yield* openConsole(server)
      yield* cardCount(page, 3)
      yield* ui(async () => {
        await card(page, ids[0]!).getByRole("button", { name: "Approve once" }).click()
        await card(page, ids[0]!).waitFor({ state: "detached" })
        await card(page, ids[1]!).getByRole("button", { name: "Later" }).click()
        await card(page, ids[1]!).waitFor({ state: "hidden" })
        await page.reload()
      })
      yield* cardCount(page, 2)
      yield* ui(async () => {
        await card(page, ids[1]!).waitFor({ state: "visible" })
        await card(page, ids[2]!).waitFor({ state: "visible" })
      })
      expect(yield* ui(() => page.getByLabel("Token").isVisible())).toBe(false)
      expect(page.url()).toBe(`${server.url}/console`)
      expect(yield* ui(() => page.locator("#pending-count").textContent())).toBe("2 pending")
    }))

  it.live("a dismissed request is hidden, counted, and reopened from the dismissed counter", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const kept = yield* paused(server.gate, bash("s-1", "c1"))
      const later = yield* paused(server.gate, bash("s-1", "c2", "make deploy"))
      const page = yield* openConsole(server)
      yield* cardCount(page, 2)
      yield* ui(async () => {
        await card(page, later).getByRole("button", { name: "Later" }).click()
        await card(page, later).waitFor({ state: "hidden" })
        await page.getByRole("button", { name: "1 dismissed" }).click()
        const entry = page.locator(`#dismissed-list li[data-request-id="${later}"]`)
        await entry.getByText(/^bash {"command":"make deploy"} · session s-1 · \d+:\d\d left/).waitFor()
        await entry.getByRole("button", { name: "Reopen" }).click()
        await card(page, later).waitFor({ state: "visible" })
        await page.getByRole("button", { name: /dismissed/ }).waitFor({ state: "hidden" })
      })
      expect(yield* ui(() => card(page, kept).isVisible())).toBe(true)
      expect(yield* ui(() => page.locator("#pending-count").textContent())).toBe("2 pending")
      // the request was only hidden here; the server still has it pending
      expect((yield* fetchRequest(server, later)).status).toBe("pending")
    }))

  it.live("two tabs: an answer in one removes the request from the other", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const other = yield* paused(server.gate, bash("s-1", "c2"))
      const a = yield* openConsole(server)
      const b = yield* openConsole(server)
      yield* ui(async () => {
        await b.locator("#live").getByText("live").waitFor()
        await card(b, requestId).waitFor()
        await card(a, requestId).getByRole("button", { name: "Approve once" }).click()
        await card(b, requestId).waitFor({ state: "detached" })
      })
      expect(yield* ui(() => card(b, other).isVisible())).toBe(true)
      expect(yield* ui(() => b.locator("#pending-count").textContent())).toBe("1 pending")
    }))

  it.live("a stale tab's different answer gets the server's 409 message; exactly one decision is recorded", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const a = yield* openConsole(server)
      // tab B gets no stream, so it still shows the request after tab A answered it
      const b = yield* openConsole(server, {
        before: (page) => page.route("**/audit/stream", (route) => route.abort())
      })
      yield* ui(async () => {
        await card(a, requestId).getByRole("button", { name: "Approve once" }).click()
        await card(a, requestId).waitFor({ state: "detached" })
      })
      expect((yield* fetchRequest(server, requestId)).status).toBe("approved")
      yield* ui(async () => {
        await card(b, requestId).getByRole("button", { name: "Deny…" }).click()
        await card(b, requestId).getByLabel("Reason").fill("too late")
        await card(b, requestId).getByRole("button", { name: "Deny", exact: true }).click()
        await b.getByRole("alert").getByText(
          `Approval request ${requestId} was already approved by ana; this answer was not applied`
        ).waitFor()
        await card(b, requestId).waitFor({ state: "detached" })
      })
      expect(yield* resolvedEvents(server, requestId)).toHaveLength(1)
      expect((yield* fetchRequest(server, requestId)).resolution).toMatchObject({ decision: "approve_once" })
    }))

  it.live("a stale tab's same answer is not applied twice: it shows who answered first; one decision is recorded", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      // no stream: the page does not hear that bob answered
      const page = yield* openConsole(server, {
        before: (page) => page.route("**/audit/stream", (route) => route.abort())
      })
      yield* ui(() => card(page, requestId).waitFor())
      yield* server.gate.respond(requestId, { decision: "approve_once", respondedBy: "bob" })
      yield* ui(async () => {
        await card(page, requestId).getByRole("button", { name: "Approve once" }).click()
        await page.getByText("bash in session s-1: approved once by bob").waitFor()
        await card(page, requestId).waitFor({ state: "detached" })
      })
      const events = yield* resolvedEvents(server, requestId)
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({ actor: "bob" })
    }))

  it.live("a request made after the page loaded appears live, in its session's group", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server)
      yield* ui(() => page.locator("#live").getByText("live").waitFor())
      const fresh = yield* paused(server.gate, { ...bash("s-2", "c2", "terraform apply"), agentId: "infra-bot" })
      yield* ui(() => page.locator(`section[data-session="s-2"]`).locator(card(page, fresh)).waitFor())
      expect(yield* ui(() => card(page, fresh).innerText())).toContain("infra-bot")
      expect(yield* ui(() => page.locator("#pending-count").textContent())).toBe("2 pending")
    }))

  it.live("after a dropped stream the console reconnects with Last-Event-ID and gets what it missed", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      for (let i = 0; i < 11; i++) yield* paused(server.gate, bash("s-1", `c${i}`))
      const lastSeq = yield* server.store.lastSeq
      const lastEventIds: Array<string | undefined> = []
      const auditReads: Array<string> = []
      let missed: string | undefined
      const page = yield* openConsole(server, {
        before: (page) =>
          Promise.all([
            page.route((url) => url.pathname === "/audit" || url.pathname === "/audit/head", (route) => {
              auditReads.push(new URL(route.request().url()).pathname)
              return route.continue()
            }),
            page.route("**/audit/stream", async (route) => {
              lastEventIds.push(route.request().headers()["last-event-id"])
              if (lastEventIds.length > 1) return route.continue()
              // the first connection fails; meanwhile a request is made
              missed = await Effect.runPromise(paused(server.gate, bash("s-1", "missed")))
              return route.abort()
            })
          ])
      })
      yield* ui(() => page.locator("article.request").nth(11).waitFor())
      // the page resumes from the log's head, asked once
      expect(auditReads).toEqual(["/audit/head"])
      expect(lastEventIds.slice(0, 2)).toEqual([String(lastSeq), String(lastSeq)])
      yield* ui(() => card(page, missed!).waitFor())
    }))

  it.live("an event the page could not handle is handled again after reconnecting", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* paused(server.gate, bash("s-1", "c1"))
      const lookups: Array<string> = []
      const page = yield* openConsole(server, {
        // the first look-up of one request, made for its stream event, fails
        before: (page) =>
          page.route((url) => /^\/approvals\/req_[^/]+$/.test(url.pathname), (route) => {
            lookups.push(route.request().url())
            return lookups.length === 1 ? route.abort() : route.continue()
          })
      })
      yield* ui(() => page.locator("#live").getByText("live").waitFor())
      const fresh = yield* paused(server.gate, bash("s-1", "c2"))
      yield* ui(() => card(page, fresh).waitFor())
      expect(lookups).toEqual([`${server.url}/approvals/${fresh}`, `${server.url}/approvals/${fresh}`])
    }))

  it.live("a request that expires leaves the list", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server)
      yield* ui(() => card(page, requestId).waitFor())
      yield* server.gate.extend(requestId, "300 millis", "ops", { allowShorten: true })
      yield* ui(() => card(page, requestId).waitFor({ state: "detached" }))
      yield* ui(() => page.getByText("Nothing is waiting for approval.").waitFor())
    }))

  it.live("answering a request that expired unseen shows the server's 410 message", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      // no stream: the page never hears of the shorter TTL or the expiry
      const page = yield* openConsole(server, {
        before: (page) => page.route("**/audit/stream", (route) => route.abort())
      })
      yield* ui(() => card(page, requestId).waitFor())
      yield* server.gate.extend(requestId, "50 millis", "ops", { allowShorten: true })
      yield* fetchRequest(server, requestId).pipe(
        Effect.filterOrFail((request) => request.status === "expired"),
        Effect.retry(Schedule.spaced("20 millis"))
      )
      yield* ui(async () => {
        await card(page, requestId).getByRole("button", { name: "Approve once" }).click()
        await page.getByRole("alert").getByText(
          new RegExp(`Approval request ${requestId} expired at .*; late answers are refused`)
        )
          .waitFor()
        await card(page, requestId).waitFor({ state: "detached" })
      })
    }))

  it.live("an auditor token sees the list read-only", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server, { token: "auditor" })
      yield* ui(async () => {
        await card(page, requestId).waitFor()
        await page.getByText("Read-only: this token has the auditor role").waitFor()
      })
      for (const name of ["Approve once", "Approve for session", "Deny…", "Edit args…"]) {
        expect(yield* ui(() => page.getByRole("button", { name }).count())).toBe(0)
      }
      expect(yield* ui(() => page.locator("#identity").textContent())).toBe("auditor (read-only)")
      expect((yield* fetchRequest(server, requestId)).status).toBe("pending")
    }))

  it.live("the role comes from /me: shown with nothing pending, and no request ever tries an answer", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const methods: Array<string> = []
      const page = yield* openConsole(server, {
        token: "auditor",
        before: (page) => Promise.resolve(page.on("request", (request) => methods.push(request.method())))
      })
      yield* ui(() => page.getByText("Nothing is waiting for approval.").waitFor())
      yield* ui(() => page.getByText("Read-only: this token has the auditor role").waitFor())
      expect(yield* ui(() => page.locator("#identity").textContent())).toBe("auditor (read-only)")
      expect(yield* ui(() => page.locator("#identity").getAttribute("title"))).toBe("audit-bot")
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      yield* ui(() => card(page, requestId).getByRole("button", { name: "Later" }).waitFor())
      expect(yield* ui(() => card(page, requestId).getByRole("button", { name: "Approve once" }).count())).toBe(0)
      expect(methods.filter((method) => method !== "GET")).toEqual([])
    }))

  it.live("a token limited to some sessions sees only those", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const mine = yield* paused(server.gate, bash("team-a-1", "c1"))
      yield* paused(server.gate, bash("team-b-1", "c2"))
      const page = yield* openConsole(server, { token: "teamA" })
      yield* ui(() => card(page, mine).getByRole("button", { name: "Approve once" }).waitFor())
      yield* cardCount(page, 1)
      expect(yield* ui(() => page.locator("#identity").getAttribute("title"))).toBe("alice: sessions team-a-*")
      // a new request in another team's session never shows up; one in ours does
      yield* paused(server.gate, bash("team-b-1", "c3"))
      const next = yield* paused(server.gate, bash("team-a-1", "c4"))
      yield* ui(() => card(page, next).waitFor())
      yield* cardCount(page, 2)
    }))

  it.live("a wrong token is refused with the server's message and not kept; none goes in the URL", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server, { token: null })
      yield* ui(async () => {
        await page.getByLabel("Token").fill("not-a-token-anyone-issued")
        await page.getByRole("button", { name: "Open console" }).click()
        await page.getByRole("alert").getByText("Unknown bearer token").waitFor()
      })
      expect(yield* ui(() => page.evaluate(`sessionStorage.getItem("toolgate.token")`))).toBeNull()
      expect(yield* ui(() => page.locator("article.request").count())).toBe(0)
      expect(page.url()).toBe(`${server.url}/console`)
    }))
})
