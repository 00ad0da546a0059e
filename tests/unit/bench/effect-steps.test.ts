/**
 * bench/effectSteps.ts, which W2 and bench/w7Steps.ts report their Effect steps with: it counts
 * the steps of every fiber the counted work starts, and only while that work runs.
 */
import { describe, expect, it } from "bun:test"
import { Effect, Fiber } from "effect"
import { counted, StepCounter, stepsPer } from "../../../bench/effectSteps.js"

/** `n` steps of a fiber: a chain of `n` synchronous effects. */
const chain = (n: number): Effect.Effect<void> =>
  n === 0 ? Effect.void : Effect.flatMap(Effect.sync(() => n), () => chain(n - 1))

describe("effect steps", () => {
  it("counts the steps of a fiber forked inside, and the same work the same each time", async () => {
    const counter = new StepCounter()
    const [inline, forked, twice] = await Effect.runPromise(counted(
      Effect.gen(function*() {
        const inline = yield* stepsPer(counter, 1, chain(100))
        const forked = yield* stepsPer(counter, 1, Effect.flatMap(Effect.fork(chain(100)), Fiber.join))
        const twice = yield* stepsPer(counter, 2, Effect.zipRight(chain(100), chain(100)))
        return [inline, forked, twice] as const
      }),
      counter
    ))
    // a link of the chain is a few steps (its sync, its flatMap, the value passed on)
    expect(inline).toBeGreaterThanOrEqual(200)
    // the forked fiber's chain is counted too (with the fork and the join around it)
    expect(forked).toBeGreaterThan(inline)
    expect(twice).toBeGreaterThanOrEqual(inline)
    expect(twice).toBeLessThanOrEqual(inline + 2)
  })

  it("counts nothing outside the counted work", async () => {
    const counter = new StepCounter()
    await Effect.runPromise(counted(chain(10), counter))
    const after = counter.count
    await Effect.runPromise(chain(100))
    expect(after).toBeGreaterThan(0)
    expect(counter.count).toBe(after)
  })
})
