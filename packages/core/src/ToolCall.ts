/**
 * A tool call an agent wants to make: the unit every decision is about.
 *
 * @example
 * import { ToolCall } from "@tool-gate/core"
 * import { Effect } from "effect"
 *
 * const call = ToolCall.decode({ id: "call-1", name: "bash", args: { command: "ls" }, sessionKey: "s-1" })
 * Effect.runSync(call).name // "bash"
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import { canonicalJson, isPlainJson, sha256 } from "./internal/canonical.js"
import { InvalidToolCall, problemsOf } from "./ToolGateError.js"

/**
 * @since 0.1.0
 * @category models
 */
export const ToolCallId = Schema.NonEmptyTrimmedString.pipe(Schema.brand("@tool-gate/ToolCallId"))
/**
 * @since 0.1.0
 * @category models
 */
export type ToolCallId = typeof ToolCallId.Type

/**
 * @since 0.1.0
 * @category models
 */
export const SessionKey = Schema.NonEmptyTrimmedString.pipe(Schema.brand("@tool-gate/SessionKey"))
/**
 * @since 0.1.0
 * @category models
 */
export type SessionKey = typeof SessionKey.Type

/**
 * Tool arguments: a JSON object. Values JSON cannot carry are refused, because approvals are
 * bound to the canonical JSON digest of the arguments.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolArgs = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter((args) => canonicalJson(args) !== undefined || "arguments must be plain JSON values")
)
/**
 * @since 0.1.0
 * @category models
 */
export type ToolArgs = typeof ToolArgs.Type

/**
 * @since 0.1.0
 * @category models
 */
export const ToolCall = Schema.Struct({
  id: ToolCallId,
  name: Schema.NonEmptyTrimmedString,
  args: Schema.optionalWith(ToolArgs, { default: () => ({}) }),
  sessionKey: SessionKey,
  agentId: Schema.optional(Schema.String),
  intentId: Schema.optional(Schema.String),
  userId: Schema.optional(Schema.String),
  workingDirectory: Schema.optional(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ToolCall extends Schema.Schema.Type<typeof ToolCall> {}

/**
 * What callers hand in: plain strings instead of branded ids, `args` optional.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolCallInput = Schema.Schema.Encoded<typeof ToolCall>

const decodeEither = Schema.decodeUnknownEither(ToolCall, { errors: "all" })

const isId = (u: unknown): u is string => typeof u === "string" && u.length > 0 && u.trim() === u
const isOptionalString = (u: unknown) => u === undefined || typeof u === "string"

/**
 * The hot path's guard: when it says yes, the schema would accept the value too (a property test
 * holds it to that). When it says no, the schema decides and names the problems.
 */
const isWellFormed = (u: unknown): u is ToolCallInput => {
  if (typeof u !== "object" || u === null) return false
  const c = u as Record<string, unknown>
  return isId(c.id) && isId(c.name) && isId(c.sessionKey) &&
    (c.args === undefined ||
      (typeof c.args === "object" && c.args !== null && !Array.isArray(c.args) &&
        Object.getPrototypeOf(c.args) === Object.prototype && isPlainJson(c.args))) &&
    isOptionalString(c.agentId) && isOptionalString(c.intentId) && isOptionalString(c.userId) &&
    isOptionalString(c.workingDirectory)
}

const fromWellFormed = (c: ToolCallInput): ToolCall => ({
  id: c.id as ToolCallId,
  name: c.name,
  args: c.args ?? {},
  sessionKey: c.sessionKey as SessionKey,
  ...(c.agentId !== undefined ? { agentId: c.agentId } : {}),
  ...(c.intentId !== undefined ? { intentId: c.intentId } : {}),
  ...(c.userId !== undefined ? { userId: c.userId } : {}),
  ...(c.workingDirectory !== undefined ? { workingDirectory: c.workingDirectory } : {})
})

/**
 * Validates an unknown value as a tool call, failing with `InvalidToolCall` that names every problem.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decode = (input: unknown): Effect.Effect<ToolCall, InvalidToolCall> => {
  if (isWellFormed(input)) return Effect.succeed(fromWellFormed(input))
  const result = decodeEither(input)
  return result._tag === "Right"
    ? Effect.succeed(result.right)
    : Effect.fail(
new InvalidToolCall({ problems: problemsOf(result.left) })
    )
}

/**
 * Canonical JSON of the arguments (keys sorted at every depth).
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalArgs = (args: ToolArgs): string => canonicalJson(args) ?? "{}"

/**
 * SHA-256 of the canonical arguments: what `exact` session approvals and approvals are bound to.
 *
 * @since 0.1.0
 * @category utils
 */
export const argsDigest = (args: ToolArgs): string => sha256(canonicalArgs(args))

/**
 * Tool names compare case-insensitively everywhere.
 *
 * @since 0.1.0
 * @category utils
 */
export const normalizeName = (name: string): string => name.toLowerCase()
