/**
 * Debian's Chromium, headless, driven by playwright-core, for the web console tests: one browser
 * per describe block, a fresh context (so fresh sessionStorage) per page. Without
 * /usr/bin/chromium every test is reported as skipped, with a warning, never as passed.
 */
import { test } from "bun:test"
import { Context, Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { type Browser, chromium, type Page } from "playwright-core"
import { authorization, type RequestOptions, type TestServer } from "../../server/support/server.js"
import { describe, layer, type Methods } from "../../support/effectTest.js"

export const executablePath = "/usr/bin/chromium"

// The machine's network is closed: without the background-networking flags Chromium keeps
// trying to reach Google's hosts. playwright-core gives each launch a fresh user-data-dir.
export const launchArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

export class Chromium extends Context.Tag("tests/console/Chromium")<Chromium, Browser>() {}

const ChromiumLive = Layer.scoped(
  Chromium,
  Effect.acquireRelease(
    Effect.promise(() => chromium.launch({ executablePath, args: launchArgs })),
    (browser) => Effect.promise(() => browser.close())
  )
)

/**
 * `describe` with a browser for every test in it; every test skipped (loudly) when Chromium is
 * not installed.
 */
export const describeBrowser = (name: string, body: (it: Methods<Chromium>) => void): void => {
  if (existsSync(executablePath)) return layer(ChromiumLive)(name, body)
  console.warn(
    `!!! WARNING: ${executablePath} is missing (apt-get install chromium): the web console tests "${name}" are SKIPPED !!!`
  )
  const skip = (testName: string) => test.skip(testName, () => {})
  describe(name, () => body({ effect: skip, scoped: skip, live: skip }))
}

/** A promise-returning browser step as an Effect; a rejection fails the test. */
export const ui = <A>(step: () => Promise<A>): Effect.Effect<A> => Effect.promise(step)

export interface OpenOptions {
  /** a token name of the test server, a literal token, or `null` to stay on the sign-in form */
  readonly token?: RequestOptions["token"]
  /** called before the page loads, to route or script it */
  readonly before?: (page: Page) => Promise<unknown>
}

/**
 * The console in a new browser context, signed in with `token` (the approver's by default), once
 * it shows the pending counter. Script errors in the page are printed, to explain a failure.
 */
export const openConsole = (server: TestServer, options: OpenOptions = {}) =>
  Effect.gen(function*() {
    const browser = yield* Chromium
    const context = yield* Effect.acquireRelease(
      ui(() => browser.newContext()),
      (context) => Effect.promise(() => context.close())
    )
    context.setDefaultTimeout(10_000)
    const page = yield* ui(() => context.newPage())
    page.on("pageerror", (error) => console.error("page error:", error))
    if (options.before !== undefined) yield* ui(() => options.before!(page))
    yield* ui(() => page.goto(`${server.url}/`))
    if (options.token !== null) yield* signIn(page, options.token)
    return page
  })

/** Types the token into the sign-in form and waits for the list. */
export const signIn = (page: Page, token: RequestOptions["token"]) =>
  ui(async () => {
    const header = authorization(token).authorization
    await page.getByLabel("Token").fill(header!.slice("Bearer ".length))
    await page.getByRole("button", { name: "Open console" }).click()
    await page.locator("#pending-count").waitFor()
  })

/** The card of one request. */
export const card = (page: Page, requestId: string) => page.locator(`article.request[data-request-id="${requestId}"]`)

/** Waits until the page shows exactly `count` request cards (dismissed ones included). */
export const cardCount = (page: Page, count: number) =>
  ui(() =>
    page.waitForFunction(
      (n) => (globalThis as unknown as PageGlobals).document.querySelectorAll("article.request").length === n,
      count
    )
  )

// What the function above reads in the page (the tests compile without the DOM lib). It is a
// function, not a string: the console's Content-Security-Policy refuses eval.
interface PageGlobals {
  readonly document: { readonly querySelectorAll: (selector: string) => { readonly length: number } }
}
