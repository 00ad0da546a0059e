/**
 * Makes the README's picture of the web console, docs/console.png: a server on loopback over the
 * memory store with a few pending requests in two sessions, opened in headless Chromium.
 *
 *   bun tests/console/screenshot.ts
 */
import { HttpServer } from "@effect/platform"
import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
import { Server } from "@tool-gate/server"
import { Context, Effect, Layer } from "effect"
import { chromium } from "playwright-core"
import { paused } from "../server/support/server.js"
import { executablePath, launchArgs } from "./support/browser.js"

const token = "screenshot-approver-token-0123"

const policy = Policy.unsafeMake({
  ttlMs: 15 * 60_000,
  requireApproval: [
    { id: "deploys", tool: "deploy", reason: "Deploys to production need a human." },
    { id: "shell", tool: "bash", ttlMs: 5 * 60_000 },
    { id: "github-writes", tool: "mcp__github__create_*", sessionScope: "tool" }
  ]
})

const calls = [
  {
    id: "call_01",
    sessionKey: "release-1.2.0",
    name: "deploy",
    args: { env: "production", version: "1.2.0", strategy: "canary" },
    agentId: "release-bot",
    intentId: "ship-1.2.0"
  },
  {
    id: "call_02",
    sessionKey: "release-1.2.0",
    name: "bash",
    args: { command: "npm run migrate -- --env production" },
    agentId: "release-bot",
    intentId: "ship-1.2.0",
    workingDirectory: "/srv/app"
  },
  {
    id: "call_03",
    sessionKey: "support-4812",
    name: "mcp__github__create_pull_request",
    args: { repo: "acme/web", base: "main", head: "fix/4812-login-redirect", title: "Fix login redirect loop" },
    agentId: "triage-bot",
    intentId: "fix-issue-4812"
  },
  {
    id: "call_04",
    sessionKey: "support-4812",
    name: "bash",
    args: { command: "npm test -- login" },
    agentId: "triage-bot",
    intentId: "fix-issue-4812"
  }
]

const program = Effect.gen(function*() {
  const context = yield* Layer.build(
    Server.layer({ port: 0, tokens: [{ token, name: "ana", role: "approver" }] }).pipe(
      Layer.provideMerge(ToolGate.layer({ policy }).pipe(Layer.provideMerge(ApprovalStore.layerMemory)))
    )
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") return yield* Effect.die("expected a TCP address")
  const gate = Context.get(context, ToolGate.ToolGate)
  for (const call of calls) yield* paused(gate, call)

  yield* Effect.promise(async () => {
    const browser = await chromium.launch({ executablePath, args: launchArgs })
    try {
      const page = await browser.newPage({ viewport: { width: 1100, height: 700 }, deviceScaleFactor: 1 })
      await page.goto(`http://127.0.0.1:${address.port}/console`)
      await page.getByLabel("Token").fill(token)
      await page.getByRole("button", { name: "Open console" }).click()
      await page.locator("#live").getByText("live").waitFor()
      await page.locator("article.request").nth(calls.length - 1).waitFor()
      // one answered, so the picture shows a notice too
      const answered = page.locator("article.request").filter({ hasText: "npm test -- login" })
      await answered.getByRole("button", { name: "Approve once" }).click()
      await answered.waitFor({ state: "detached" })
      // the window as tall as the list and the notice docked to its corner below it, so the
      // picture shows what a window that fits the list shows
      const height = Number(await page.evaluate("document.documentElement.scrollHeight")) + 80
      await page.setViewportSize({ width: 1100, height })
      await page.evaluate("window.scrollTo(0, 0)") // the header is sticky: from the top, it stays on top
      await page.screenshot({ path: "docs/console.png" })
    } finally {
      await browser.close()
    }
  })
})

Effect.runPromise(Effect.scoped(program)).then(() => console.log("wrote docs/console.png"))
