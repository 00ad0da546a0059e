/**
 * `toolgate.requests.pending`: the store's pending requests as the gate's log tailer sees them. The
 * tailer counts the pending requests once, with the log's last seq read at the same moment, then
 * reads every event after the point the gate opened the store at (some of them again, all in seq
 * order): only the events after the counted seq move the gauge, each once. Nothing is held per
 * request, and no request is read: a backlog of 100,000 pending requests costs the gate one count.
 */
import { Effect, FiberRef } from "effect"
import type { ApprovalStore } from "../../ApprovalStore.js"
import type * as AuditEvent from "../../AuditEvent.js"
import * as ToolGateMetrics from "../../ToolGateMetrics.js"

/** The gauge's share of one gate. */
export interface PendingGauge {
  /** the requests pending now, counted once before the tailer's first page */
  readonly load: Effect.Effect<void>
  readonly see: (events: ReadonlyArray<AuditEvent.AuditEvent>) => Effect.Effect<void>
  /** takes this gate's share back out of the gauge (the gate closes) */
  readonly release: Effect.Effect<void>
}

/** How an event moves the number of pending requests. */
const moves = (event: AuditEvent.AuditEvent): number =>
  event.type === "approval.requested"
    ? 1
    : event.type === "approval.resolved" || event.type === "approval.expired"
    ? -1
    : 0

export const make = (store: ApprovalStore["Type"]): PendingGauge => {
  // this gate's share of the gauge, exact as of the log's seq `countedAt` (none before a count)
  let share = 0
  let countedAt: number | undefined
  let warned = false
  // the share and the gauge move in one step: an interruption leaves them alike
  const add = (delta: number): Effect.Effect<void> =>
    delta === 0 ? Effect.void : Effect.withFiberRuntime((fiber) => {
      share += delta
      ToolGateMetrics.pendingRequests.unsafeModify(delta, fiber.getFiberRef(FiberRef.currentMetricLabels))
      return Effect.void
    })

  // A failed count is tried again before the next page the tailer reads (a page at or before the
  // count's seq is in it already); the failure is logged once.
  const count = store.countPending.pipe(
    Effect.flatMap(({ pending, seq }) => {
      countedAt = seq
      return add(pending)
    }),
    Effect.catchAll((error) =>
      warned ? Effect.void : Effect.zipRight(
        Effect.sync(() => {
          warned = true
        }),
        Effect.logWarning(
          "tool-gate: counting the pending requests failed; the pending gauge leaves them out until a count succeeds",
          error
        )
      )
    )
  )

  const apply = (events: ReadonlyArray<AuditEvent.AuditEvent>) =>
    Effect.suspend(() => {
      if (countedAt === undefined) return Effect.void
      let delta = 0
      for (const event of events) {
        if (event.seq <= countedAt) continue
        countedAt = event.seq
        delta += moves(event)
      }
      return add(delta)
    })

  const see = (events: ReadonlyArray<AuditEvent.AuditEvent>) =>
    Effect.suspend(() => countedAt === undefined ? Effect.zipRight(count, apply(events)) : apply(events))

  const release = Effect.suspend(() => add(-share))

  return { load: count, see, release }
}
