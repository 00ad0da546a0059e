/**
 * What the gate decided about one tool call, with its provenance: the rule (id and list) and the
 * policy version it came from, and the session approval when one was used.
 *
 * @example
 * import { Decision } from "@tool-gate/core"
 *
 * const describe = (d: Decision.Decision) =>
 *   d._tag === "Deny" ? `denied by ${d.rule.id}` : d._tag === "Allow" ? `allowed via ${d.via}` : "needs approval"
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Which list a rule came from; `default` when no rule matched.
 *
 * @since 0.1.0
 * @category models
 */
export const RuleSource = Schema.Literal("deny", "requireApproval", "allow", "default")
/**
 * @since 0.1.0
 * @category models
 */
export type RuleSource = typeof RuleSource.Type

/**
 * A stable reference to the rule a decision cites: its id (`requireApproval[2]` or the id the
 * author gave) and its list.
 *
 * @since 0.1.0
 * @category models
 */
export const RuleRef = Schema.Struct({ id: Schema.String, source: RuleSource })
/**
 * @since 0.1.0
 * @category models
 */
export type RuleRef = typeof RuleRef.Type

/**
 * `exact`: the same tool, canonical-equal arguments and working directory; `tool`: the tool
 * with any arguments.
 *
 * @since 0.1.0
 * @category models
 */
export const SessionScope = Schema.Literal("exact", "tool")
/**
 * @since 0.1.0
 * @category models
 */
export type SessionScope = typeof SessionScope.Type

/**
 * @since 0.1.0
 * @category models
 */
export const Allow = Schema.TaggedStruct("Allow", {
  via: Schema.Literal("policy", "sessionApproval", "default"),
  rule: Schema.optional(RuleRef),
  sessionApprovalId: Schema.optional(Schema.String),
  policyVersion: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type Allow = typeof Allow.Type

/**
 * @since 0.1.0
 * @category models
 */
export const Deny = Schema.TaggedStruct("Deny", {
  rule: RuleRef,
  reason: Schema.String,
  policyVersion: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type Deny = typeof Deny.Type

/**
 * @since 0.1.0
 * @category models
 */
export const RequireApproval = Schema.TaggedStruct("RequireApproval", {
  rule: RuleRef,
  ttlMs: Schema.Number,
  sessionScope: SessionScope,
  reason: Schema.optional(Schema.String),
  policyVersion: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type RequireApproval = typeof RequireApproval.Type

/**
 * @since 0.1.0
 * @category models
 */
export const Decision = Schema.Union(Allow, Deny, RequireApproval)
/**
 * @since 0.1.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * A policy decision (allow or deny) kept for a tool call id, so that asking again for the same
 * call returns it instead of judging again. `toolName` and `argsDigest` tell a repeat from a
 * different call that reuses the id.
 *
 * @since 0.1.0
 * @category models
 */
export const Recorded = Schema.Struct({
  sessionKey: Schema.String,
  toolCallId: Schema.String,
  toolName: Schema.String,
  argsDigest: Schema.String,
  /**
   * SHA-256 of the whole call (tool, canonical arguments, agent, intent, working directory); a
   * record without one (written before it was kept) is never replayed for another call
   */
  callDigest: Schema.optional(Schema.String),
  at: Schema.Number,
  decision: Schema.Union(Allow, Deny)
})
/**
 * @since 0.1.0
 * @category models
 */
export interface Recorded extends Schema.Schema.Type<typeof Recorded> {}

/**
 * The outcome word audit events use for a decision.
 *
 * @since 0.1.0
 * @category utils
 */
export const outcome = (decision: Decision): "allow" | "deny" | "pending" =>
  decision._tag === "Allow" ? "allow" : decision._tag === "Deny" ? "deny" : "pending"
