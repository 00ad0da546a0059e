/**
 * The gate's deadlines (`internal/gate/deadlines.ts`): one timer for every wait. Whatever the order
 * waits start, end and fall due in, each ends at its wake-up, with the event, or at its deadline,
 * with nothing, at that time on the clock; and the timer ends with the scope it runs in.
 */
import type { AuditEvent } from "@tool-gate/core"
import { expect } from "bun:test"
import { Clock, Deferred, Effect, Exit, Fiber, Scope, Supervisor, TestClock, TestContext } from "effect"
import fc from "fast-check"
import * as Deadlines from "../../../../packages/core/src/internal/gate/deadlines.js"
import { describe, it } from "../../../support/effectTest.js"

interface Wait {
  readonly start: number
  readonly deadline: number
  /** when its wake-up comes; none: never */
  readonly wokenAt: number | undefined
}

const wait = fc.integer({ min: 0, max: 15 }).chain((start) =>
  fc.record({
    start: fc.constant(start),
    deadline: fc.integer({ min: start, max: start + 25 }),
    wokenAt: fc.option(fc.integer({ min: start, max: start + 30 }), { nil: undefined })
  })
)

/** Lets every fiber the last step resumed run. */
const settle = Effect.forEach(Array.from({ length: 8 }), () => Effect.yieldNow(), { discard: true })

const wakeUp = Deferred.make<AuditEvent.AuditEvent | undefined>()

const event = (n: number) => ({ seq: n }) as unknown as AuditEvent.AuditEvent

/** Runs the waits on one `Deadlines`, a millisecond at a time: what each ended with, and when. */
const run = (waits: ReadonlyArray<Wait>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const deadlines = yield* Scope.extend(Deadlines.make, scope)
    const wakeUps = yield* Effect.forEach(waits, () => wakeUp)
    const fibers: Array<Fiber.RuntimeFiber<readonly [AuditEvent.AuditEvent | undefined, number]>> = []
    const end = Math.max(...waits.map((w) => Math.max(w.deadline, w.wokenAt ?? 0))) + 2
    for (let now = 0; now <= end; now++) {
      for (const [i, w] of waits.entries()) {
        if (w.start === now) {
          fibers[i] = yield* Effect.fork(
            Effect.zip(deadlines.until(wakeUps[i]!, w.deadline), Clock.currentTimeMillis)
          )
        }
      }
      yield* settle
      for (const [i, w] of waits.entries()) {
        if (w.wokenAt === now) yield* Deferred.succeed(wakeUps[i]!, event(i))
      }
      yield* settle
      yield* TestClock.adjust(1)
      yield* settle
    }
    const ended = yield* Effect.forEach(fibers, (fiber) => Fiber.join(fiber))
    yield* Scope.close(scope, Exit.void)
    return ended
  })

describe("Deadlines", () => {
  it.effect("each wait ends at its wake-up or its deadline, whichever comes first, at that time", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(fc.array(wait, { minLength: 1, maxLength: 16 }), (waits) =>
          Effect.runPromise(Effect.provide(
            Effect.map(run(waits), (ended) => {
              waits.forEach((w, i) => {
                const woken = w.wokenAt !== undefined && w.wokenAt < w.deadline
                expect(ended[i]).toEqual([woken ? event(i) : undefined, woken ? w.wokenAt! : w.deadline])
              })
            }),
            TestContext.TestContext
          ))),
        { numRuns: 25 }
      )
    ))

  it.effect("waits one after another share one timer, which ends with its scope", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const deadlines = yield* Scope.extend(Deadlines.make, scope)
      const supervisor = yield* Supervisor.track
      // after each wait: the timer (and the test clock's warning fiber beside its sleep), the same every time
      const after: Array<ReadonlyArray<number>> = []
      for (let n = 0; n < 20; n++) {
        const woken = yield* wakeUp
        const waiting = yield* Effect.fork(Effect.supervised(deadlines.until(woken, 10_000 + n), supervisor))
        yield* settle
        yield* Deferred.succeed(woken, event(n))
        expect(yield* Fiber.join(waiting)).toEqual(event(n))
        after.push((yield* supervisor.value).map((fiber) => fiber.id().id).sort())
      }
      expect(after[0]!.length).toBeGreaterThan(0)
      expect(after).toEqual(after.map(() => after[0]!))
      yield* Scope.close(scope, Exit.void)
      yield* settle
      expect(yield* supervisor.value).toEqual([])
    }))

  it.effect("a deadline earlier than the one the timer sleeps for is kept", () =>
    Effect.gen(function*() {
      const deadlines = yield* Scope.extend(Deadlines.make, yield* Scope.make())
      const late = yield* Effect.fork(deadlines.until(yield* wakeUp, 1_000))
      yield* settle
      const early = yield* Effect.fork(Effect.zip(deadlines.until(yield* wakeUp, 5), Clock.currentTimeMillis))
      yield* settle
      yield* TestClock.adjust(5)
      yield* settle
      expect(yield* Fiber.join(early)).toEqual([undefined, 5])
      expect(late.unsafePoll()).toBeNull()
      yield* TestClock.adjust(995)
      expect(yield* Fiber.join(late)).toBeUndefined()
    }))

  it.effect("once its scope is closed, a wait still ends at its deadline, and no timer outlives the last wait", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const deadlines = yield* Scope.extend(Deadlines.make, scope)
      const supervisor = yield* Supervisor.track
      const left = yield* Effect.fork(
        Effect.supervised(Effect.zip(deadlines.until(yield* wakeUp, 50), Clock.currentTimeMillis), supervisor)
      )
      yield* settle
      yield* Scope.close(scope, Exit.void)
      yield* settle
      yield* TestClock.adjust(50)
      yield* settle
      expect(yield* Fiber.join(left)).toEqual([undefined, 50])
      const after = yield* Effect.fork(
        Effect.supervised(Effect.zip(deadlines.until(yield* wakeUp, 80), Clock.currentTimeMillis), supervisor)
      )
      yield* settle
      yield* TestClock.adjust(30)
      yield* settle
      expect(yield* Fiber.join(after)).toEqual([undefined, 80])
      // a wait woken before its deadline: the timer ends with it
      const woken = yield* wakeUp
      const last = yield* Effect.fork(Effect.supervised(deadlines.until(woken, 1_000), supervisor))
      yield* settle
      yield* Deferred.succeed(woken, event(1))
      expect(yield* Fiber.join(last)).toEqual(event(1))
      yield* settle
      expect(yield* supervisor.value).toEqual([])
    }))
})
