/**
 * Stable call ids for MCP calls, which carry none of their own that outlives a connection: the id
 * of a call is the digest of its tool, canonical arguments and the policy version that judges it,
 * plus an occurrence number, the
 * count of identical calls of the session already finished (run, or denied and told). A retry of
 * a call that has not finished (the client timed out, the gateway was restarted) gets the same id,
 * so it replays the recorded decision instead of asking again; the next identical call after one
 * finished is judged anew.
 *
 * The count is kept in memory. After a restart it starts again at 0: an id whose approved call
 * already ran is found spent by the gate (`CallAlreadyExecuted`) and the count moves past it, so
 * nothing runs twice; an id denied before the restart replays that denial once.
 *
 * The policy version is in the digest because a recorded allow is replayed as it was recorded: a
 * gateway started again under another policy must judge an identical call anew, never run it on
 * the old policy's word.
 */
import { ToolCall } from "@tool-gate/core"
import { createHash } from "node:crypto"

/** The occurrence counts of one session, by call digest. */
export type Occurrences = Map<string, number>

/** The digest naming a call by what it is: the judged tool name, the canonical arguments and the policy version. */
export const digest = (toolName: string, args: ToolCall.ToolArgs, policyVersion: string): string =>
  createHash("sha256")
    .update(`${policyVersion}\n${ToolCall.normalizeName(toolName)}\n${ToolCall.canonicalArgs(args)}`)
    .digest("hex")
    .slice(0, 32)

/** The id of occurrence `n` of the call with `key`. */
export const idOf = (key: string, n: number): string => `mcp-${key}-${n}`

/** The occurrence a new call with `key` starts at. */
export const current = (occurrences: Occurrences, key: string): number => occurrences.get(key) ?? 0

/** Marks occurrence `n` finished: the next identical call is judged anew. */
export const finished = (occurrences: Occurrences, key: string, n: number): void => {
  if (current(occurrences, key) <= n) occurrences.set(key, n + 1)
}
