import type { SessionApproval } from "../SessionApproval.js"
import { covers, isActive } from "../SessionApproval.js"
import type { ToolCall } from "../ToolCall.js"
import { argsDigest, normalizeName } from "../ToolCall.js"

/**
 * One session's approvals as the gate holds them: the newest version seen of each (by `seq`, the
 * log position of its last change), active ones by lower-cased tool, revoked ones as tombstones
 * (id -> seq of the revocation). Versions arrive from reads that may finish out of order (the
 * session's first read, the log tailer, this gate's own writes); comparing seqs keeps the newest,
 * and a tombstone keeps an older active version of a revoked approval from coming back.
 *
 * Mutable, changed only in synchronous steps, so a reader never sees half a change. A tool's
 * list is replaced on each change of it (changes are rare, lookups are every call's).
 */
export interface SessionGrants {
  readonly tools: Map<string, ReadonlyArray<SessionApproval>>
  readonly revoked: Map<string, number>
}

export const make = (): SessionGrants => ({ tools: new Map(), revoked: new Map() })

/**
 * Applies one version of an approval of this session when it is newer than the one held.
 * `floor`: every change up to this log position is already reflected (an approval held neither
 * active nor revoked was not active as of it), so an unknown version at or below it is stale.
 */
export const apply = (grants: SessionGrants, row: SessionApproval, floor: number): void => {
  const held = grants.tools.get(row.toolName) ?? []
  const known = held.find((grant) => grant.id === row.id)?.seq ?? grants.revoked.get(row.id)
  if (known !== undefined ? known >= row.seq : row.seq <= floor) return
  const others = held.filter((grant) => grant.id !== row.id)
  if (row.revokedAt === undefined) {
    grants.revoked.delete(row.id)
    grants.tools.set(row.toolName, [...others, row])
  } else {
    grants.revoked.set(row.id, row.seq)
    if (others.length === 0) grants.tools.delete(row.toolName)
    else grants.tools.set(row.toolName, others)
  }
}

/** Drops the tombstones at or below `floor`: `apply` refuses the versions they stood against. */
export const prune = (grants: SessionGrants, floor: number): void => {
  for (const [id, seq] of grants.revoked) if (seq <= floor) grants.revoked.delete(id)
}

/** Whether a tool-wide approval of the tool is active at `now`. */
export const hasToolWide = (grants: SessionGrants, toolName: string, now: number): boolean => {
  const held = grants.tools.get(normalizeName(toolName))
  return held !== undefined && held.some((grant) => grant.scope === "tool" && isActive(grant, now))
}

/**
 * The active grant that covers this call, if any (`SessionApproval.covers`). The caller passes the
 * grants of the call's own session, so nothing leaks across sessions.
 */
export const lookup = (grants: SessionGrants, call: ToolCall, now: number): SessionApproval | undefined => {
  const held = grants.tools.get(normalizeName(call.name))
  if (held === undefined) return undefined
  let digest: string | undefined
  for (const grant of held) {
    if (grant.scope === "exact") digest ??= argsDigest(call.args)
    if (covers(grant, call, now, digest)) return grant
  }
  return undefined
}
