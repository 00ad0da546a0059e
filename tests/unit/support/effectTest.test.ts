import { expect } from "bun:test"
import { Context, Deferred, Effect, Fiber, Layer, Ref, TestClock } from "effect"
import { describe, it, layer } from "../../support/effectTest.js"

describe("effectTest support", () => {
  it.effect("it.effect runs on the TestClock: an hour passes only when adjusted", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Effect.sleep("1 hour").pipe(Effect.as("woke")))
      yield* TestClock.adjust("59 minutes")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 minute")
      expect(yield* Fiber.join(fiber)).toBe("woke")
    }))

  it.scoped("it.scoped closes its scope when the test ends", () =>
    Effect.gen(function*() {
      const released = yield* Deferred.make<void>()
      yield* Effect.addFinalizer(() => Deferred.succeed(released, undefined))
      expect(yield* Deferred.isDone(released)).toBe(false)
    }))
})

class Counter extends Context.Tag("test/Counter")<Counter, Ref.Ref<number>>() {}
let builds = 0
const CounterLive = Layer.effect(Counter, Effect.sync(() => builds++).pipe(Effect.zipRight(Ref.make(0))))

layer(CounterLive)("layer() shares one build across the block", (it) => {
  it.effect("first test increments", () => Effect.flatMap(Counter, (ref) => Ref.update(ref, (n) => n + 1)))
  it.effect("second test sees the same service", () =>
    Effect.gen(function*() {
      expect(yield* Ref.get(yield* Counter)).toBe(1)
      expect(builds).toBe(1)
    }))
})
