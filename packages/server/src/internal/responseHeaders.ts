/**
 * Headers set just before a response is written, whoever made it (handlers, the platform's decode
 * errors, Swagger UI, the Node fast path): schema-encoded errors cannot carry headers, and RFC 9110
 * wants a challenge on every 401. API answers carry pending arguments, audit events and
 * identities, so no cache may keep them; nothing is sniffed into another type; pages cannot be
 * framed.
 */
import { HttpServerResponse } from "@effect/platform"
import { createHash } from "node:crypto"
import * as WebConsole from "../WebConsole.js"

/** Swagger UI's page: its one inline script and one inline style, allowed by their hashes. */
export const docsPath = "/docs"

const hashes = (html: string, tag: "script" | "style"): string =>
  Array.from(
    html.matchAll(tag === "script" ? /<script>([\s\S]*?)<\/script>/g : /<style>([\s\S]*?)<\/style>/g),
    (match) => `'sha256-${createHash("sha256").update(match[1]!, "utf8").digest("base64")}'`
  ).join(" ")

// The page is built once, so its policy is too; keyed by the response the Swagger layer reuses.
const docsPolicies = new WeakMap<HttpServerResponse.HttpServerResponse, string>()
const docsPolicy = (response: HttpServerResponse.HttpServerResponse): string => {
  let policy = docsPolicies.get(response)
  if (policy === undefined) {
    const html = response.body._tag === "Uint8Array" ? new TextDecoder().decode(response.body.body) : ""
    policy = `default-src 'none'; script-src ${hashes(html, "script")}; style-src ${hashes(html, "style")}; ` +
      "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    docsPolicies.set(response, policy)
  }
  return policy
}

/** `response` with the headers every response to a request for `url` gets. */
export const finish = (url: string, response: HttpServerResponse.HttpServerResponse) => {
  const path = url.split("?")[0]!
  const headers: Record<string, string> = { "x-content-type-options": "nosniff" }
  if (response.status === 401) headers["www-authenticate"] = "Bearer realm=\"tool-gate\""
  if (path === docsPath) {
    headers["content-security-policy"] = docsPolicy(response)
    headers["x-frame-options"] = "DENY"
  } else if (path === "/" || path === WebConsole.path || path.startsWith(`${WebConsole.path}/`)) {
    headers["x-frame-options"] = "DENY"
  } else {
    headers["cache-control"] = "no-store"
  }
  return HttpServerResponse.setHeaders(response, headers)
}
