import type { ChainLink } from "../../ApprovalStore.js"
import type { Anchor, Problem, Report } from "../../AuditChain.js"
import { sha256 } from "../canonical.js"

/**
 * The audit log's hash chain, once for every store: each event's `hash` is the SHA-256 of the hash
 * of the event before it (nothing at the chain's start), a line feed and the event's JSON text as
 * stored; its `prevHash` repeats the hash it was chained to. Writers compute it in commit order,
 * under the writers' lock, so every process extends the one chain.
 */

/** The hash of an event whose stored text is `text`, chained to `prevHash`. */
export const link = (prevHash: string | undefined, text: string): string => sha256(`${prevHash ?? ""}\n${text}`)

/** The text's field each filtered column repeats, as the SQL driver writes it. */
const fieldOf: Record<string, (event: Record<string, unknown>) => unknown> = {
  at: (event) => event.at,
  type: (event) => event.type,
  outcome: (event) => event.outcome,
  session_key: (event) => event.sessionKey,
  tool_call_id: (event) => event.toolCallId,
  tool_name: (event) => typeof event.toolName === "string" ? event.toolName.toLowerCase() : event.toolName,
  request_id: (event) => event.requestId
}

/** Why the filtered columns disagree with the event's text, if they do (numbers compared as numbers). */
const columnMismatch = (
  text: string,
  columns: ReadonlyArray<readonly [column: string, value: unknown]>
): string | undefined => {
  let event: Record<string, unknown>
  try {
    event = JSON.parse(text)
  } catch {
    return "its stored text is not JSON"
  }
  for (const [column, value] of columns) {
    const field = fieldOf[column]?.(event) ?? null
    const stored = value ?? null
    const same = typeof field === "number" ? Number(stored) === field : stored === field
    if (!same) {
      return `its ${column} column holds ${JSON.stringify(stored)}, its text ${JSON.stringify(field)}: ` +
        "the column was changed (queries filtered on it would misplace the event)"
    }
  }
  return undefined
}

/**
 * Checks links in `seq` order, one at a time, up to the first problem: numbers with no hole from
 * 1, each hashed event's hash over its text, each link to the event before it, no unhashed event
 * once the chain has started, and the recorded `anchor` (when given) still in place.
 */
export const checker = (anchor?: Anchor) => {
  let last: ChainLink | undefined
  let events = 0
  let chainStart: number | undefined
  let problem: Problem | undefined
  const found = (seq: number, kind: Problem["kind"], message: string) => {
    problem = { seq, kind, message }
    return false
  }

  /** Checks the next link; `false` once a problem is found (the links after it are not read). */
  const push = (next: ChainLink): boolean => {
    if (problem !== undefined) return false
    const expected = (last?.seq ?? 0) + 1
    if (next.seq !== expected) {
      return found(
        expected,
        "missing",
        next.seq > expected
          ? `seq ${expected}${next.seq > expected + 1 ? `-${next.seq - 1}` : ""} missing: the log goes from ${
            last === undefined ? "its start" : `seq ${last.seq}`
          } to seq ${next.seq} (events were deleted)`
          : `seq ${next.seq} out of order after seq ${last?.seq ?? 0}`
      )
    }
    if (next.hash === undefined) {
      if (chainStart !== undefined) {
        return found(
          next.seq,
          "unhashed",
          `no hash, though the chain starts at seq ${chainStart} (its hash was removed, or a writer without the chain wrote it)`
        )
      }
    } else {
      const before = last?.hash
      if (next.prevHash !== before) {
        return found(
          next.seq,
          "brokenLink",
          before === undefined
            ? `chained to ${next.prevHash}, but ${
              last === undefined ? "no event comes before it" : `seq ${last.seq} has no hash`
            } (an event before it was deleted or changed)`
            : `chained to ${next.prevHash ?? "nothing"}, not to the hash of seq ${last!.seq} (${before}): ` +
              `seq ${last!.seq} was changed and its hash recomputed, or this event's link was changed`
        )
      }
      if (link(next.prevHash, next.text) !== next.hash) {
        return found(
          next.seq,
          "altered",
          "its stored text does not match its hash: the event was changed after it was written"
        )
      }
      chainStart ??= next.seq
    }
    const mismatch = next.columns === undefined ? undefined : columnMismatch(next.text, next.columns)
    if (mismatch !== undefined) return found(next.seq, "columns", mismatch)
    if (anchor !== undefined && next.seq === anchor.seq && next.hash !== anchor.hash) {
      return found(
        next.seq,
        "anchor",
        `its hash is ${
          next.hash ?? "absent"
        }, not the recorded ${anchor.hash}: the chain was recomputed from here or earlier`
      )
    }
    events++
    last = next
    return true
  }

  /** What the links pushed so far show, once the log has been read to its end (or to the problem). */
  const report = (): Report => {
    if (problem === undefined && anchor !== undefined && (last?.seq ?? 0) < anchor.seq) {
      found(
        (last?.seq ?? 0) + 1,
        "missing",
        `the log ends at seq ${last?.seq ?? 0}, before the recorded seq ${anchor.seq}: events were deleted from its end`
      )
    }
    return {
      valid: problem === undefined,
      events,
      ...(chainStart !== undefined ? { chainStart } : {}),
      ...(problem === undefined && last?.hash !== undefined ? { head: { seq: last.seq, hash: last.hash } } : {}),
      ...(problem !== undefined ? { problem } : {})
    }
  }

  return { push, report }
}
