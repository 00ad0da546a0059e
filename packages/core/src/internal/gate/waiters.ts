/**
 * Waiters: callers blocked in `awaitDecision` on a request, registered here by request id and woken
 * by the log tailer when an event may have settled or moved their request (answered, expired,
 * extended), whichever process committed it.
 */
import { Clock, Deferred, Duration, Effect } from "effect"
import type * as Scope from "effect/Scope"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type { PersistenceError, RequestNotFound } from "../../ToolGateError.js"
import type { Requests } from "./requests.js"

/** The waiter registry. */
export interface Waiters {
  readonly has: (requestId: string) => boolean
  readonly wake: (requestId: string) => Effect.Effect<void>
  /** A wake-up for the request, registered for the life of the scope. */
  readonly register: (requestId: string) => Effect.Effect<Deferred.Deferred<void>, never, Scope.Scope>
}

export const makeWaiters = (): Waiters => {
  const waiters = new Map<string, Set<Deferred.Deferred<void>>>()
  return {
    has: (requestId) => waiters.has(requestId),
    wake: (requestId) => {
      const set = waiters.get(requestId)
      if (set === undefined) return Effect.void
      waiters.delete(requestId)
      return Effect.forEach(set, (deferred) => Deferred.succeed(deferred, undefined), { discard: true })
    },
    register: (requestId) =>
      Effect.acquireRelease(
        Effect.flatMap(Deferred.make<void>(), (deferred) =>
          Effect.sync(() => {
            const set = waiters.get(requestId) ?? new Set()
            set.add(deferred)
            waiters.set(requestId, set)
            return deferred
          })),
        (deferred) => Effect.sync(() => waiters.get(requestId)?.delete(deferred))
      )
  }
}

/** `awaitDecision`: waits until the request is answered or expires (timeout means deny). */
export const makeAwaitDecision = (
  options: {
    readonly waiters: Waiters
  } & Pick<Requests, "getRequest" | "current">
) =>
(
  requestId: ApprovalRequest.RequestId
): Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError> =>
  Effect.scoped(Effect.gen(function*() {
    while (true) {
      // Register before reading, so an answer committed in between still wakes us.
      const wakeUp = yield* options.waiters.register(requestId)
      const request = yield* options.getRequest(requestId)
      const now = yield* Clock.currentTimeMillis
      const settled = yield* options.current(request, now)
      if (settled.status !== "pending") return settled
      // past the deadline here but not yet on the store's clock: look again shortly
      const wait = Math.max(settled.expiresAt - now, settled.expiresAt <= now ? 10 : 0)
      yield* Effect.raceFirst(Deferred.await(wakeUp), Effect.sleep(Duration.millis(wait)))
    }
  }))
