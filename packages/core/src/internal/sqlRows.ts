import { Effect, Schema } from "effect"
import { ApprovalRequest } from "../ApprovalRequest.js"
import { type AuditEvent, UnsequencedEvent } from "../AuditEvent.js"
import { SessionApproval } from "../SessionApproval.js"

/** BIGINT columns: SQLite returns numbers, PostgreSQL returns strings. */
const DbInt = Schema.Union(Schema.Number, Schema.NumberFromString)

const RequestJson = Schema.parseJson(ApprovalRequest)
const EventJson = Schema.parseJson(UnsequencedEvent)
const ApprovalJson = Schema.parseJson(SessionApproval)

const decodeRequestRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ request: RequestJson })))
const decodeEventRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ seq: DbInt, event: EventJson })))
const decodeApprovalRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ approval: ApprovalJson })))
const decodeSeqRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ seq: Schema.NullOr(DbInt) })))

const encodeRequest = Schema.encode(RequestJson)
const encodeEvent = Schema.encode(EventJson)
const encodeApproval = Schema.encode(ApprovalJson)

export const requests = (rows: ReadonlyArray<unknown>) =>
  Effect.map(decodeRequestRows(rows), (decoded) => decoded.map((row) => row.request))

export const events = (rows: ReadonlyArray<unknown>) =>
  Effect.map(decodeEventRows(rows), (decoded) => decoded.map((row): AuditEvent => ({ seq: row.seq, ...row.event })))

export const approvals = (rows: ReadonlyArray<unknown>) =>
  Effect.map(decodeApprovalRows(rows), (decoded) => decoded.map((row) => row.approval))

/** `seq` of each row, ascending; a `NULL` (the `MAX` of an empty log) reads as 0. */
export const seqs = (rows: ReadonlyArray<unknown>) =>
  Effect.map(decodeSeqRows(rows), (decoded) => decoded.map((row) => row.seq ?? 0).sort((a, b) => a - b))

export const requestRow = (request: ApprovalRequest) =>
  Effect.map(encodeRequest(request), (json) => ({
    request_id: request.requestId,
    session_key: request.toolCall.sessionKey,
    tool_call_id: request.toolCall.id,
    status: request.status,
    created_at: request.createdAt,
    expires_at: request.expiresAt,
    warned_at: request.warnedAt ?? null,
    consumed_at: request.consumedAt ?? null,
    request: json
  }))

export const eventRow = (event: UnsequencedEvent) =>
  Effect.map(encodeEvent(event), (json) => ({
    at: event.at,
    type: event.type,
    outcome: event.outcome,
    session_key: event.sessionKey ?? null,
    tool_call_id: event.toolCallId ?? null,
    // lower-cased so the indexed column answers the case-insensitive tool filter
    tool_name: event.toolName?.toLowerCase() ?? null,
    request_id: event.requestId ?? null,
    event: json
  }))

export const approvalRow = (approval: SessionApproval) =>
  Effect.map(encodeApproval(approval), (json) => ({
    id: approval.id,
    session_key: approval.sessionKey,
    tool_name: approval.toolName,
    seq: approval.seq,
    revoked_at: approval.revokedAt ?? null,
    expires_at: approval.expiresAt ?? null,
    approval: json
  }))
