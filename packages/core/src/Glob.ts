/**
 * The glob patterns policies use (`*` any text, `?` one character (a code point), `\` makes the
 * next character literal; the whole text must match, case-sensitively), for other packages that
 * match names the same way: session-key patterns on API tokens, for instance. Matching never
 * backtracks: its time is linear in the text for a given pattern.
 *
 * @example
 * import { Glob } from "@tool-gate/core"
 *
 * const teamA = Glob.make("team-a-*")
 * teamA.test("team-a-7") // true
 * Glob.problem("oops\\") // "ends with a dangling \ escape ..."
 *
 * @since 0.1.0
 */
import * as internal from "./internal/glob.js"

/**
 * A compiled pattern.
 *
 * @since 0.1.0
 * @category models
 */
export interface Glob {
  readonly pattern: string
  readonly test: (text: string) => boolean
}

/**
 * Compiles a pattern (case-sensitive). Check it with `problem` first when it comes from a user.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (pattern: string): Glob => internal.compile(pattern)

/**
 * Why a pattern cannot be used (empty, or a dangling `\`), or `undefined` when it can.
 *
 * @since 0.1.0
 * @category guards
 */
export const problem: (pattern: string) => string | undefined = internal.problem
