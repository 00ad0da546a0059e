/**
 * Bounds on what callers, models and approvers may hand the gate.
 *
 * - Durations: every duration a caller gives (a policy's `ttlMs`, an extension, a session
 *   approval's lifetime) is a whole number of milliseconds between 1 ms and a year: `Infinity`,
 *   `NaN` or a negative value would be stored as JSON `null` or in the past and make the store
 *   unreadable or a grant eternal.
 * - Tool calls (`CallLimits`): the length of ids and names, the length of the working directory,
 *   and the nesting depth and canonical JSON size of the arguments. Each gate may set its own
 *   within `maxCallLimits`, the bounds every store can keep.
 *
 * @example
 * import { Limits } from "@tool-gate/core"
 * import { Either } from "effect"
 *
 * Either.isLeft(Limits.ttlMillis("ttl", "forever" as never)) // true
 * Limits.ttlMillis("ttl", "5 minutes") // Either.right(300000)
 * Either.getOrThrow(Limits.callLimits({ maxArgsBytes: 4_000_000 })).maxDepth // 64
 *
 * @since 0.1.0
 */
import { Duration, Either, type ParseResult, Schema } from "effect"
import { InvalidDuration } from "./ToolGateError.js"

/**
 * The longest TTL or lifetime accepted anywhere: one year.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxTtlMs = 365 * 24 * 60 * 60 * 1000

/**
 * A duration in whole milliseconds, from 1 ms to `maxTtlMs`.
 *
 * @since 0.1.0
 * @category models
 */
export const TtlMillis = Schema.Number.pipe(
  Schema.filter((n) =>
    (Number.isInteger(n) && n >= 1 && n <= maxTtlMs) ||
    `must be a whole number of milliseconds from 1 to ${maxTtlMs} (one year), got ${String(n)}`
  )
)

/**
 * A caller's duration as milliseconds, or `InvalidDuration` naming `field` when it is not a
 * finite duration from 1 ms to a year.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ttlMillis = (field: string, input: Duration.DurationInput): Either.Either<number, InvalidDuration> => {
  const decoded = Duration.decodeUnknown(input)
  const millis = decoded._tag === "Some" ? Duration.toMillis(decoded.value) : Number.NaN
  return Number.isFinite(millis) && millis >= 1 && millis <= maxTtlMs
    ? Either.right(Math.ceil(millis))
    : Either.left(
      new InvalidDuration({
        field,
        message: `must be a finite duration from 1 ms to one year, got ${
          decoded._tag === "Some" ? Duration.format(decoded.value) : String(input)
        }`
      })
    )
}

/**
 * The widest limits a gate may set: what every store keeps alike. Ids are indexed by the SQL
 * stores, and PostgreSQL refuses an index entry over 2,704 bytes: two ids of 400 UTF-16 units
 * (at most 1,200 bytes each in UTF-8) fit, two of 450 do not.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxCallLimits = {
  maxIdLength: 400,
  maxPathLength: 65_536,
  maxArgsBytes: 64 * 1024 * 1024,
  maxDepth: 1_000
} as const

const bounded = (max: number) =>
  Schema.Number.pipe(
    Schema.filter((n) => (Number.isInteger(n) && n >= 1 && n <= max) || `must be a whole number from 1 to ${max}`)
  )

/**
 * What a tool call may carry, checked by `ToolCall.decode` before anything else happens:
 *
 * - `maxIdLength` (default 256): UTF-16 code units of the call id, tool name, session key,
 *   agent, intent and user ids.
 * - `maxPathLength` (default 4,096): UTF-16 code units of the working directory.
 * - `maxArgsBytes` (default 1,000,000): UTF-8 bytes of the arguments' canonical JSON (also
 *   applies to an approver's edited arguments).
 * - `maxDepth` (default 64): nesting of objects and arrays in the arguments, the arguments
 *   object itself being level 1.
 *
 * Every field is optional in the input; each is a whole number from 1 to its `maxCallLimits`.
 *
 * @since 0.1.0
 * @category models
 */
export const CallLimits = Schema.Struct({
  maxIdLength: Schema.optionalWith(bounded(maxCallLimits.maxIdLength), { default: () => 256 }),
  maxPathLength: Schema.optionalWith(bounded(maxCallLimits.maxPathLength), { default: () => 4_096 }),
  maxArgsBytes: Schema.optionalWith(bounded(maxCallLimits.maxArgsBytes), { default: () => 1_000_000 }),
  maxDepth: Schema.optionalWith(bounded(maxCallLimits.maxDepth), { default: () => 64 })
})
/**
 * @since 0.1.0
 * @category models
 */
export interface CallLimits extends Schema.Schema.Type<typeof CallLimits> {}
/**
 * What a gate's options carry: any subset of the limits; the others keep their defaults.
 *
 * @since 0.1.0
 * @category models
 */
export type CallLimitsInput = Schema.Schema.Encoded<typeof CallLimits>

/**
 * The limits of a gate that sets none.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultCallLimits: CallLimits = Schema.decodeSync(CallLimits)({})

/**
 * A gate's limits from its options (absent fields keep their defaults), or the parse error
 * naming the field out of range.
 *
 * @since 0.1.0
 * @category constructors
 */
export const callLimits = (input?: CallLimitsInput): Either.Either<CallLimits, ParseResult.ParseError> =>
  input === undefined ? Either.right(defaultCallLimits) : Schema.decodeUnknownEither(CallLimits)(input)
