/**
 * An OpenTelemetry log sink for the audit trail: every audit event becomes one OpenTelemetry log
 * record, emitted through the `LoggerProvider` of `@effect/opentelemetry` (the one
 * `NodeSdk.layer({ logRecordProcessor })` or `Logger.layerLoggerProvider` sets up), so audit
 * events reach the same collector as the application's logs and traces.
 *
 * A record's body is the event's JSON form (`AuditEvent.toJson`: `args` as an object, `time` in
 * RFC 3339), its timestamp the event's `at`, its event name `tool-gate.audit.<type>`, and its
 * attributes the fields a search filters on (`tool_gate.seq`, `tool_gate.outcome`,
 * `tool_gate.session_key`, ...), never argument values. Denials and expiries are `WARN`, the
 * rest `INFO`.
 *
 * Import it on its own path (`@tool-gate/core/AuditOtel`): it needs `@effect/opentelemetry` and
 * its OpenTelemetry packages, which the rest of the core does not.
 *
 * @example
 * import { Logger, Resource } from "@effect/opentelemetry"
 * import { BatchLogRecordProcessor, ConsoleLogRecordExporter } from "@opentelemetry/sdk-logs"
 * import type { ApprovalStore, ToolGate } from "@tool-gate/core"
 * import * as AuditOtel from "@tool-gate/core/AuditOtel"
 * import { Layer } from "effect"
 *
 * declare const Gate: Layer.Layer<ToolGate.ToolGate | ApprovalStore.ApprovalStore>
 *
 * const AuditLogs = AuditOtel.layer().pipe(
 *   Layer.provide(Logger.layerLoggerProvider(new BatchLogRecordProcessor({ exporter: new ConsoleLogRecordExporter() }))),
 *   Layer.provide(Resource.layer({ serviceName: "agent" })),
 *   Layer.provide(Gate)
 * )
 *
 * @since 0.1.0
 */
import { OtelLoggerProvider } from "@effect/opentelemetry/Logger"
import type { AnyValueMap, LogAttributes, Logger } from "@opentelemetry/api-logs"
import { Clock, Effect, Layer, Schedule, Stream } from "effect"
import { ApprovalStore } from "./ApprovalStore.js"
import * as AuditEvent from "./AuditEvent.js"
import { ToolGate } from "./ToolGate.js"
import type { PersistenceError } from "./ToolGateError.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Replay the log after this sequence number first (0: the whole log), then follow it. Without
   * it, the events committed after the layer starts.
   */
  readonly afterSeq?: number | undefined
  /** Keep `args` and `editedArgs` in the records' bodies (default `true`). */
  readonly args?: boolean | undefined
  /** The OpenTelemetry logger's name (default `@tool-gate/core`). */
  readonly loggerName?: string | undefined
}

// OpenTelemetry's severity numbers (SeverityNumber.INFO and .WARN of @opentelemetry/api-logs)
const INFO = 9
const WARN = 13

const warns = new Set<AuditEvent.Outcome>(["deny", "denied", "expired"])

/** The searchable fields of an event, as attributes: who, what and how it ended, never arguments. */
const attributesOf = (event: AuditEvent.AuditEvent): LogAttributes => {
  const attributes: LogAttributes = {
    "tool_gate.seq": event.seq,
    "tool_gate.event.type": event.type,
    "tool_gate.outcome": event.outcome
  }
  const optional: ReadonlyArray<readonly [string, string | undefined]> = [
    ["tool_gate.session_key", event.sessionKey],
    ["tool_gate.tool_name", event.toolName],
    ["tool_gate.tool_call_id", event.toolCallId],
    ["tool_gate.request_id", event.requestId],
    ["tool_gate.rule", event.rule],
    ["tool_gate.policy_version", event.policyVersion],
    ["tool_gate.via", event.via],
    ["tool_gate.actor", event.actor]
  ]
  for (const [key, value] of optional) if (value !== undefined) attributes[key] = value
  return attributes
}

/**
 * The log record of an event (`args`: keep the arguments in the body).
 *
 * @since 0.1.0
 * @category utils
 */
export const emit = (logger: Logger, event: AuditEvent.AuditEvent, observedAt: number, args = true): void => {
  const body = AuditEvent.toJson(event) as unknown as Record<string, unknown>
  if (!args) {
    delete body["args"]
    delete body["editedArgs"]
  }
  const severity = warns.has(event.outcome) ? WARN : INFO
  logger.emit({
    eventName: `tool-gate.audit.${event.type}`,
    timestamp: event.at,
    observedTimestamp: observedAt,
    severityNumber: severity,
    severityText: severity === WARN ? "WARN" : "INFO",
    body: body as AnyValueMap,
    attributes: attributesOf(event)
  })
}

/**
 * A layer that emits every audit event of the log as an OpenTelemetry log record, for as long as
 * it is in scope: from `afterSeq` on, or every event committed after the layer starts (the log's
 * head is read first, so none committed meanwhile is missed). A read that fails is retried from
 * the last event emitted, so none is skipped or emitted twice.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<never, PersistenceError, ToolGate | ApprovalStore | OtelLoggerProvider> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const gate = yield* ToolGate
    const logger = (yield* OtelLoggerProvider).getLogger(options.loggerName ?? "@tool-gate/core")
    let last = options.afterSeq ?? (yield* (yield* ApprovalStore).lastSeq)
    const events = Stream.suspend(() => gate.auditLog({ afterSeq: last })).pipe(
      Stream.tapErrorCause((cause) =>
        Effect.logWarning("tool-gate: reading the audit log for OpenTelemetry failed; retrying", cause)
      ),
      Stream.retry(Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("10 seconds"))))
    )
    yield* Effect.forkScoped(Stream.runForEach(events, (event) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        emit(logger, event, now, options.args ?? true)
        last = event.seq
      })))
  }))
