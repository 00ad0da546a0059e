import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, Option, Predicate } from "effect"

/**
 * Whether a statement failed because its connection was gone: the server or something between
 * (a restart, a load balancer or NAT that forgot an idle flow) ended it, so another connection may
 * well succeed. A pool hands out a connection it has not yet seen end, so after an outage several
 * of its idle connections may fail one after another, each only when used.
 *
 * node-postgres reports it as the socket's error, as the end of the stream, as a client that
 * already failed, or as the server's own message before it ends the session (SQLSTATE class 08,
 * connection exception, or 57P01-57P03: shut down by an administrator or a crash, or not yet
 * accepting connections). A refused connection is not one: the server is not there at all.
 */
export const isLost = (error: unknown): boolean => {
  if (!Predicate.isTagged(error, "SqlError")) return false
  const cause = (error as SqlError).cause
  if (!(cause instanceof Error)) return false
  const code = (cause as { readonly code?: unknown }).code
  if (typeof code === "string") return lostCodes.has(code) || code.startsWith("08")
  return lostMessages.some((message) => cause.message.startsWith(message))
}

const lostCodes = new Set(["ECONNRESET", "EPIPE", "ETIMEDOUT", "ECONNABORTED", "57P01", "57P02", "57P03"])

const lostMessages = [
  "Connection terminated",
  "Client has encountered a connection error",
  "Client was closed"
]

/**
 * How many times a statement that lost its connection runs again on another. Each lost one leaves
 * the pool, so this many covers the idle connections of a pool of the default size (10) and the
 * connections kept beside it, all gone at once.
 */
export const LOST_CONNECTION_RETRIES = 12

/**
 * `effect` run again on another connection while it failed for a lost one (`isLost`), up to
 * `LOST_CONNECTION_RETRIES` times: only for what may run twice (a read; a statement that changes
 * nothing the second time). On success it costs one frame, not a schedule.
 */
export const retryWhileLost = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const attempt = (left: number): Effect.Effect<A, E, R> =>
    left === 0 ? effect : Effect.catchIf(effect, isLost, () => attempt(left - 1))
  return attempt(LOST_CONNECTION_RETRIES)
}

/**
 * A transaction (`sql.withTransaction`) that lost its connection, as a failure: @effect/sql turns a
 * failed `ROLLBACK` or `COMMIT` into a defect, so `retryWhileLost` would not run it again. Only for
 * a transaction that may run twice: its `COMMIT` may have taken effect before its answer was lost.
 */
export const lostAsFailure = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.catchAllCause(effect, (cause): Effect.Effect<never, E | SqlError> => {
    const defect = Cause.dieOption(cause)
    return Option.isSome(defect) && isLost(defect.value)
      ? Effect.fail(defect.value as SqlError)
      : Effect.failCause(cause)
  })

/** The exit failed, and for a lost connection (`isLost`). */
export const failedLost = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) && Option.exists(Cause.failureOption(exit.cause), isLost)
