/**
 * The one list of characters a reader cannot see for what they are (controls, bidi controls,
 * zero-width, invisible, tag, variation selector and blank-looking characters) and their escapes,
 * shared by the web console (which loads `hiddenCharacters.js` as it is) and the toolgate CLI.
 *
 * @example
 * import { escapeCode, hidden } from "@tool-gate/server/console/hiddenCharacters"
 *
 * // "report\\u202efdp.sh"
 * const shown = "report\u202efdp.sh".replace(hidden, (char) => escapeCode(char.codePointAt(0)!))
 *
 * @since 0.1.0
 */

/**
 * The hidden characters, as ranges of code points (one number: that character alone).
 *
 * @since 0.1.0
 * @category constants
 */
export declare const ranges: ReadonlyArray<readonly [number, number?]>

/**
 * Matches one hidden character (global: for `replace` and `matchAll`), but not an emoji's own
 * presentation selector nor the joiner between two pictographs.
 *
 * @since 0.1.0
 * @category constants
 */
export declare const hidden: RegExp

/**
 * The escape of a code point: `\u202e`, or `\u{e0041}` beyond the Basic Multilingual Plane.
 *
 * @since 0.1.0
 * @category formatting
 */
export declare const escapeCode: (code: number) => string

/**
 * A value as JSON text (indented by `indent`, default 2, 0 for one line) whose hidden characters
 * are JSON escapes: the same value, with nothing in it the eye cannot see.
 *
 * @since 0.1.0
 * @category formatting
 */
export declare const jsonText: (value: unknown, indent?: number) => string
