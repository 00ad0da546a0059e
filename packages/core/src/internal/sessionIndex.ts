import type { SessionApproval } from "../SessionApproval.js"
import { covers } from "../SessionApproval.js"
import type { ToolCall } from "../ToolCall.js"
import { argsDigest, normalizeName } from "../ToolCall.js"

/**
 * The in-memory projection of active session approvals: session -> lower-cased tool -> grants.
 * Immutable (copy-on-write per session) so it can live in a `Ref` and be read without locks.
 */
export interface SessionIndex {
  readonly seq: number
  readonly sessions: ReadonlyMap<string, ReadonlyMap<string, ReadonlyArray<SessionApproval>>>
}

export const empty: SessionIndex = { seq: 0, sessions: new Map() }

/** Applies granted or revoked rows; a row older than the one held for the same id is ignored. */
export const apply = (index: SessionIndex, rows: ReadonlyArray<SessionApproval>): SessionIndex => {
  if (rows.length === 0) return index
  const sessions = new Map(index.sessions)
  let seq = index.seq
  for (const row of rows) {
    seq = Math.max(seq, row.seq)
    const tools = new Map(sessions.get(row.sessionKey) ?? [])
    const current = tools.get(row.toolName) ?? []
    const held = current.find((a) => a.id === row.id)
    if (held !== undefined && held.seq >= row.seq) continue
    const others = current.filter((a) => a.id !== row.id)
    const next = row.revokedAt === undefined ? [...others, row] : others
    if (next.length === 0) tools.delete(row.toolName)
    else tools.set(row.toolName, next)
    if (tools.size === 0) sessions.delete(row.sessionKey)
    else sessions.set(row.sessionKey, tools)
  }
  return { seq, sessions }
}

/**
 * The active grant that covers this call, if any (`SessionApproval.covers`). Only the call's own
 * session is consulted, so nothing leaks across sessions.
 */
export const lookup = (index: SessionIndex, call: ToolCall, now: number): SessionApproval | undefined => {
  const grants = index.sessions.get(call.sessionKey)?.get(normalizeName(call.name))
  if (grants === undefined) return undefined
  let digest: string | undefined
  for (const grant of grants) {
    if (grant.scope === "exact") digest ??= argsDigest(call.args)
    if (covers(grant, call, now, digest)) return grant
  }
  return undefined
}
