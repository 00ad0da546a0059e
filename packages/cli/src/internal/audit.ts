/**
 * Reading the audit log as a stream: page after page of a query (bounded memory however long
 * the log), or the server's Server-Sent Events.
 */
import { AuditEvent } from "@tool-gate/core"
import { Chunk, Effect, Option, Schema, Stream } from "effect"

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

/** Server-Sent Events as audit events: `data:` lines up to a blank line make one event. */
export const sseEvents = <E>(body: Stream.Stream<Uint8Array, E>) =>
  body.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.mapAccum("", (data, line) =>
      line === ""
        ? ["", data === "" ? Option.none<string>() : Option.some(data)]
        : [line.startsWith("data:") ? data + line.slice(5).trimStart() : data, Option.none<string>()]),
    Stream.filterMap((data) => data),
    Stream.mapEffect((data) => Schema.decode(Schema.parseJson(AuditEvent.AuditEvent))(data))
  )
