/**
 * The web console with more pending requests than the window shows: the outcome of an answer and
 * the message of a click on a stale card appear where the operator is looking, however far down
 * the list the card was, in a notice that stays in the window (headless Chromium, a real server
 * on loopback over a SQLite file).
 */
import { expect } from "bun:test"
import { Effect } from "effect"
import type { Locator, Page } from "playwright-core"
import { bash, paused, startServer, type TestServer } from "../server/support/server.js"
import { card, cardCount, describeBrowser, openConsole, ui } from "./support/browser.js"

const viewport = { width: 1000, height: 700 }

/** A server with `count` pending requests in one session, oldest first: their ids. */
const longList = (count: number) =>
  Effect.gen(function*() {
    const server = yield* startServer()
    const ids: Array<string> = []
    for (let i = 0; i < count; i++) ids.push(yield* paused(server.gate, bash("s-1", `c${i}`)))
    return { server, ids }
  })

const openSmall = (server: TestServer, options: Parameters<typeof openConsole>[1] = {}) =>
  Effect.gen(function*() {
    const page = yield* openConsole(server, {
      ...options,
      before: async (page) => {
        await page.setViewportSize(viewport)
        await options.before?.(page)
      }
    })
    return page
  })

/**
 * Whether `locator` is wholly inside the window, and is what the window shows at its middle
 * (nothing covers it).
 */
const inView = (locator: Locator) =>
  ui(() =>
    locator.evaluate((element) => {
      const box = element.getBoundingClientRect()
      const window = globalThis as unknown as { innerWidth: number; innerHeight: number; document: any }
      const inside = box.width > 0 && box.height > 0 && box.top >= 0 && box.left >= 0 &&
        box.bottom <= window.innerHeight && box.right <= window.innerWidth
      const top = window.document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2)
      return inside && top !== null && element.contains(top)
    })
  )

const scrollY = (page: Page) => ui(() => page.evaluate(() => (globalThis as unknown as { scrollY: number }).scrollY))

describeBrowser("web console, a list longer than the window", (it) => {
  it.live("every card shows its request and nothing else: no stray text where a part is missing", () =>
    Effect.gen(function*() {
      const { ids, server } = yield* longList(3)
      const page = yield* openSmall(server)
      yield* cardCount(page, 3)
      for (const id of ids) {
        const text = yield* ui(() => card(page, id).innerText())
        expect(text).toContain("bash")
        expect(text).not.toContain("undefined")
      }
    }))

  it.live("answering a card far down the list: the outcome shows in the window, where the operator looks", () =>
    Effect.gen(function*() {
      const { ids, server } = yield* longList(40)
      const page = yield* openSmall(server)
      yield* cardCount(page, 40)
      const target = card(page, ids[34]!)
      yield* ui(() => target.scrollIntoViewIfNeeded())
      // the list is longer than the window, and the operator is far down it
      expect(yield* scrollY(page)).toBeGreaterThan(viewport.height)
      yield* ui(() => target.getByRole("button", { name: "Approve once" }).click())
      yield* ui(() => target.waitFor({ state: "detached" }))
      const outcome = page.getByRole("status").filter({ hasText: "bash in session s-1: approved once by ana" })
      yield* ui(() => outcome.waitFor())
      expect(yield* inView(outcome)).toBe(true)
      // still far down: nothing scrolled the operator away from the list
      expect(yield* scrollY(page)).toBeGreaterThan(viewport.height)

      // the notices never hold more than a few, and a closed one goes
      for (const i of [35, 36, 37]) {
        yield* ui(async () => {
          await card(page, ids[i]!).getByRole("button", { name: "Deny…" }).click()
          await card(page, ids[i]!).getByRole("button", { name: "Deny", exact: true }).click()
          await card(page, ids[i]!).waitFor({ state: "detached" })
        })
      }
      yield* ui(() => page.locator("#notices .notice").nth(2).waitFor())
      expect(yield* ui(() => page.locator("#notices .notice").count())).toBe(3)
      for (const notice of yield* ui(() => page.locator("#notices .notice").all())) {
        expect(yield* inView(notice)).toBe(true)
      }
      yield* ui(() => page.locator("#notices .notice").first().getByRole("button", { name: "Close" }).click())
      expect(yield* ui(() => page.locator("#notices .notice").count())).toBe(2)
    }))

  it.live("a click on a stale card far down the list: the server's message shows in the window", () =>
    Effect.gen(function*() {
      const { ids, server } = yield* longList(40)
      // no stream: the page never hears that bob answered
      const page = yield* openSmall(server, {
        before: (page) => page.route("**/audit/stream", (route) => route.abort())
      })
      yield* cardCount(page, 40)
      const stale = ids[37]!
      yield* server.gate.respond(stale as never, { decision: "deny", respondedBy: "bob" })
      const target = card(page, stale)
      yield* ui(() => target.scrollIntoViewIfNeeded())
      expect(yield* scrollY(page)).toBeGreaterThan(viewport.height)
      yield* ui(() => target.getByRole("button", { name: "Approve once" }).click())
      const message = page.getByRole("alert").filter({
        hasText: `Approval request ${stale} was already denied by bob; this answer was not applied`
      })
      yield* ui(() => message.waitFor())
      expect(yield* inView(message)).toBe(true)
      yield* ui(() => target.waitFor({ state: "detached" }))
    }))
})
