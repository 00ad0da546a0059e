/**
 * Asking the client's own user (MCP elicitation) to answer an approval request, beside or instead
 * of the operators. The answer goes through `respond` like any other: the first answer wins,
 * exactly once, and a later one (from the user or an operator) changes nothing.
 */
import type { ElicitRequestFormParams, ElicitResult } from "@modelcontextprotocol/sdk/types.js"
import type { PauseSignal, ToolCall, ToolGate } from "@tool-gate/core"
import { type ApprovalRequest, ToolCall as Calls } from "@tool-gate/core"
import { escapeCode, hidden } from "@tool-gate/server/console/hiddenCharacters"
import { Effect } from "effect"

/** Sends an elicitation request to the client, tied to the call it is about. */
export type Elicit = (
  params: ElicitRequestFormParams,
  options: { readonly timeoutMs: number; readonly signal: AbortSignal }
) => Promise<ElicitResult>

const decisions = ["approve_once", "approve_session", "deny"] as const

const requestedSchema: ElicitRequestFormParams["requestedSchema"] = {
  type: "object",
  properties: {
    decision: {
      type: "string",
      title: "Decision",
      enum: [...decisions],
      enumNames: ["Approve once", "Approve for this session", "Deny"]
    },
    reason: { type: "string", title: "Reason", description: "told to the model when you deny" }
  },
  required: ["decision"]
}

/** The call as the user reads it: hidden and direction-changing characters shown as escapes. */
const shown = (text: string) => text.replace(hidden, (char) => escapeCode(char.codePointAt(0)!))

const messageOf = (pause: PauseSignal.PauseSignal, call: ToolCall.ToolCallInput) => {
  const args = Calls.canonicalArgs((call.args ?? {}) as ToolCall.ToolArgs)
  const limited = args.length > 2_000 ? `${args.slice(0, 2_000)}… (${args.length} characters)` : args
  return shown(`${pause.prompt}\n\nTool: ${call.name}\nArguments: ${limited}\n\ntool-gate request ${pause.requestId}`)
}

const isDecision = (u: unknown): u is (typeof decisions)[number] => decisions.includes(u as never)

/**
 * Asks the client's user; their choice is answered as theirs. A refusal or a dismissed question
 * denies only when `declineDenies` (the client alone answers); otherwise the operators still may.
 */
export const ask = (
  elicit: Elicit,
  options: {
    readonly gate: ToolGate.Service
    readonly pause: PauseSignal.PauseSignal
    readonly call: ToolCall.ToolCallInput
    readonly agentId: string | undefined
    readonly declineDenies: boolean
  }
): Effect.Effect<void> => {
  const { agentId, call, gate, pause } = options
  const respondedBy = `mcp-client:${agentId ?? "unknown"}`
  const requestId = pause.requestId as ApprovalRequest.RequestId
  // answered elsewhere first: the interruption cancels the question in the client
  return Effect.tryPromise((signal) =>
    elicit(
      { mode: "form", message: messageOf(pause, call), requestedSchema },
      { timeoutMs: Math.max(1, pause.expiresAt - Date.now()), signal }
    )
  ).pipe(
    Effect.flatMap((result) => {
      const content = result.content ?? {}
      if (result.action === "accept" && isDecision(content.decision)) {
        const reason = typeof content.reason === "string" && content.reason !== "" ? content.reason : undefined
        return gate.respond(requestId, {
          decision: content.decision,
          respondedBy,
          ...(reason === undefined ? {} : { reason })
        })
      }
      return options.declineDenies
        ? gate.respond(requestId, { decision: "deny", respondedBy, reason: "the user declined in the client" })
        : Effect.void
    }),
    // another answer came first, or the client could not ask: the request waits for the operators
    Effect.catchAll((error) => Effect.logDebug("tool-gate mcp: the client's answer was not taken", error)),
    Effect.asVoid
  )
}
