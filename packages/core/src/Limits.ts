/**
 * Bounds on what callers, models and approvers may hand the gate. Every duration a caller gives
 * (a policy's `ttlMs`, an extension, a session approval's lifetime) is a whole number of
 * milliseconds between 1 ms and a year: `Infinity`, `NaN` or a negative value would be stored as
 * JSON `null` or in the past and make the store unreadable or a grant eternal.
 *
 * @example
 * import { Limits } from "@tool-gate/core"
 * import { Either } from "effect"
 *
 * Either.isLeft(Limits.ttlMillis("ttl", "forever" as never)) // true
 * Limits.ttlMillis("ttl", "5 minutes") // Either.right(300000)
 *
 * @since 0.1.0
 */
import { Duration, Either, Schema } from "effect"
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
