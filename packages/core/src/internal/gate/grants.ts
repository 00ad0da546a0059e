/**
 * Session grants: the in-memory projection of active session approvals (loaded from the store,
 * written through on every change this gate makes, caught up from the log by the tailer for the
 * changes of other processes) and the gate's session-approval API over it.
 */
import { Clock, type Duration, Effect, Either, Option, Ref } from "effect"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import * as Limits from "../../Limits.js"
import * as SessionApproval from "../../SessionApproval.js"
import * as ToolCall from "../../ToolCall.js"
import { type InvalidToolCall, type PersistenceError, SessionApprovalNotFound } from "../../ToolGateError.js"
import * as SessionIndex from "../sessionIndex.js"
import type { RevokeOptions } from "./contract.js"
import * as Ids from "./ids.js"

/** The projection: read by every decision, updated by grants, revocations and the log tailer. */
export interface Projection {
  readonly index: Ref.Ref<SessionIndex.SessionIndex>
  /** the log's last sequence number when the projection was loaded */
  readonly loadedAt: number
  readonly project: (rows: ReadonlyArray<SessionApproval.SessionApproval>) => Effect.Effect<void>
}

/** Loads the active session approvals, as of the log's current end. */
export const makeProjection = (store: ApprovalStore["Type"]): Effect.Effect<Projection, PersistenceError> =>
  Effect.gen(function*() {
    const loadedAt = yield* store.lastSeq
    const initial = yield* store.sessionApprovals({ activeAt: yield* Clock.currentTimeMillis })
    const index = yield* Ref.make(SessionIndex.apply({ seq: loadedAt, sessions: new Map() }, initial))
    return {
      index,
      loadedAt,
      project: (rows) => Ref.update(index, (current) => SessionIndex.apply(current, rows))
    }
  })

/** The id of the call `hasApproval` looks up grants for: no call runs under it. */
const probeId = ToolCall.ToolCallId.make("probe")

/** The session-approval API of the gate. */
export const make = (options: {
  readonly store: ApprovalStore["Type"]
  readonly projection: Projection
  readonly sessionKeyOf: (sessionKey: string) => Either.Either<ToolCall.SessionKey, InvalidToolCall>
}) => {
  const { projection, sessionKeyOf, store } = options
  const { index, project } = projection

  const hasApproval = (
    toolId: string,
    sessionKey: ToolCall.SessionKey,
    call?: { readonly args?: ToolCall.ToolArgs; readonly workingDirectory?: string }
  ) =>
    Effect.gen(function*() {
      if (Either.isLeft(sessionKeyOf(sessionKey))) return false
      const now = yield* Clock.currentTimeMillis
      const held = yield* Ref.get(index)
      if (call === undefined) {
        const grants = held.sessions.get(sessionKey)?.get(ToolCall.normalizeName(toolId)) ?? []
        return grants.some((grant) => grant.scope === "tool" && SessionApproval.isActive(grant, now))
      }
      const probe: ToolCall.ToolCall = {
        id: probeId,
        name: toolId,
        args: call.args ?? {},
        sessionKey,
        ...(call.workingDirectory !== undefined ? { workingDirectory: call.workingDirectory } : {})
      }
      return SessionIndex.lookup(held, probe, now) !== undefined
    })

  const recordApproval = (
    toolId: string,
    sessionKey: ToolCall.SessionKey,
    approved: boolean,
    recordOptions?: { readonly grantedBy?: string; readonly ttl?: Duration.DurationInput }
  ) =>
    Effect.gen(function*() {
      const key = yield* sessionKeyOf(sessionKey)
      const ttlMs = recordOptions?.ttl !== undefined ? yield* Limits.ttlMillis("ttl", recordOptions.ttl) : undefined
      const now = yield* Clock.currentTimeMillis
      const toolName = ToolCall.normalizeName(toolId)
      const actor = recordOptions?.grantedBy
      if (approved) {
        const granted = yield* store.grant(
          {
            id: Ids.sessionApprovalId(),
            sessionKey: key,
            toolName,
            scope: "tool",
            ...(actor !== undefined ? { grantedBy: actor } : {}),
            createdAt: now,
            ...(ttlMs !== undefined ? { expiresAt: now + ttlMs } : {})
          },
          AuditEvent.sessionGranted(sessionKey, toolName, now, actor)
        )
        yield* project([granted])
      } else {
        const revoked = yield* store.revokeWhere(
          { sessionKey, toolName },
          now,
          AuditEvent.sessionToolRevoked(sessionKey, toolName, now, actor)
        )
        yield* project(revoked)
      }
    })

  const clearApprovals = (sessionKey?: ToolCall.SessionKey, actor?: string) =>
    Effect.gen(function*() {
      if (sessionKey !== undefined) yield* sessionKeyOf(sessionKey)
      const now = yield* Clock.currentTimeMillis
      const revoked = yield* store.revokeWhere({ sessionKey }, now, AuditEvent.approvalsCleared(sessionKey, now, actor))
      yield* project(revoked)
      return revoked.length
    })

  const sessionApprovals = (sessionKey?: ToolCall.SessionKey) =>
    sessionKey !== undefined && Either.isLeft(sessionKeyOf(sessionKey))
      ? Effect.succeed([])
      : Effect.flatMap(Clock.currentTimeMillis, (now) => store.sessionApprovals({ sessionKey, activeAt: now }))

  const revokeApproval = (id: SessionApproval.SessionApprovalId, { actor, sessionKey }: RevokeOptions = {}) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [held] = yield* store.sessionApprovals({ id })
      // Ids are global: a caller limited to one session never reaches another session's approval.
      if (sessionKey !== undefined && held?.sessionKey !== sessionKey) {
        return yield* new SessionApprovalNotFound({ sessionApprovalId: id })
      }
      const revoked = yield* store.revoke(
        id,
        now,
        AuditEvent.sessionApprovalRevoked(id, held, now, actor)
      )
      if (Option.isNone(revoked)) return yield* new SessionApprovalNotFound({ sessionApprovalId: id })
      yield* project([revoked.value])
      return revoked.value
    })

  return { hasApproval, recordApproval, clearApprovals, sessionApprovals, revokeApproval } as const
}
