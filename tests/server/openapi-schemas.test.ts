/**
 * The OpenAPI document the server serves, read by a standard validator: every schema in it (the
 * components, and each parameter, request body, response and header schema of every operation)
 * compiles as JSON Schema 2020-12 (the dialect of OpenAPI 3.1) in Ajv's strict mode, references
 * resolved inside the document as OpenAPI tools resolve them. Then the validators it gives accept
 * what the server really answers, and refuse what it would refuse.
 */
import addFormats from "ajv-formats"
import Ajv2020 from "ajv/dist/2020"
import { expect } from "bun:test"
import { Effect } from "effect"
import { describe, it } from "../support/effectTest.js"
import { bash, paused, startServer } from "./support/server.js"

const documentId = "urn:tool-gate:openapi"

// The document's own fields: annotations to the validator, so strict mode reads the document whole.
const openApiFields = ["openapi", "info", "paths", "components", "tags", "security", "servers", "externalDocs"]

const pointer = (path: ReadonlyArray<string>) =>
  path.map((part) => part.replaceAll("~", "~0").replaceAll("/", "~1")).join("/")

/** The JSON pointer of every schema in the document. */
const schemaPointers = (spec: any): Array<string> => {
  const found: Array<Array<string>> = []
  for (const name of Object.keys(spec.components?.schemas ?? {})) found.push(["components", "schemas", name])
  const contents = (at: Array<string>, content: Record<string, unknown> | undefined) => {
    for (const type of Object.keys(content ?? {})) found.push([...at, "content", type, "schema"])
  }
  for (const [path, operations] of Object.entries<any>(spec.paths)) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      const at = ["paths", path, method]
      ;(operation.parameters ?? []).forEach((_: unknown, i: number) =>
        found.push([...at, "parameters", `${i}`, "schema"])
      )
      contents([...at, "requestBody"], operation.requestBody?.content)
      for (const [status, response] of Object.entries<any>(operation.responses ?? {})) {
        contents([...at, "responses", status], response.content)
        for (const header of Object.keys(response.headers ?? {})) {
          found.push([...at, "responses", status, "headers", header, "schema"])
        }
      }
    }
  }
  return found.map((path) => `#/${pointer(path)}`)
}

const validatorsOf = (spec: any) => {
  const ajv = new Ajv2020({ strict: true, allErrors: true })
  // the standard formats (`date-time` of the audit event's `time`), which strict mode would refuse unknown
  addFormats.default(ajv)
  ajv.addVocabulary(openApiFields)
  ajv.addSchema(spec, documentId)
  return (at: string) => ajv.compile({ $ref: `${documentId}${at}` })
}

describe("the OpenAPI document's schemas", () => {
  it.live("every schema compiles as JSON Schema 2020-12 in Ajv's strict mode", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const spec = (yield* server.request("GET", "/openapi.json", { token: null })).json
      expect(spec.openapi).toStartWith("3.1.")
      const pointers = schemaPointers(spec)
      // every component, and the schemas of every operation
      expect(pointers.length).toBeGreaterThan(Object.keys(spec.components.schemas).length + 40)
      const validator = validatorsOf(spec)
      const failures: Array<string> = []
      for (const at of pointers) {
        try {
          validator(at)
        } catch (error) {
          failures.push(`${at}: ${(error as Error).message}`)
        }
      }
      expect(failures).toEqual([])
    }))

  it.live("a strict validator refuses a schema with a type-specific keyword and no type (so the test can fail)", () =>
    Effect.sync(() => {
      const spec = {
        openapi: "3.1.0",
        components: {
          schemas: {
            Id: { type: "string" },
            Named: { type: "object", properties: { id: { $ref: "#/components/schemas/Id", minLength: 1 } } }
          }
        }
      }
      expect(() => validatorsOf(spec)("#/components/schemas/Named")).toThrow(/strict mode: missing type "string"/)
    }))

  it.live("the validators accept what the server answers, and refuse what it refuses", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const spec = (yield* server.request("GET", "/openapi.json", { token: null })).json
      const validator = validatorsOf(spec)
      const operation = (path: string, method: string) => `#/${pointer(["paths", path, method])}`
      const response = (path: string, method: string, status: string) =>
        validator(`${operation(path, method)}/responses/${status}/content/application~1json/schema`)
      const requestBody = (path: string, method: string) =>
        validator(`${operation(path, method)}/requestBody/content/application~1json/schema`)

      const requestId = yield* paused(server.gate, bash("s1", "c1"))
      const one = yield* server.request("GET", `/approvals/${requestId}`)
      expect(response("/approvals/{requestId}", "get", "200")(one.json)).toBe(true)
      const list = yield* server.request("GET", "/approvals/pending")
      expect(response("/approvals/pending", "get", "200")(list.json)).toBe(true)
      const missing = yield* server.request("GET", "/approvals/req_missing")
      expect(response("/approvals/{requestId}", "get", "404")(missing.json)).toBe(true)
      const events = yield* server.request("GET", "/audit")
      expect(events.json.length).toBeGreaterThan(0)
      expect(response("/audit", "get", "200")(events.json)).toBe(true)

      const extension = requestBody("/approvals/{requestId}/extend", "post")
      expect(extension({ ttlMs: 60_000 })).toBe(true)
      expect(extension({ ttlMs: 60_000, allowShorten: true })).toBe(true)
      for (const bad of [{ ttlMs: 0 }, { ttlMs: 1.5 }, { ttlMs: "60000" }, { ttlMs: 1, extra: 1 }, {}]) {
        expect(extension(bad)).toBe(false)
        const reply = yield* server.request("POST", `/approvals/${requestId}/extend`, { body: bad })
        expect(reply.status).toBe(400)
      }
      const answer = requestBody("/approvals/{requestId}/respond", "post")
      expect(answer({ decision: "approve_session", scope: "tool", sessionTtlMs: 60_000 })).toBe(true)
      expect(answer({ decision: "maybe" })).toBe(false)
      const answered = yield* server.request("POST", `/approvals/${requestId}/respond`, { body: { decision: "deny" } })
      expect(response("/approvals/{requestId}/respond", "post", "200")(answered.json)).toBe(true)
    }))
})
