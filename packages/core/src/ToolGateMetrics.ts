/**
 * The gate's metrics, as `effect/Metric` values in Effect's metric registry: read them with
 * `Metric.value` / `Metric.snapshot`, or export them with any exporter of that registry (the
 * `@effect/opentelemetry` metrics layer, for one). Every gate of the process adds to them.
 *
 * | name | kind | tags | what |
 * | --- | --- | --- | --- |
 * | `toolgate.decisions` | counter | `operation`, `outcome` | every answer `evaluate` and `authorize` give |
 * | `toolgate.requests.pending` | gauge | | pending approval requests in the gate's store |
 * | `toolgate.requests.time_to_answer` | histogram (ms) | `status` | from a request's creation to a human's answer |
 * | `toolgate.requests.expired` | counter | | requests this process expired (timeout means deny) |
 * | `toolgate.store.duration` | histogram (ms) | `operation` | each call the gate makes to its store (with `storeMetrics: true`) |
 *
 * @example
 * import { ToolGateMetrics } from "@tool-gate/core"
 * import { Effect, Metric } from "effect"
 *
 * const allowed = Metric.value(ToolGateMetrics.decisionsOf("authorize", "allow"))
 *
 * Effect.runPromise(allowed).then((state) => console.log(state.count))
 *
 * @since 0.1.0
 */
import { Metric, MetricBoundaries, MetricKey } from "effect"

/**
 * What a `toolgate.decisions` answer was: a policy `allow` or `deny`, `pending` (a human must
 * answer), or the human's `approved` / `denied`, or `expired` (nobody answered in time).
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "allow" | "deny" | "pending" | "approved" | "denied" | "expired"

/**
 * The gate operations counted in `toolgate.decisions`.
 *
 * @since 0.1.0
 * @category models
 */
export type Operation = "evaluate" | "authorize"

const decisionsKey = MetricKey.counter("toolgate.decisions", {
  description: "answers evaluate and authorize give, by operation and outcome",
  incremental: true
})

/**
 * `toolgate.decisions`: every answer `evaluate` and `authorize` give, tagged `operation`
 * (`evaluate` | `authorize`) and `outcome` (see `Outcome`). A call asked again (replay by call
 * id) counts again: `gate` on a call that needs a human counts `pending`, then its answer.
 *
 * @since 0.1.0
 * @category metrics
 */
export const decisions: Metric.Metric.Counter<number> = Metric.fromMetricKey(decisionsKey)

const outcomes: ReadonlyArray<Outcome> = ["allow", "deny", "pending", "approved", "denied", "expired"]

const taggedDecisions = (operation: Operation) =>
  Object.fromEntries(outcomes.map((outcome) => [
    outcome,
    Metric.fromMetricKey(
      decisionsKey.pipe(MetricKey.tagged("operation", operation), MetricKey.tagged("outcome", outcome))
    )
  ])) as Record<Outcome, Metric.Metric.Counter<number>>

// built once: the gate updates them on every call
const decisionMetrics: Record<Operation, Record<Outcome, Metric.Metric.Counter<number>>> = {
  evaluate: taggedDecisions("evaluate"),
  authorize: taggedDecisions("authorize")
}

/**
 * `toolgate.decisions` with both its tags: the metric the gate updates.
 *
 * @since 0.1.0
 * @category metrics
 */
export const decisionsOf = (operation: Operation, outcome: Outcome): Metric.Metric.Counter<number> =>
  decisionMetrics[operation][outcome]

/**
 * `toolgate.requests.pending`: the approval requests pending in the gate's store, as the gate's
 * reader of the log sees them (answers and expiries from every process included). Two gates of one
 * process on one store count its requests twice.
 *
 * @since 0.1.0
 * @category metrics
 */
export const pendingRequests: Metric.Metric.Gauge<number> = Metric.gauge("toolgate.requests.pending", {
  description: "approval requests pending in the gate's store"
})

const second = 1000

/**
 * `toolgate.requests.time_to_answer`: milliseconds from a request's creation to the answer this
 * process committed, tagged `status` (`approved` | `denied`). Buckets from one second to a day.
 *
 * @since 0.1.0
 * @category metrics
 */
export const timeToAnswer = Metric.histogram(
  "toolgate.requests.time_to_answer",
  MetricBoundaries.fromIterable(
    [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600].map((s) => s * second)
  ),
  "milliseconds from a request's creation to its answer"
)

// made once: a tagged metric made per answer builds and hashes its key each time
const timeToAnswerByStatus = {
  approved: Metric.tagged(timeToAnswer, "status", "approved"),
  denied: Metric.tagged(timeToAnswer, "status", "denied")
}

/**
 * `toolgate.requests.time_to_answer` tagged with the answer's status.
 *
 * @since 0.1.0
 * @category metrics
 */
export const timeToAnswerOf = (status: "approved" | "denied") => timeToAnswerByStatus[status]

/**
 * `toolgate.requests.expired`: requests this process expired (each request counts once, in the
 * process whose expiry committed).
 *
 * @since 0.1.0
 * @category metrics
 */
export const expiredRequests: Metric.Metric.Counter<number> = Metric.counter("toolgate.requests.expired", {
  description: "approval requests expired by this process",
  incremental: true
})

const storeDurationKey = MetricKey.histogram(
  "toolgate.store.duration",
  MetricBoundaries.exponential({ start: 0.05, factor: 2, count: 16 }),
  "milliseconds each store operation of the gate took"
)

/**
 * `toolgate.store.duration`: milliseconds each call the gate makes to its `ApprovalStore` took,
 * tagged `operation` (the store method: `recordDecision`, `createRequest`, `answer`, `tail`, ...),
 * when the gate's options say `storeMetrics: true`. Buckets from 0.05 ms to about 1.6 s.
 *
 * @since 0.1.0
 * @category metrics
 */
export const storeDuration = Metric.fromMetricKey(storeDurationKey)

/**
 * `toolgate.store.duration` for one store operation.
 *
 * @since 0.1.0
 * @category metrics
 */
export const storeDurationOf = (operation: string) =>
  Metric.fromMetricKey(storeDurationKey.pipe(MetricKey.tagged("operation", operation)))
