/**
 * The audit routes in the served OpenAPI document: the stream's answer documented with the audit
 * event's schema (not as `string`), `since` / `until` as RFC 3339 or epoch milliseconds, and real
 * events from the running server valid under what the document says (Ajv, JSON Schema 2020-12).
 */
import addFormats from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { expect } from "bun:test"
import { Effect } from "effect"
import { describe, it } from "../support/effectTest.js"
import { awaitPending, paused, startServer } from "./support/server.js"
import { openStream } from "./support/sse.js"

/** The document's component schemas as `$defs`, so a schema that refers to them compiles on its own. */
const withComponents = (spec: any, schema: unknown) => {
  const text = JSON.stringify({ ...(schema as object), $defs: spec.components.schemas })
  const ajv = new Ajv2020({ strict: true, allErrors: true })
  addFormats.default(ajv)
  return ajv.compile(JSON.parse(text.replaceAll("#/components/schemas/", "#/$defs/")))
}

describe("the audit routes in the OpenAPI document", () => {
  it.live("the stream is documented with the audit event's schema; real events are valid under it", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const spec = (yield* server.request("GET", "/openapi.json", { token: null })).json
      const stream = spec.paths["/audit/stream"].get
      const item = stream.responses["200"].content["text/event-stream"].schema
      expect(item.properties.data.contentMediaType).toBe("application/json")
      expect(item.properties.data.contentSchema).toEqual({ $ref: "#/components/schemas/AuditEvent" })
      expect(spec.components.schemas.AuditEvent).toBeDefined()
      const since = stream.parameters.find((p: { name: string }) => p.name === "since")
      expect(since.description).toContain("RFC 3339")
      expect(spec.paths["/audit"].get.responses["200"].content["application/json"].schema.items).toEqual({
        $ref: "#/components/schemas/AuditEvent"
      })

      yield* paused(server.gate, { id: "c1", name: "bash", sessionKey: "s1", args: { command: "make", n: 1 } })
      const [request] = yield* awaitPending(server)
      yield* server.request("POST", `/approvals/${request!.requestId}/respond`, {
        body: { decision: "approve_once", editedArgs: { command: "make -j2", n: 1 } }
      })
      yield* server.gate.evaluate({ id: "c2", name: "rm", sessionKey: "s1" })
      yield* server.gate.clearApprovals(undefined, "ops")

      const validItem = withComponents(spec, item)
      const validEvent = withComponents(spec, { $ref: "#/components/schemas/AuditEvent" })
      const events = yield* (yield* openStream(server, { token: "auditor" })).take(4)
      for (const event of events) {
        const fields = { id: event.id, data: JSON.stringify(event.json) }
        expect({ fields, valid: validItem(fields), errors: validItem.errors ?? null }).toEqual({
          fields,
          valid: true,
          errors: null
        })
        expect({ event: event.json, valid: validEvent(event.json), errors: validEvent.errors ?? null }).toEqual({
          event: event.json,
          valid: true,
          errors: null
        })
      }
      const queried = (yield* server.request("GET", "/audit", { token: "auditor" })).json as Array<unknown>
      expect(queried.every((event) => validEvent(event))).toBe(true)
      // and what the document says an event is not
      expect(validEvent({ ...(queried[0] as object), args: [1] })).toBe(false)
      expect(validItem({ id: "x", data: "{}" })).toBe(false)
    }))
})
