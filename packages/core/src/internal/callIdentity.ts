import type { ToolCall } from "../ToolCall.js"
import { canonicalArgs, normalizeName } from "../ToolCall.js"
import { sha256 } from "./canonical.js"

/**
 * What makes two calls the same call: tool name (case-insensitive), canonical arguments, agent,
 * intent and working directory. A tool-call id names one call in its session; a record found for
 * an id is only ever applied to a call with the same identity.
 */
const identityText = (call: ToolCall, args = canonicalArgs(call.args)): string =>
  JSON.stringify([
    normalizeName(call.name),
    args,
    call.agentId ?? null,
    call.intentId ?? null,
    call.workingDirectory ?? null
  ])

/** SHA-256 of the call's identity, kept with a recorded decision (`args`: its canonical arguments, when known). */
export const callDigest = (call: ToolCall, args?: string): string => sha256(identityText(call, args))

/** Whether two calls (a recorded one and a new one with the same id) are the same call. */
export const sameCall = (a: ToolCall, b: ToolCall): boolean => identityText(a) === identityText(b)
