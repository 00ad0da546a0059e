import { Effect } from "effect"

/**
 * A turn of the event loop, for a caller of a synchronous SQL driver in a loop. Effect yields a
 * busy fiber after 2,048 steps, but counts them from the fiber's last resumption, and a SQLite
 * client's semaphore (taken by every statement) resumes its caller at once: such a loop never
 * yields, and nothing else in the process (fibers, timers, I/O) runs until it ends. An
 * asynchronous driver's call gives the event loop this turn anyway.
 */
export const eventLoopTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
})

/**
 * Calls in a row, on a synchronous driver, before the next one lets the event loop turn first:
 * each costs tens to a couple of hundred of Effect's steps, so this many stay within the runtime's
 * own budget of 2,048.
 */
export const CALLS_BEFORE_TURN = 8

/**
 * `call`, preceded by a turn of the event loop when `CALLS_BEFORE_TURN` calls ran since the last
 * turn: for the calls of one store on a synchronous driver (each `every` counts its own).
 */
export const every = (): <A, E, R>(call: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> => {
  let inARow = 0
  return (call) =>
    Effect.suspend(() => {
      if (inARow < CALLS_BEFORE_TURN) {
        inARow++
        return call
      }
      inARow = 1
      return Effect.zipRight(eventLoopTurn, call)
    })
}
