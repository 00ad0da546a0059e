import { Effect } from "effect"
import type { AuditEvent } from "../../AuditEvent.js"

/**
 * The tail of the log this process wrote itself: the events of its own commits since the last
 * gap (another process's commit between two of its own), contiguous in seq, the newest `capacity`
 * of them. A reader woken by a hint that asks for the log after a seq the tail covers, up to the
 * newest seq hinted, gets it without a read: every event up to there is in the tail, and anything
 * committed later comes with a hint of its own.
 *
 * A change signal naming no seq (a file watch, a poll) may stand for any other process's commit:
 * readers then read the database until a read that started after the signal has reached the end
 * of the log.
 */
export interface OwnTail {
  /** After one of this process's commits: its events, in seq order. */
  readonly remember: (events: ReadonlyArray<AuditEvent>) => void
  /** A change signal that names no seq. */
  readonly unsure: () => void
  /**
   * The events after `afterSeq` up to `known`, at most `limit`, when the tail holds them all;
   * otherwise `read` (the database's answer).
   */
  readonly after: <E>(
    afterSeq: number,
    known: number,
    limit: number,
    read: Effect.Effect<ReadonlyArray<AuditEvent>, E>
  ) => Effect.Effect<ReadonlyArray<AuditEvent>, E>
}

export const make = (capacity = 1000): OwnTail => {
  let tail: Array<AuditEvent> = []
  // signals without a seq seen so far, and how many of them a finished read has answered
  let signals = 0
  let answered = 0

  const covered = (afterSeq: number, known: number, limit: number): ReadonlyArray<AuditEvent> | undefined => {
    if (answered !== signals) return undefined
    if (afterSeq >= known) return afterSeq === known ? [] : undefined
    const first = tail[0]
    const last = tail[tail.length - 1]
    if (first === undefined || last === undefined || first.seq > afterSeq + 1 || last.seq !== known) return undefined
    const from = afterSeq + 1 - first.seq
    return tail.slice(from, from + limit)
  }

  return {
    remember: (events) => {
      if (events.length === 0) return
      const last = tail[tail.length - 1]
      if (last !== undefined && events[0]!.seq !== last.seq + 1) tail = []
      for (const event of events) tail.push(event)
      // trimmed in halves, so a long run of commits copies the tail rarely
      if (tail.length > 2 * capacity) tail = tail.slice(-capacity)
    },
    unsure: () => {
      signals++
    },
    after: (afterSeq, known, limit, read) =>
      Effect.suspend(() => {
        const events = covered(afterSeq, known, limit)
        if (events !== undefined) return Effect.succeed(events)
        const asked = signals
        return Effect.tap(read, (read) =>
          Effect.sync(() => {
            // a short page is the end of the log: every commit signalled before the read is in it
            if (read.length < limit && asked > answered) answered = asked
          }))
      })
  }
}
