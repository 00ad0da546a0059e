/**
 * The tail of its own commits a store answers a woken reader from: it never skips an event. Each
 * answer is the log's events right after the reader's seq (none skipped, none made up), and a
 * reader that reads until a short page, after every commit has signalled (by its seq, or by a
 * signal naming none), has reached the end of the log, whoever committed.
 */
import type { AuditEvent as Audit } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect, FastCheck as fc } from "effect"
import * as OwnTail from "../../../../packages/core/src/internal/store/ownTail.js"
import { describe, it } from "../../../support/effectTest.js"

const PAGE = 3

/** A store's log and hints, as the store keeps them; commits by this process or another. */
const model = (capacity: number) => {
  const log: Array<Audit.AuditEvent> = []
  const tail = OwnTail.make(capacity)
  let known = 0
  let reads = 0
  const commit = (count: number) => {
    const first = log.length + 1
    const events = Array.from({ length: count }, (_, i) => ({ seq: first + i }) as Audit.AuditEvent)
    log.push(...events)
    return events
  }
  const read = (afterSeq: number) =>
    Effect.sync(() => {
      reads++
      return log.slice(afterSeq, afterSeq + PAGE)
    })
  return {
    log,
    reads: () => reads,
    known: () => known,
    own: (count: number) => {
      const events = commit(count)
      tail.remember(events)
      known = Math.max(known, events[events.length - 1]!.seq)
    },
    /** a batch of this process's commits whose hints arrive in the opposite order */
    ownReversed: (counts: ReadonlyArray<number>) => {
      const batches = counts.map(commit)
      for (const events of [...batches].reverse()) {
        tail.remember(events)
        known = Math.max(known, events[events.length - 1]!.seq)
      }
    },
    other: (count: number, namesSeq: boolean) => {
      const events = commit(count)
      if (namesSeq) known = Math.max(known, events[events.length - 1]!.seq)
      else tail.unsure()
    },
    after: (afterSeq: number) => tail.after(afterSeq, known, PAGE, read(afterSeq))
  }
}

type Step =
  | { readonly _tag: "own"; readonly count: number }
  | { readonly _tag: "ownReversed"; readonly counts: ReadonlyArray<number> }
  | { readonly _tag: "other"; readonly count: number; readonly namesSeq: boolean }
  | { readonly _tag: "wake" }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ _tag: fc.constant("own" as const), count: fc.integer({ min: 1, max: 4 }) }),
  fc.record({
    _tag: fc.constant("ownReversed" as const),
    counts: fc.array(fc.integer({ min: 1, max: 2 }), { minLength: 2, maxLength: 3 })
  }),
  fc.record({ _tag: fc.constant("other" as const), count: fc.integer({ min: 1, max: 3 }), namesSeq: fc.boolean() }),
  fc.constant({ _tag: "wake" as const })
)

describe("own tail of the log", () => {
  it.effect("a reader woken after every commit reaches the end of the log and never skips an event", () =>
    Effect.sync(() =>
      fc.assert(fc.property(fc.array(step, { maxLength: 40 }), fc.integer({ min: 1, max: 6 }), (steps, capacity) => {
        const store = model(capacity)
        let seq = 0
        for (const next of [...steps, { _tag: "wake" } as const]) {
          if (next._tag === "own") store.own(next.count)
          else if (next._tag === "ownReversed") store.ownReversed(next.counts)
          else if (next._tag === "other") store.other(next.count, next.namesSeq)
          else {
            // the log tailer's loop: pages until a short one
            while (true) {
              const events = Effect.runSync(store.after(seq))
              expect(events).toEqual(store.log.slice(seq, seq + events.length))
              if (events.length > 0) seq = events[events.length - 1]!.seq
              if (events.length < PAGE) break
            }
            expect(seq).toBe(store.log.length)
          }
        }
      }))
    ))

  it.effect("this process's own commits, contiguous up to the newest hint, are answered without a read", () =>
    Effect.gen(function*() {
      const store = model(8)
      store.own(2)
      store.own(1)
      expect((yield* store.after(0)).map((e) => e.seq)).toEqual([1, 2, 3])
      expect(yield* store.after(3)).toEqual([])
      expect(store.reads()).toBe(0)
      // another process's commit named by its seq: not in the tail, so the log is read
      store.other(1, true)
      expect((yield* store.after(3)).map((e) => e.seq)).toEqual([4])
      expect(store.reads()).toBe(1)
      // a signal naming no seq: read until a read reaches the end of the log
      store.own(1)
      store.other(4, false)
      expect((yield* store.after(4)).map((e) => e.seq)).toEqual([5, 6, 7])
      expect((yield* store.after(7)).map((e) => e.seq)).toEqual([8, 9])
      expect(store.reads()).toBe(3)
      store.own(2)
      expect((yield* store.after(9)).map((e) => e.seq)).toEqual([10, 11])
      expect(store.reads()).toBe(3)
    }))
})
