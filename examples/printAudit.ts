// The audit trail as the demos print it: one line per event, in sequence order.
import type { AuditEvent } from "@tool-gate/core"

export const auditTrail = (events: ReadonlyArray<AuditEvent.AuditEvent>): string =>
  [
    "audit trail:",
    ...events.map((e) =>
      `  #${String(e.seq).padStart(2)} ${e.type.padEnd(18)} ${e.outcome.padEnd(8)} ${(e.toolName ?? "").padEnd(26)} ${
        e.rule ? `rule=${e.rule}` : ""
      }${e.via ? ` via=${e.via}` : ""}${e.actor ? ` by=${e.actor}` : ""}`
    )
  ].join("\n")
