/**
 * Waiters: callers blocked on a request, woken by the log tailer with the event that may have
 * settled or moved it (answered, expired, extended, warned of expiry), whichever process committed
 * it. `gate`, once paused, waits by call (session and tool-call id), registered before each
 * `authorize` that reads the record again, so that the wake and that read are its whole wait: to
 * it a wake is only a hint to read again (what the call comes to is read by `authorize`).
 *
 * `awaitDecision` waits by request id, and an `approval.resolved` of its request that carries the
 * whole resolution settles it without a read: the log holds that event only if the answer's
 * transaction committed it with the row (the store's `append` refuses the events of a request's
 * lifecycle), so it says what the row says, and who could forge it in the database could forge
 * the row as well. Anything else (another wake, an event naming another call, one written before
 * events carried the whole resolution, an edit, whose event keeps the arguments' canonical text
 * and the row the approver's) is a hint to read the row again. What runs is still decided where
 * the call is authorized, from the store's record.
 */
import { Clock, Deferred, Effect, type Scope } from "effect"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type * as AuditEvent from "../../AuditEvent.js"
import type * as PauseSignal from "../../PauseSignal.js"
import type { PersistenceError, RequestNotFound } from "../../ToolGateError.js"
import * as Deadlines from "./deadlines.js"
import type { Requests } from "./requests.js"

type WakeUp = Deadlines.WakeUp

/** The waiter registry. */
export interface Waiters {
  /** Wakes the waiters of the event's request and of its call, with the event. */
  readonly wake: (event: AuditEvent.AuditEvent) => Effect.Effect<void>
  /** `use` with a wake-up for the request, registered while it runs. */
  readonly watchRequest: <A, E, R>(
    requestId: string,
    use: (woken: WakeUp) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /** `use` with a wake-up for the call `toolCallId` of `sessionKey`, registered while it runs. */
  readonly watchCall: <A, E, R>(
    sessionKey: string,
    toolCallId: string,
    use: (woken: WakeUp) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /**
   * Waits for a wake-up or the request's deadline, whichever comes first: the event that woke it,
   * or `undefined`. Past the deadline here but not yet on the store's clock, looks again shortly.
   */
  readonly untilWokenOrDue: (
    wakeUp: WakeUp,
    pending: Pick<PauseSignal.PauseSignal, "expiresAt">
  ) => Effect.Effect<AuditEvent.AuditEvent | undefined>
}

/** A call's key: its session key, told apart from the id by its length (either may hold any character). */
export const callKey = (sessionKey: string, toolCallId: string) => `${sessionKey.length}:${sessionKey}${toolCallId}`

/** Wake-ups by key: each is woken once, then forgotten. */
const registry = () => {
  const waiters = new Map<string, Set<WakeUp>>()
  return {
    wake: (key: string, event: AuditEvent.AuditEvent) => {
      const set = waiters.get(key)
      if (set === undefined) return Effect.void
      waiters.delete(key)
      return Effect.forEach(set, (deferred) => Deferred.succeed(deferred, event), { discard: true })
    },
    add: (key: string, deferred: WakeUp) => {
      const set = waiters.get(key) ?? new Set()
      set.add(deferred)
      waiters.set(key, set)
    },
    remove: (key: string, deferred: WakeUp) => {
      const set = waiters.get(key)
      if (set === undefined) return
      set.delete(deferred)
      if (set.size === 0) waiters.delete(key)
    }
  }
}

/** `use` with a wake-up registered under `key` while it runs. */
const watching = <A, E, R>(
  waiters: ReturnType<typeof registry>,
  key: string,
  use: (woken: WakeUp) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.map(Deferred.make<AuditEvent.AuditEvent | undefined>(), (deferred) => {
      waiters.add(key, deferred)
      return deferred
    }),
    use,
    (deferred) => Effect.sync(() => waiters.remove(key, deferred))
  )

/** The waiter registry; the deadlines' timer runs in the current scope (the gate's). */
export const makeWaiters: Effect.Effect<Waiters, never, Scope.Scope> = Effect.map(Deadlines.make, (deadlines) => {
  const byRequest = registry()
  const byCall = registry()
  return {
    wake: (event) =>
      Effect.zipRight(
        event.requestId === undefined ? Effect.void : byRequest.wake(event.requestId, event),
        event.sessionKey === undefined || event.toolCallId === undefined
          ? Effect.void
          : byCall.wake(callKey(event.sessionKey, event.toolCallId), event)
      ),
    watchRequest: (requestId, use) => watching(byRequest, requestId, use),
    watchCall: (sessionKey, toolCallId, use) => watching(byCall, callKey(sessionKey, toolCallId), use),
    untilWokenOrDue: (wakeUp, pending) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => deadlines.until(wakeUp, pending.expiresAt <= now ? now + 10 : pending.expiresAt)
      )
  }
})

/**
 * The request `pending` as `event` settled it, when the event is its `approval.resolved` and
 * carries the whole resolution; else `undefined` (read the row).
 */
export const settledBy = (
  pending: ApprovalRequest.ApprovalRequest,
  event: AuditEvent.AuditEvent
): ApprovalRequest.ApprovalRequest | undefined => {
  if (
    event.type !== "approval.resolved" || event.decision === undefined || event.editedArgs !== undefined ||
    event.requestId !== pending.requestId || event.sessionKey !== pending.toolCall.sessionKey ||
    event.toolCallId !== pending.toolCall.id
  ) return undefined
  const resolution: ApprovalRequest.Resolution = {
    decision: event.decision,
    resolvedAt: event.at,
    ...(event.actor !== undefined ? { respondedBy: event.actor } : {}),
    ...(event.reason !== undefined ? { reason: event.reason } : {}),
    status: event.outcome,
    ...(event.scope !== undefined ? { scope: event.scope } : {}),
    ...(event.sessionTtlMs !== undefined ? { sessionTtlMs: event.sessionTtlMs } : {}),
    ...(event.sessionApprovalId !== undefined ? { sessionApprovalId: event.sessionApprovalId } : {})
  }
  return { ...pending, status: event.outcome, resolution }
}

/** `awaitDecision`: waits until the request is answered or expires (timeout means deny). */
export const makeAwaitDecision = (
  options: {
    readonly waiters: Waiters
  } & Pick<Requests, "getRequest" | "current">
) =>
(
  requestId: ApprovalRequest.RequestId
): Effect.Effect<ApprovalRequest.ApprovalRequest, RequestNotFound | PersistenceError> => {
  // Registered before reading, so an answer committed in between still wakes it. `undefined`:
  // woken by something that is no answer it can settle on, or past the deadline: look again.
  const round = options.waiters.watchRequest(requestId, (wakeUp) =>
    Effect.gen(function*() {
      const request = yield* options.getRequest(requestId)
      const settled = yield* options.current(request, yield* Clock.currentTimeMillis)
      if (settled.status !== "pending") return settled
      const event = yield* options.waiters.untilWokenOrDue(wakeUp, settled)
      return event === undefined ? undefined : settledBy(settled, event)
    }))
  return Effect.gen(function*() {
    while (true) {
      const settled = yield* round
      if (settled !== undefined) return settled
    }
  })
}
