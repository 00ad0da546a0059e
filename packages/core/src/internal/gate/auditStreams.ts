/**
 * The audit streams: `audit`, the live hook stream fed by the log tailer, and `auditLog`, the
 * durable replay of the log followed by the live tail, so an auditor that reconnects misses nothing
 * and sees nothing twice.
 */
import { Chunk, Effect, Option, PubSub, Stream } from "effect"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import type { PersistenceError } from "../../ToolGateError.js"

const pageSize = 500

/** The audit streams of a gate, and how the tailer publishes to them. */
export const make = (store: ApprovalStore["Type"]) =>
  Effect.map(PubSub.unbounded<AuditEvent.AuditEvent>(), (hub) => {
    const auditLog = (query: AuditEvent.AuditQuery = {}): Stream.Stream<AuditEvent.AuditEvent, PersistenceError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        // Subscribe before replaying, so events committed during the replay arrive live.
        const live = yield* PubSub.subscribe(hub)
        const keep = AuditEvent.matches({ ...query, afterSeq: undefined })
        let last = query.afterSeq ?? 0
        const replay = Stream.paginateChunkEffect(
          last,
          (after) =>
            Effect.map(store.events({ ...query, afterSeq: after, limit: pageSize }), (page) =>
              [
                Chunk.fromIterable(page),
                page.length < pageSize ? Option.none<number>() : Option.some(page[page.length - 1]!.seq)
              ] as const)
        )
        const tail = Stream.fromQueue(live).pipe(Stream.filter((event) => event.seq > last && keep(event)))
        // per chunk, not per event (a tap would hand each event on alone): a batch committed
        // together reaches a reader as one chunk
        return Stream.concat(replay, tail).pipe(Stream.mapChunks((chunk) => {
          const end = Chunk.last(chunk)
          if (Option.isSome(end)) last = end.value.seq
          return chunk
        }))
      }))
    return {
      publish: (events: ReadonlyArray<AuditEvent.AuditEvent>) => PubSub.publishAll(hub, events),
      audit: Stream.fromPubSub(hub),
      auditLog
    } as const
  })
