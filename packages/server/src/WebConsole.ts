/**
 * The web console, served by the approval server: one page of HTML, CSS and plain JavaScript
 * modules (no build step, nothing from a CDN) at `/console`, with `/` redirecting there. The page
 * is public; everything it shows comes from the approval API with the bearer token the operator
 * types in, which it keeps in `sessionStorage` (never in a URL). It lists every pending request grouped by
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
import { HttpApiBuilder, type HttpRouter, HttpServerResponse } from "@effect/platform"
import { Effect, type Layer } from "effect"
import { readdir, readFile } from "node:fs/promises"
import { extname } from "node:path"

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

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8"
}

/**
 * The console's routes on `HttpApiBuilder.Router`: the page at `path`, and every script module and
 * style sheet in its folder (`src/console/`) under `path/`, each with its content type (a browser
 * runs a module only if it is served as JavaScript). The files are read once, when the layer is
 * built; a missing file is a defect at start-up rather than a broken page later.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const folder = new URL("./console/", import.meta.url)
    const serve = (route: HttpRouter.PathInput, file: string, contentType: string) =>
      Effect.flatMap(
        Effect.promise(() => readFile(new URL(file, folder), "utf8")),
        (body) => router.get(route, Effect.succeed(HttpServerResponse.text(body, { contentType, headers })))
      )
    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect(path, { status: 302 })))
    yield* serve(path, "index.html", "text/html; charset=utf-8")
    for (const file of (yield* Effect.promise(() => readdir(folder))).sort()) {
      const contentType = contentTypes[extname(file)]
      if (contentType !== undefined) yield* serve(`${path}/${file}`, file, contentType)
    }
  })
)
