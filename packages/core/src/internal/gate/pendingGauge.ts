/**
 * `toolgate.requests.pending`: the store's pending requests as the gate's log tailer sees them. The
 * tailer loads the pending requests once, then reads every event after the point the gate opened
 * the store at (some of them again): requests are kept by id, so an event read twice, or the
 * creation of a request the load already found, counts once.
 */
import { Effect, Metric } from "effect"
import type { ApprovalStore } from "../../ApprovalStore.js"
import type * as AuditEvent from "../../AuditEvent.js"
import * as ToolGateMetrics from "../../ToolGateMetrics.js"

/** The gauge's share of one gate. */
export interface PendingGauge {
  /** the requests pending now, read once before the tailer's first page */
  readonly load: Effect.Effect<void>
  readonly see: (events: ReadonlyArray<AuditEvent.AuditEvent>) => Effect.Effect<void>
  /** takes this gate's share back out of the gauge (the gate closes) */
  readonly release: Effect.Effect<void>
}

export const make = (store: ApprovalStore["Type"]): PendingGauge => {
  const pending = new Set<string>()
  const add = (delta: number) => delta === 0 ? Effect.void : Metric.incrementBy(ToolGateMetrics.pendingRequests, delta)

  const load = store.listPending().pipe(
    Effect.flatMap((requests) => {
      const before = pending.size
      for (const request of requests) pending.add(request.requestId)
      return add(pending.size - before)
    }),
    Effect.catchAll((error) =>
      Effect.logWarning("tool-gate: reading the pending requests failed; the pending gauge counts only new ones", error)
    )
  )

  const see = (events: ReadonlyArray<AuditEvent.AuditEvent>) =>
    Effect.suspend(() => {
      const before = pending.size
      for (const event of events) {
        if (event.requestId === undefined) continue
        if (event.type === "approval.requested") pending.add(event.requestId)
        else if (event.type === "approval.resolved" || event.type === "approval.expired") {
          pending.delete(event.requestId)
        }
      }
      return add(pending.size - before)
    })

  const release = Effect.suspend(() => {
    const held = pending.size
    pending.clear()
    return add(-held)
  })

  return { load, see, release }
}
