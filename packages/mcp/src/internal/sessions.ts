/**
 * The gateway's upstream side: one MCP `Server` (the official SDK's low-level server) per client
 * session, listing the downstream tools as they are and answering `tools/call` through the gate.
 * Over stdio the process is one session; over Streamable HTTP each `Mcp-Session-Id` is one, and
 * survives a restart of the gateway (see `httpSessions.ts`).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  type Implementation,
  ListToolsRequestSchema,
  McpError
} from "@modelcontextprotocol/sdk/types.js"
import { escapeCode, hidden } from "@tool-gate/server/console/hiddenCharacters"
import { Cause, Effect, Exit } from "effect"
import * as Calls from "./calls.js"

/** The gateway as MCP clients see it. */
export const serverInfo: Implementation = { name: "tool-gate", version: "0.1.0" }

/**
 * The agent id of a client: its name@version as it said them, hidden characters escaped (a
 * client names itself, and the name is shown to approvers), at most 200 characters.
 */
export const agentIdOf = (client: Implementation | undefined): string | undefined => {
  if (client === undefined) return undefined
  const text = `${client.name}@${client.version}`.replace(hidden, (char) => escapeCode(char.codePointAt(0)!)).trim()
  return text === "" ? undefined : text.slice(0, 200)
}

/** Runs a call's Effect for the SDK: its result, or the downstream's protocol error thrown as it came. */
const runCall = async <A>(effect: Effect.Effect<A, McpError>, signal: AbortSignal): Promise<A> => {
  const exit = await Effect.runPromiseExit(effect, { signal })
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "Some") throw failure.value
  throw new Error(
    Cause.isInterruptedOnly(exit.cause) ? "the call was cancelled" : `tool-gate failed: ${Cause.pretty(exit.cause)}`
  )
}

/** A session's server, before it is connected to its transport. */
export const make = (
  gateway: Calls.Gateway,
  options: { readonly sessionKey: string }
): { readonly server: Server; readonly session: Calls.Session; readonly busy: () => boolean } => {
  const server = new Server(serverInfo, {
    capabilities: { tools: { listChanged: true } },
    instructions: "Every tool call passes tool-gate: a call may be denied, or wait for a person's approval."
  })
  const session: Calls.Session = {
    sessionKey: options.sessionKey,
    agentId: () => agentIdOf(server.getClientVersion()),
    occurrences: new Map(),
    canElicit: () => server.getClientCapabilities()?.elicitation !== undefined
  }
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Array.from(gateway.downstream.tools().values(), (known) => known.tool)
  }))
  let calls = 0
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    calls++
    return runCall(
      Calls.handle(gateway, session, request.params, {
        signal: extra.signal,
        _meta: extra._meta,
        sendNotification: (notification) => extra.sendNotification(notification),
        // sent as part of the call, so over HTTP it travels on the call's own stream
        elicit: (params, { signal, timeoutMs }) =>
          extra.sendRequest({ method: "elicitation/create", params }, ElicitResultSchema, {
            timeout: timeoutMs,
            signal
          })
      }),
      extra.signal
    ).finally(() => void calls--)
  })
  return { server, session, busy: () => calls > 0 }
}

export { McpError }
