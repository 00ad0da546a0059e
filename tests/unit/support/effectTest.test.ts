import { expect, test } from "bun:test"
import { Context, Effect, Fiber, Layer, Ref, TestClock } from "effect"
import { describe, it, layer, run } from "../../support/effectTest.js"

describe("effectTest support", () => {
  it.effect("it.effect runs on the TestClock: an hour passes only when adjusted", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Effect.sleep("1 hour").pipe(Effect.as("woke")))
      yield* TestClock.adjust("59 minutes")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 minute")
      expect(yield* Fiber.join(fiber)).toBe("woke")
    }))

  // `run.scoped` is what it.scoped hands bun:test: the test ends when its promise settles.
  test("it.scoped closes its scope when the test ends", async () => {
    const events: Array<string> = []
    await run.scoped(() =>
      Effect.gen(function*() {
        yield* Effect.addFinalizer(() => Effect.sync(() => events.push("closed")))
        events.push("body done")
      })
    )
    expect(events).toEqual(["body done", "closed"])
  })

  test("it.scoped closes its scope when the test fails, and the test fails", async () => {
    let closed = false
    const failing = run.scoped(() =>
      Effect.addFinalizer(() => Effect.sync(() => (closed = true))).pipe(Effect.zipRight(Effect.fail("boom")))
    )
    await expect(failing).rejects.toThrow("boom")
    expect(closed).toBe(true)
  })
})

class Counter extends Context.Tag("test/Counter")<Counter, Ref.Ref<number>>() {}
let builds = 0
let ran = 0
const CounterLive = Layer.effect(Counter, Effect.sync(() => builds++).pipe(Effect.zipRight(Ref.make(0))))

// Each test does the same, so the order they run in does not matter: with one build per block,
// the counter has seen every test that ran so far; with one build per test, the second to run fails.
const seesOneBuild = () =>
  Effect.gen(function*() {
    ran++
    expect(yield* Ref.updateAndGet(yield* Counter, (n) => n + 1)).toBe(ran)
    expect(builds).toBe(1)
  })

layer(CounterLive)("layer() shares one build across the block", (it) => {
  it.effect("one test sees the block's service", seesOneBuild)
  it.effect("another test sees the same service", seesOneBuild)
})
