/**
 * The web console, served by the approval server: one page of HTML, CSS and plain JavaScript (no
 * build step, nothing from a CDN) at `/console`, with `/` redirecting there. The page is public;
 * everything it shows comes from the approval API with the bearer token the operator types in,
 * which it keeps in `sessionStorage` (never in a URL). It lists every pending request grouped by
 * session, answers them (approve once, approve for the session with either scope, deny with a
 * reason, approve with edited arguments), and follows the audit stream so every tab agrees.
 *
 * `Server.layerApp` mounts it; this layer is for an app built some other way on `HttpApiBuilder`.
 * (Named `WebConsole`, not `Console`, so it never shadows `effect`'s `Console`.)
 *
 * @example
 * import { HttpApiBuilder } from "@effect/platform"
 * import { WebConsole } from "@tool-gate/server"
 * import { Layer } from "effect"
 *
 * // beside the API's own layers, under HttpApiBuilder.serve()
 * const App = HttpApiBuilder.serve().pipe(Layer.provide(WebConsole.layer))
 *
 * @since 0.1.0
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, type Layer } from "effect"
import { readFile } from "node:fs/promises"

/**
 * Where the console is served.
 *
 * @since 0.1.0
 * @category constants
 */
export const path = "/console"

// The page runs only its own script and style and talks only to this origin; tool arguments come
// from agents, so a stray `<script>` in them must not run even if a rendering bug let it in.
const headers = {
  "cache-control": "no-cache",
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY"
}

const assets = [
  { route: path, file: "index.html", contentType: "text/html; charset=utf-8" },
  { route: `${path}/console.js`, file: "console.js", contentType: "text/javascript; charset=utf-8" },
  { route: `${path}/console.css`, file: "console.css", contentType: "text/css; charset=utf-8" }
] as const

/**
 * The console's routes on `HttpApiBuilder.Router`. Its files (`src/console/`) are read once, when
 * the layer is built; a missing file is a defect at start-up rather than a broken page later.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect(path, { status: 302 })))
    for (const asset of assets) {
      const body = yield* Effect.promise(() => readFile(new URL(`./console/${asset.file}`, import.meta.url), "utf8"))
      const response = HttpServerResponse.text(body, { contentType: asset.contentType, headers })
      yield* router.get(asset.route, Effect.succeed(response))
    }
  })
)
