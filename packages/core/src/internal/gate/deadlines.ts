/**
 * Deadlines: one timer for every wait of a gate. A wait adds its deadline and takes it out when
 * it ends; one fiber sleeps until the earliest deadline and settles the waits that are due. (A
 * timer fiber per wait, forked and then interrupted, cost about a tenth of a round trip's CPU
 * when the answer came first, as it mostly does.)
 *
 * The timer is not stopped when the last wait ends: it wakes at the deadline it slept for, finds
 * nothing due, and ends, so a run of waits one after another adds none. It is started again, in
 * the gate's scope, for a deadline before the one it sleeps for, or when there is none.
 */
import { Clock, Deferred, Duration, Effect, Exit, type Fiber, Scope } from "effect"
import type * as AuditEvent from "../../AuditEvent.js"

/** A wake-up: the event that woke it, or `undefined` when its deadline came first. */
export type WakeUp = Deferred.Deferred<AuditEvent.AuditEvent | undefined>

interface Entry {
  readonly at: number
  readonly wakeUp: WakeUp
  /** its place in the heap; -1 once out of it */
  index: number
}

/** The entries, earliest first: a binary min-heap that knows each entry's place, to take it out. */
const heap = () => {
  const entries: Array<Entry> = []
  const swap = (i: number, j: number) => {
    const a = entries[i]!, b = entries[j]!
    entries[i] = b
    entries[j] = a
    b.index = i
    a.index = j
  }
  const up = (i: number) => {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (entries[parent]!.at <= entries[i]!.at) return
      swap(i, parent)
      i = parent
    }
  }
  const down = (i: number) => {
    while (true) {
      const left = 2 * i + 1
      const right = left + 1
      let least = i
      if (left < entries.length && entries[left]!.at < entries[least]!.at) least = left
      if (right < entries.length && entries[right]!.at < entries[least]!.at) least = right
      if (least === i) return
      swap(i, least)
      i = least
    }
  }
  return {
    first: (): Entry | undefined => entries[0],
    add: (entry: Entry) => {
      entry.index = entries.length
      entries.push(entry)
      up(entry.index)
    },
    remove: (entry: Entry) => {
      const i = entry.index
      if (i < 0) return
      const last = entries.pop()!
      entry.index = -1
      if (last === entry) return
      entries[i] = last
      last.index = i
      up(i)
      down(last.index)
    }
  }
}

export interface Deadlines {
  /** Waits for `wakeUp` or the time `at` (the Clock's milliseconds), whichever comes first. */
  readonly until: (wakeUp: WakeUp, at: number) => Effect.Effect<AuditEvent.AuditEvent | undefined>
}

/**
 * Deadlines whose timer runs in the current scope (the gate's). Once that scope is closed, the
 * waits left, and any after them, keep their deadlines: a daemon timer serves them, and ends with
 * the last of them.
 */
export const make: Effect.Effect<Deadlines, never, Scope.Scope> = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const due = heap()
  /** the timer: the deadline it sleeps for, and its fiber once forked */
  let timer: { at: number; fiber?: Fiber.RuntimeFiber<void> } | undefined
  let closed = false

  const settleDue = (now: number) => {
    for (let entry = due.first(); entry !== undefined && entry.at <= now; entry = due.first()) {
      due.remove(entry)
      Deferred.unsafeDone(entry.wakeUp, Exit.succeed(undefined))
    }
  }

  /** The timer's round, while it is the timer: settles what is due, then sleeps until the next. */
  const tick = (self: NonNullable<typeof timer>): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (timer !== self) return Effect.void
      settleDue(now)
      const next = due.first()
      if (next === undefined) {
        timer = undefined
        return Effect.void
      }
      self.at = next.at
      return Effect.zipRight(Effect.sleep(Duration.millis(next.at - now)), tick(self))
    })

  const stop = () => {
    timer?.fiber?.unsafeInterruptAsFork(timer.fiber.id())
    timer = undefined
  }

  const start = (at: number) =>
    Effect.suspend(() => {
      stop()
      const self: NonNullable<typeof timer> = { at }
      timer = self
      const run = Effect.ensuring(
        Effect.interruptible(tick(self)),
        Effect.sync(() => {
          if (timer === self) timer = undefined
        })
      )
      return Effect.map(closed ? Effect.forkDaemon(run) : Effect.forkIn(run, scope), (fiber) => {
        self.fiber = fiber
      })
    })

  yield* Scope.addFinalizer(
    scope,
    Effect.suspend(() => {
      closed = true
      const first = due.first()
      return first === undefined ? Effect.sync(stop) : start(first.at)
    })
  )

  return {
    until: (wakeUp, at) =>
      Effect.acquireUseRelease(
        Effect.suspend(() => {
          const entry: Entry = { at, wakeUp, index: -1 }
          due.add(entry)
          return timer === undefined || at < timer.at ? Effect.as(start(at), entry) : Effect.succeed(entry)
        }),
        () => Deferred.await(wakeUp),
        (entry) =>
          Effect.sync(() => {
            due.remove(entry)
            // a daemon timer (the scope is closed) holds the process: not once nothing waits
            if (closed && due.first() === undefined) stop()
          })
      )
  }
})
