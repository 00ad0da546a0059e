/**
 * The lease of a resumed turn, kept while the turn runs: renewed every third of its length in the
 * background, and checked (renewed) before each act through the fence it returns.
 */
import { Checkpoint, type ToolGateError } from "@tool-gate/core"
import { Clock, Duration, Effect, Schedule } from "effect"
import type * as Scope from "effect/Scope"

/** Backoff for a renewal that failed on the store: from 100 ms, doubling, capped well below a third of the lease. */
const renewalBackoff = (length: Duration.Duration) => {
  const cap = Duration.min(Duration.seconds(5), Duration.unsafeDivide(length, 12))
  return { first: Duration.min(Duration.millis(100), cap), cap }
}

/** Why the fence stops the turn: the lease is another owner's, the resume is done, or the store fails. */
export type FenceError =
  | ToolGateError.CheckpointClaimed
  | ToolGateError.AlreadyResumed
  | ToolGateError.CheckpointNotFound
  | ToolGateError.PersistenceError

/**
 * Starts renewing `lease` (for as long as the scope lasts) and returns the fence to run before each
 * act: an owner that stalled past its lease and was taken over stops there instead of acting twice.
 */
export const keep = (
  token: Checkpoint.Token,
  lease: Checkpoint.Lease,
  length: Duration.Duration
): Effect.Effect<Effect.Effect<void, FenceError>, never, Checkpoint.Checkpoints | Scope.Scope> =>
  Effect.gen(function*() {
    const checkpoints = yield* Checkpoint.Checkpoints
    const { cap, first } = renewalBackoff(length)
    const annotations = { token, owner: lease.owner }
    // Set when the store refused a renewal: the lease is another owner's (or the resume is done).
    let lost: Exclude<FenceError, ToolGateError.PersistenceError> | undefined
    const renew = checkpoints.renew(token, lease, length).pipe(
      Effect.tapError((error) =>
        error._tag === "PersistenceError"
          ? Effect.void
          : Effect.zipRight(
            Effect.sync(() => (lost = error)),
            Effect.logError("AgentLoop: lease renewal refused; the turn stops before its next act").pipe(
              Effect.annotateLogs({ ...annotations, error: error.message })
            )
          )
      )
    )
    // Every third of the lease, so a turn longer than its lease is not taken over. A failed write
    // (a busy or dropped store) is logged and tried again with backoff; past the lease's end that is
    // logged too, and renewing goes on: a renewal only succeeds if no other owner claimed the
    // checkpoint since (its fencing token).
    const renewing = (until: number, delay: Duration.Duration): Effect.Effect<void> =>
      renew.pipe(
        Effect.matchEffect({
          onSuccess: (renewed) =>
            Effect.delay(Effect.suspend(() => renewing(renewed.until, first)), Duration.unsafeDivide(length, 3)),
          onFailure: (error) =>
            error._tag !== "PersistenceError" ? Effect.void : Effect.gen(function*() {
              const now = yield* Clock.currentTimeMillis
              yield* now < until
                ? Effect.logWarning("AgentLoop: lease renewal failed; retrying").pipe(
                  Effect.annotateLogs({ ...annotations, error: error.message, retryIn: Duration.format(delay) })
                )
                : Effect.logError("AgentLoop: the lease ran out while its renewal kept failing; retrying").pipe(
                  Effect.annotateLogs({ ...annotations, error: error.message, until: new Date(until).toISOString() })
                )
              yield* Effect.sleep(delay)
              return yield* renewing(until, Duration.min(Duration.times(delay, 2), cap))
            })
        })
      )
    yield* Effect.forkScoped(Effect.delay(renewing(lease.until, first), Duration.unsafeDivide(length, 3)))
    // A failed write is tried a few times before the turn fails on it.
    return Effect.suspend(() =>
      lost !== undefined ? Effect.fail(lost) : Effect.asVoid(renew).pipe(
        Effect.tapErrorTag("PersistenceError", (error) =>
          Effect.logWarning("AgentLoop: lease check failed before an act").pipe(
            Effect.annotateLogs({ ...annotations, error: error.message })
          )),
        Effect.retry({
          while: (error) =>
            error._tag === "PersistenceError",
          schedule: Schedule.intersect(Schedule.exponential(first), Schedule.recurs(3))
        })
      )
    )
  })
