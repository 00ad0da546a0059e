/**
 * The console's "Extend…" on a card agrees with the API and the CLI: the deadline moves to the
 * chosen time from now when that is later, and a shorter choice keeps it (the page says so, the
 * audit log has no extension for it). Headless Chromium against a real server over SQLite.
 */
import type { ApprovalRequest } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { bash, paused, startServer, type TestServer } from "../server/support/server.js"
import { card, describeBrowser, openConsole, ui } from "./support/browser.js"

const fetchRequest = (server: TestServer, requestId: string) =>
  Effect.map(server.request("GET", `/approvals/${requestId}`), (reply) => reply.json as ApprovalRequest.ApprovalRequest)

const extensions = (server: TestServer, requestId: string) =>
  Effect.map(
    server.store.events({ limit: 1000 }),
    (events) => events.filter((e) => e.requestId === requestId && e.type === "approval.extended")
  )

const extendTo = (page: Page, requestId: string, label: string) =>
  ui(async () => {
    await card(page, requestId).getByRole("button", { name: "Extend…" }).click()
    await card(page, requestId).getByLabel("Expires in").selectOption({ label })
    await card(page, requestId).getByRole("button", { name: "Extend", exact: true }).click()
  })

describeBrowser("web console, extending a request", (it) => {
  it.live("Extend… moves the deadline later; a shorter choice keeps it, and says so", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const before = yield* fetchRequest(server, requestId)
      const page = yield* openConsole(server)

      const asked = Date.now()
      yield* extendTo(page, requestId, "1 hour")
      yield* ui(() =>
        page.getByRole("status").filter({ hasText: "bash in session s-1: extended; it expires at" }).waitFor()
      )
      const extended = yield* fetchRequest(server, requestId)
      expect(extended.status).toBe("pending")
      expect(extended.expiresAt).toBeGreaterThanOrEqual(asked + 3_600_000)
      yield* ui(() => card(page, requestId).locator(".time-left").getByText(/^(1:00:00|0:59:\d\d) left$/).waitFor())
      expect(yield* extensions(server, requestId)).toHaveLength(1)

      // 15 minutes from now is earlier than the deadline: kept
      yield* extendTo(page, requestId, "15 minutes")
      yield* ui(() =>
        page.getByRole("status").filter({ hasText: "bash in session s-1: kept; it already expires at" }).waitFor()
      )
      expect((yield* fetchRequest(server, requestId)).expiresAt).toBe(extended.expiresAt)
      expect(yield* extensions(server, requestId)).toHaveLength(1)
      expect(extended.expiresAt).toBeGreaterThan(before.expiresAt)
      // the card is still there, its buttons usable
      expect(yield* ui(() => card(page, requestId).getByRole("button", { name: "Approve once" }).isEnabled())).toBe(
        true
      )
    }))

  it.live("extending a request answered elsewhere shows the server's 409 and the card goes", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server, {
        before: (page) => page.route("**/audit/stream", (route) => route.abort())
      })
      yield* ui(() => card(page, requestId).waitFor())
      yield* server.gate.respond(requestId as never, { decision: "approve_once", respondedBy: "bob" })
      yield* extendTo(page, requestId, "1 day")
      yield* ui(() =>
        page.getByRole("alert").getByText(`Approval request ${requestId} was already approved by bob`).waitFor()
      )
      yield* ui(() => card(page, requestId).waitFor({ state: "detached" }))
      expect(yield* extensions(server, requestId)).toHaveLength(0)
    }))

  it.live("an auditor token is offered no Extend…", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const requestId = yield* paused(server.gate, bash("s-1", "c1"))
      const page = yield* openConsole(server, { token: "auditor" })
      yield* ui(() => card(page, requestId).waitFor())
      expect(yield* ui(() => card(page, requestId).getByRole("button", { name: "Extend…" }).count())).toBe(0)
    }))
})
