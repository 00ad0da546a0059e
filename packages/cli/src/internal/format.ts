/**
 * How the commands print records for people: one line per request, session approval or audit
 * event, so the output greps and pastes well. `--json` output uses the domain schemas instead.
 */
import type { ApprovalRequest, AuditEvent, SessionApproval } from "@tool-gate/core"

const iso = (millis: number): string => new Date(millis).toISOString()

/** `4m 59s`, `2h 0m`, `12s`: time left, to the second. */
export const duration = (millis: number): string => {
  const seconds = Math.max(0, Math.round(millis / 1000))
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m ${seconds % 60}s`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours}h ${minutes % 60}m`
  return `${Math.floor(hours / 24)}d ${hours % 24}h`
}

const call = (request: ApprovalRequest.ApprovalRequest): string =>
  `${request.toolCall.name} ${JSON.stringify(request.toolCall.args)}`

/** `key=value` for each field with a value, in the record's order. */
const fields = (record: Record<string, string | undefined>): string =>
  Object.entries(record)
    .flatMap(([key, value]) => (value === undefined || value === "" ? [] : [`${key}=${value}`]))
    .join("  ")

/** A pending request: id, session, the call, its provenance and the time left. */
export const pendingLine = (request: ApprovalRequest.ApprovalRequest, now: number): string =>
  `${request.requestId}  ${request.toolCall.sessionKey}  ${call(request)}  ${
    fields({
      agent: request.toolCall.agentId,
      intent: request.toolCall.intentId,
      rule: request.rule.id
    })
  }  expires in ${duration(request.expiresAt - now)}`

/**
 * What an answer did: `approved req_1 (deploy {...}) by ana, for the session (exact)`. An approval
 * whose edited arguments the policy denied reads `denied by policy ...`: the outcome is the
 * policy's, not a human's.
 */
export const resolvedLine = (request: ApprovalRequest.ApprovalRequest): string => {
  const resolution = request.resolution
  if (resolution?.deniedBy === "policy") {
    const edited = resolution.editedArgs !== undefined ? ` ${JSON.stringify(resolution.editedArgs)}` : ""
    const from = resolution.respondedBy !== undefined ? ` from ${resolution.respondedBy}` : ""
    const reason = resolution.reason !== undefined ? `: ${resolution.reason}` : ""
    return `denied by policy ${request.requestId} (${
      call(request)
    }): the edited arguments${edited}${from} were refused${reason}`
  }
  const by = resolution?.respondedBy !== undefined ? ` by ${resolution.respondedBy}` : ""
  const session = resolution?.sessionApprovalId !== undefined
    ? `, for the session (session approval ${resolution.sessionApprovalId})`
    : ""
  const edited = resolution?.editedArgs !== undefined
    ? ` with edited args ${JSON.stringify(resolution.editedArgs)}`
    : ""
  const reason = resolution?.reason !== undefined ? `: ${resolution.reason}` : ""
  return `${request.status} ${request.requestId} (${call(request)})${by}${edited}${session}${reason}`
}

export const extendedLine = (request: ApprovalRequest.ApprovalRequest, now: number): string =>
  `extended ${request.requestId} (${call(request)}): expires at ${iso(request.expiresAt)}, in ${
    duration(request.expiresAt - now)
  }`

export const sessionApprovalLine = (approval: SessionApproval.SessionApproval, now: number): string =>
  `${approval.id}  ${approval.sessionKey}  ${approval.toolName}  ${
    fields({
      scope: approval.scope,
      args: approval.args,
      cwd: approval.workingDirectory,
      by: approval.grantedBy,
      request: approval.requestId,
      expires: approval.expiresAt !== undefined ? `in ${duration(approval.expiresAt - now)}` : undefined
    })
  }`

export const auditLine = (event: AuditEvent.AuditEvent): string =>
  `#${event.seq}  ${iso(event.at)}  ${event.type}  ${event.outcome}  ${
    fields({
      session: event.sessionKey,
      tool: event.toolName,
      request: event.requestId,
      rule: event.rule,
      version: event.type === "policy.loaded" ? event.policyVersion : undefined,
      via: event.via,
      by: event.actor,
      reason: event.reason === undefined ? undefined : JSON.stringify(event.reason)
    })
  }`
