/**
 * The value a gated step returns instead of running a tool that needs a human: the pipeline may
 * stop here (even exit), and later resume with `ToolGate.resume(requestId)`.
 *
 * @example
 * import { PauseSignal } from "@tool-gate/core"
 *
 * const onResult = (u: unknown) => (PauseSignal.isPauseSignal(u) ? `paused: ${u.prompt}` : "ran")
 *
 * @since 0.1.0
 */
import { Predicate, Schema } from "effect"
import type { ApprovalRequest } from "./ApprovalRequest.js"
import { RequestId } from "./ApprovalRequest.js"

/**
 * @since 0.1.0
 * @category models
 */
export const PauseSignal = Schema.Struct({
  __pause: Schema.Literal(true),
  requestId: RequestId,
  prompt: Schema.String,
  ttlMs: Schema.Number,
  expiresAt: Schema.Number,
  metadata: Schema.Struct({
    toolId: Schema.String,
    toolCallId: Schema.String,
    intentId: Schema.optional(Schema.String),
    agentId: Schema.optional(Schema.String),
    sessionKey: Schema.String,
    rule: Schema.String,
    approvalRequest: Schema.Literal(true)
  })
})
/**
 * @since 0.1.0
 * @category models
 */
export interface PauseSignal extends Schema.Schema.Type<typeof PauseSignal> {}

/**
 * @since 0.1.0
 * @category guards
 */
export const isPauseSignal = (u: unknown): u is PauseSignal =>
  Predicate.hasProperty(u, "__pause") && u.__pause === true && Predicate.hasProperty(u, "requestId")

/**
 * The signal for a pending request. `ttlMs` is the request's time to live; `expiresAt` is when
 * it runs out (timeout means deny).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromRequest = (request: ApprovalRequest): PauseSignal => {
  const call = request.toolCall
  return {
    __pause: true,
    requestId: request.requestId,
    prompt: request.prompt,
    ttlMs: request.expiresAt - request.createdAt,
    expiresAt: request.expiresAt,
    metadata: {
      toolId: call.name,
      toolCallId: call.id,
      ...(call.intentId !== undefined ? { intentId: call.intentId } : {}),
      ...(call.agentId !== undefined ? { agentId: call.agentId } : {}),
      sessionKey: call.sessionKey,
      rule: request.rule.id,
      approvalRequest: true
    }
  }
}
