/**
 * A Server-Sent Events reader over `fetch` for the stream tests: reads `id:` / `data:` blocks
 * (skipping comments and `retry:`), and aborts the connection when its scope closes.
 */
import { AuditEvent } from "@tool-gate/core"
import { Effect, Schema } from "effect"
import { authorization, type RequestOptions, type TestServer } from "./server.js"

export interface SseEvent {
  readonly id: string
  /** the event, decoded from its JSON form (`json`) */
  readonly data: AuditEvent.AuditEvent
  readonly json: AuditEvent.Json
}

const decodeEvent = Schema.decodeUnknownSync(AuditEvent.Json)

export interface SseConnection {
  readonly status: number
  readonly contentType: string | null
  /** the next `count` events, failing the test when they do not come within 10 seconds */
  readonly take: (count: number) => Effect.Effect<Array<SseEvent>>
  readonly close: () => void
}

export const openStream = (
  server: TestServer,
  options: { readonly query?: string; readonly lastEventId?: string; readonly token?: RequestOptions["token"] } = {}
) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<SseConnection> => {
      const controller = new AbortController()
      const headers: Record<string, string> = { accept: "text/event-stream", ...authorization(options.token) }
      if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId
      const response = await fetch(`${server.url}/audit/stream${options.query ?? ""}`, {
        headers,
        signal: controller.signal
      })
      const reader = response.body!.getReader()
      const decoder = new TextDecoder()
      let buffer = ""
      const ready: Array<SseEvent> = []
      const readBlock = async (): Promise<void> => {
        let end: number
        while ((end = buffer.indexOf("\n\n")) < 0) {
          const chunk = await reader.read()
          if (chunk.done) throw new Error("the stream ended")
          buffer += decoder.decode(chunk.value, { stream: true })
        }
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const fields = new Map<string, string>()
        for (const line of block.split("\n")) {
          const colon = line.indexOf(":")
          if (colon <= 0) continue // a comment (": keep-alive") or a blank line
          fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart())
        }
        if (fields.has("data")) {
          const json = JSON.parse(fields.get("data")!)
          ready.push({ id: fields.get("id")!, data: decodeEvent(json), json })
        }
      }
      const take = (count: number) =>
        Effect.promise(async () => {
          while (ready.length < count) await readBlock()
          return ready.splice(0, count)
        }).pipe(
          Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => `fewer than ${count} events came` }),
          Effect.orDie
        )
      return {
        status: response.status,
        contentType: response.headers.get("content-type"),
        take,
        close: () => controller.abort()
      }
    }),
    (connection) => Effect.sync(() => connection.close())
  )
