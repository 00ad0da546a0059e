/**
 * Waiters: callers blocked on a request, woken by the log tailer when an event may have settled or
 * moved it (answered, expired, extended), whichever process committed it. `awaitDecision` waits by
 * request id; `gate`, once paused, waits by call (session and tool-call id), registered before each
 * `authorize` that reads the record again, so that the wake and that read are its whole wait: a wake
 * is only a hint to read again, never an answer (what the call comes to is read by `authorize`).
 */
import { Clock, Deferred, Duration, Effect } from "effect"
import type * as Scope from "effect/Scope"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type * as AuditEvent from "../../AuditEvent.js"
import type * as PauseSignal from "../../PauseSignal.js"
import type { PersistenceError, RequestNotFound } from "../../ToolGateError.js"
import type { Requests } from "./requests.js"

/** The waiter registry. */
export interface Waiters {
  /** Wakes the waiters of the event's request and of its call. */
  readonly wake: (event: Pick<AuditEvent.AuditEvent, "requestId" | "sessionKey" | "toolCallId">) => Effect.Effect<void>
  /** A wake-up for the request, registered for the life of the scope. */
  readonly register: (requestId: string) => Effect.Effect<Deferred.Deferred<void>, never, Scope.Scope>
  /** `use` with a wake-up for the call `toolCallId` of `sessionKey`, registered while it runs. */
  readonly watchCall: <A, E, R>(
    sessionKey: string,
    toolCallId: string,
    use: (woken: Deferred.Deferred<void>) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
}

// a call's key: its session key, told apart from the id by its length (either may hold any character)
const callKey = (sessionKey: string, toolCallId: string) => `${sessionKey.length}:${sessionKey}${toolCallId}`

/** Wake-ups by key: each is woken once, then forgotten. */
const registry = () => {
  const waiters = new Map<string, Set<Deferred.Deferred<void>>>()
  return {
    wake: (key: string) => {
      const set = waiters.get(key)
      if (set === undefined) return Effect.void
      waiters.delete(key)
      return Effect.forEach(set, (deferred) => Deferred.succeed(deferred, undefined), { discard: true })
    },
    add: (key: string, deferred: Deferred.Deferred<void>) => {
      const set = waiters.get(key) ?? new Set()
      set.add(deferred)
      waiters.set(key, set)
    },
    remove: (key: string, deferred: Deferred.Deferred<void>) => {
      const set = waiters.get(key)
      if (set === undefined) return
      set.delete(deferred)
      if (set.size === 0) waiters.delete(key)
    }
  }
}

export const makeWaiters = (): Waiters => {
  const byRequest = registry()
  const byCall = registry()
  return {
    wake: ({ requestId, sessionKey, toolCallId }) =>
      Effect.zipRight(
        requestId === undefined ? Effect.void : byRequest.wake(requestId),
        sessionKey === undefined || toolCallId === undefined
          ? Effect.void
          : byCall.wake(callKey(sessionKey, toolCallId))
      ),
    register: (requestId) =>
      Effect.acquireRelease(
        Effect.map(Deferred.make<void>(), (deferred) => {
          byRequest.add(requestId, deferred)
          return deferred
        }),
        (deferred) => Effect.sync(() => byRequest.remove(requestId, deferred))
      ),
    watchCall: (sessionKey, toolCallId, use) => {
      const key = callKey(sessionKey, toolCallId)
      return Effect.acquireUseRelease(
        Effect.map(Deferred.make<void>(), (deferred) => {
          byCall.add(key, deferred)
          return deferred
        }),
        use,
        (deferred) => Effect.sync(() => byCall.remove(key, deferred))
      )
    }
  }
}

/**
 * Waits for a wake-up or the request's deadline, whichever comes first; past the deadline here
 * but not yet on the store's clock, looks again shortly.
 */
export const untilWokenOrDue = (
  wakeUp: Deferred.Deferred<void>,
  pending: Pick<PauseSignal.PauseSignal, "expiresAt">
): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const wait = pending.expiresAt <= now ? 10 : pending.expiresAt - now
    return Effect.raceFirst(Deferred.await(wakeUp), Effect.sleep(Duration.millis(wait)))
  })

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
      const settled = yield* options.current(request, yield* Clock.currentTimeMillis)
      if (settled.status !== "pending") return settled
      yield* untilWokenOrDue(wakeUp, settled)
    }
  }))
