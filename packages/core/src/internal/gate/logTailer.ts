/**
 * The log tailer: one reader of the log per gate. On every hint from the store it reads the log
 * after what it has seen, wakes the local waiters of requests that were answered, expired or
 * extended, feeds the live audit stream and catches the sessions the session-approval projection
 * holds up with the changes committed by any process. While the log cannot be read, it says so
 * (`unreadable`): session approvals may have been revoked in the part it cannot read.
 */
import { Effect, Queue } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalStore } from "../../ApprovalStore.js"
import type * as AuditEvent from "../../AuditEvent.js"
import type { PersistenceError } from "../../ToolGateError.js"
import type { Projection } from "./grants.js"
import * as PendingGauge from "./pendingGauge.js"
import type { Waiters } from "./waiters.js"

// Events after which a waiter must look again: its request (or call's) was answered, expired or
// extended, or warned of its expiry (a request `awaitDecision` returns from its answer's event
// without a read has the warning its row has).
const WAKING_EVENTS: ReadonlySet<AuditEvent.EventType> = new Set([
  "approval.resolved",
  "approval.expired",
  "approval.extended",
  "approval.expiring"
])

// Events that change the session approvals (an answer only when it granted one).
const PROJECTION_EVENTS: ReadonlySet<AuditEvent.EventType> = new Set([
  "session.granted",
  "session.revoked",
  "approvals.cleared"
])
const changesProjection = (event: AuditEvent.AuditEvent) =>
  PROJECTION_EVENTS.has(event.type) || (event.type === "approval.resolved" && event.sessionApprovalId !== undefined)

/** Events read from the log at once; a shorter page is the end of the log as it was read. */
const PAGE = 1000

/** The tailer of a gate: its health now, and the fiber to start once the gate is assembled. */
export interface LogTailer {
  /** the failure of the last read of the log, until a read succeeds again */
  readonly unreadable: () => PersistenceError | undefined
  readonly start: Effect.Effect<void, never, Scope.Scope>
}

export const make = (options: {
  readonly store: ApprovalStore["Type"]
  readonly projection: Projection
  readonly waiters: Waiters
  readonly publish: (events: ReadonlyArray<AuditEvent.AuditEvent>) => Effect.Effect<boolean>
}): LogTailer => {
  const { projection, publish, store, waiters } = options
  let unreadable: PersistenceError | undefined
  let seq = projection.loadedAt
  // a change of the session approvals was read in the log and the approvals it changed are not
  // applied yet (it outlives a failed catch-up, so the next one reads them)
  let changed = false
  const pending = PendingGauge.make(store)

  const catchUp = Effect.gen(function*() {
    while (true) {
      const events = yield* store.tail(seq, PAGE)
      if (events.length === 0) break
      for (const event of events) {
        if (WAKING_EVENTS.has(event.type)) yield* waiters.wake(event)
        // a change this gate wrote is projected already (read anyway when the tailer came first)
        if (changesProjection(event) && !projection.projected(event.seq)) changed = true
      }
      // counted before auditors hear of them: one that saw an event sees the gauge count it
      yield* pending.see(events)
      yield* publish(events)
      seq = events[events.length - 1]!.seq
      // what is committed after this read comes with a hint of its own
      if (events.length < PAGE) break
    }
    if (seq <= projection.caughtUpTo()) return
    // read after the log: every change up to `seq` is committed, so the rows show it (or newer)
    const rows = changed ? yield* store.sessionApprovals({ afterSeq: projection.caughtUpTo() }) : []
    yield* projection.caughtUp(rows, seq)
    changed = false
  })

  const start = Effect.flatMap(store.subscribe, (hints) =>
    Queue.take(hints).pipe(
      Effect.zipRight(Queue.takeAll(hints)),
      Effect.zipRight(catchUp),
      Effect.zipRight(Effect.sync(() => {
        unreadable = undefined
      })),
      Effect.catchAll((error) =>
        Effect.zipRight(
          Effect.sync(() => {
            unreadable = error
          }),
          Effect.logError(
            "tool-gate: reading the audit log failed; calls that rely on session approvals fail until it can be read",
            error
          )
        )
      ),
      Effect.forever,
      // the pending gauge's first count, before the first page of the log it is kept by
      (follow) => Effect.zipRight(pending.load, follow),
      // released after the tailer stops (finalizers run in reverse), so that it adds nothing after
      (tailer) => Effect.zipRight(Effect.addFinalizer(() => pending.release), Effect.forkScoped(tailer)),
      Effect.interruptible,
      Effect.asVoid
    ))

  return { unreadable: () => unreadable, start }
}
