/**
 * What the model reads when a call does not run: a tool result with `isError: true` whose text
 * says why (the rule's or the person's reason, or that the approval timed out) and that the call
 * did not run, so the model can go on instead of failing the turn.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import type { ToolGateError } from "@tool-gate/core"

const refusal = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true })

/** Denied by policy, by a person, or by the approval's expiry. */
export const denied = (error: ToolGateError.ToolDenied): CallToolResult => {
  const request = error.requestId === undefined ? "" : ` (approval request ${error.requestId})`
  switch (error.outcome) {
    case "policy":
      return refusal(
        `tool-gate denied this call by policy rule ${error.rule ?? "default"}: ${error.reason}. The call did not run.`
      )
    case "denied":
      return refusal(`tool-gate: a person denied this call${request}: ${error.reason}. The call did not run.`)
    case "expired":
      return refusal(
        `tool-gate: nobody answered the approval request for this call in time${request}; an approval that ` +
          "times out is a denial. The call did not run; ask the user before trying it again."
      )
  }
}

/** Arguments the tool's input schema (or the gate's limits) refuse. */
export const invalidArguments = (problems: ReadonlyArray<string>): CallToolResult =>
  refusal(
    `tool-gate refused this call: its arguments do not match the tool's input schema: ${
      problems.join("; ")
    }. The call did not run; fix the arguments and call again.`
  )

/** A tool the downstream server does not list. */
export const unknownTool = (name: string): CallToolResult =>
  refusal(`tool-gate refused this call: the server has no tool named ${JSON.stringify(name)}. The call did not run.`)

/** A tool whose input schema cannot be used to validate its calls. */
export const unusableSchema = (reason: string): CallToolResult =>
  refusal(`tool-gate refused this call: ${reason}, so its arguments cannot be checked. The call did not run.`)

/** The store could not be read or written: nothing is forwarded without a durable decision. */
export const storeUnavailable = (error: ToolGateError.PersistenceError): CallToolResult =>
  refusal(
    `tool-gate refused this call: its approval store is unavailable (${error.message}). Nothing is forwarded ` +
      "without a recorded decision; the call did not run."
  )

/** The gate refused the call itself (an id already used for another call, a value over its limits). */
export const refused = (message: string): CallToolResult =>
  refusal(`tool-gate refused this call: ${message}. The call did not run.`)

/** The downstream server failed to answer a forwarded call. */
export const downstreamFailed = (message: string): CallToolResult =>
  refusal(`the tool's server failed while running this call: ${message}`)
