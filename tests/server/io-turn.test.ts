/**
 * `IoTurn.end`, the wait that makes the answers read in one turn of the event loop reach the
 * store together: every fiber waiting in a turn is released after it, together and in order; one
 * interrupted while it waits leaves the others to go; a fiber waiting in a later turn waits for
 * that turn's end.
 */
import { expect } from "bun:test"
import { Effect, Fiber } from "effect"
import * as IoTurn from "../../packages/server/src/internal/ioTurn.js"
import { describe, it } from "../support/effectTest.js"

/** Resolves once the event loop has passed its check phase: after `setImmediate`s queued before it. */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("IoTurn.end", () => {
  it.live("the fibers that wait in one turn go after it, together, in the order they came", () =>
    Effect.gen(function*() {
      const released: Array<number> = []
      const fibers = yield* Effect.forEach(
        [0, 1, 2, 3],
        (i) => Effect.fork(Effect.zipRight(IoTurn.end, Effect.sync(() => released.push(i)))),
        { concurrency: "unbounded" }
      )
      // nothing goes within the turn, however many times the fibers may run
      yield* Effect.yieldNow()
      yield* Effect.yieldNow()
      expect(released).toEqual([])
      yield* Fiber.joinAll(fibers)
      expect(released).toEqual([0, 1, 2, 3])
    }))

  it.live("a fiber interrupted while it waits leaves the others to go", () =>
    Effect.gen(function*() {
      const released: Array<string> = []
      const leaving = yield* Effect.fork(Effect.zipRight(IoTurn.end, Effect.sync(() => released.push("left"))))
      const staying = yield* Effect.fork(Effect.zipRight(IoTurn.end, Effect.sync(() => released.push("stayed"))))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(leaving)
      yield* Fiber.join(staying)
      expect(released).toEqual(["stayed"])
    }))

  it.live("a fiber that waits after a turn ended waits for the next one", () =>
    Effect.gen(function*() {
      yield* IoTurn.end
      const released: Array<string> = []
      const later = yield* Effect.fork(Effect.zipRight(IoTurn.end, Effect.sync(() => released.push("later"))))
      yield* Effect.yieldNow()
      expect(released).toEqual([])
      yield* nextTurn
      yield* Fiber.join(later)
      expect(released).toEqual(["later"])
    }))
})
