/**
 * Reading the audit log as a stream: page after page of a query (bounded memory however long
 * the log), or the server's Server-Sent Events.
 */
import { AuditEvent } from "@tool-gate/core"
import { Chunk, Effect, Option, Schema, Stream } from "effect"
import * as Sse from "./sse.js"

export const pageSize = 1000

/** Pages of `pageSize` events after `afterSeq` until a short page: the log so far. */
export const paged = <E>(
  page: (afterSeq: number) => Effect.Effect<ReadonlyArray<AuditEvent.AuditEvent>, E>,
  afterSeq: number
): Stream.Stream<AuditEvent.AuditEvent, E> =>
  Stream.paginateChunkEffect(afterSeq, (after) =>
    Effect.map(page(after), (events) => {
      const last = events[events.length - 1]
      return [
        Chunk.fromIterable(events),
        events.length < pageSize || last === undefined ? Option.none() : Option.some(last.seq)
      ] as const
    }))

/**
 * Server-Sent Events as audit events (the `message` events; each `data` is one event's JSON form).
 * `onRetry` hears the server's `retry:` hints, for the next reconnection.
 */
export const sseEvents = <E>(body: Stream.Stream<Uint8Array, E>, onRetry: (millis: number) => void = () => {}) =>
  Stream.suspend(() => {
    const parser = Sse.make()
    return body.pipe(
      Stream.decodeText(),
      Stream.mapEffect((text) => {
        const events = parser.feed(text)
        const retryMs = parser.retryMs()
        if (retryMs !== undefined) onRetry(retryMs)
        return events
      }),
      Stream.flattenIterables,
      Stream.filter((event) => event.type === "message"),
      Stream.mapEffect((event) => Schema.decode(Schema.parseJson(AuditEvent.Json))(event.data))
    )
  })
