/**
 * Watches a loop of calls from outside it: how many calls it had made at each turn of the event
 * loop (a fiber waiting for every turn records them), and when a timer due at once fired.
 */
import { Effect, Fiber } from "effect"

export const watchLoop = (calls: number) =>
  Effect.gen(function*() {
    let made = 0
    let looping = true
    const seen: Array<number> = []
    let timerAt = -1
    const turns = yield* Effect.fork(Effect.gen(function*() {
      while (looping) {
        seen.push(made)
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      }
    }))
    setTimeout(() => timerAt = made, 0)
    return {
      /** Counts a call of the loop. */
      made: () => {
        made++
      },
      /** Ends the watch: the most calls made with no turn between them, and the calls before the timer (-1: none). */
      end: Effect.gen(function*() {
        looping = false
        yield* Fiber.join(turns)
        const sightings = [0, ...seen.filter((n) => n < calls), calls]
        return { longest: Math.max(...sightings.slice(1).map((n, i) => n - sightings[i]!)), timerAt }
      })
    }
  })
