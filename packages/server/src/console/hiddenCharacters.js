// The one list of characters a reader cannot see for what they are, and their escapes: the web
// console loads this file as it is (a plain ES module, no imports) and the toolgate CLI imports it
// (`@tool-gate/server/console/hiddenCharacters`, typed by hiddenCharacters.d.ts beside it), so the
// browser and the terminal hide nothing the other shows.

/**
 * The hidden characters, as ranges of code points (one number: that character alone):
 * - C0, DEL, C1 (U+009B is CSI by itself);
 * - bidi marks, embeddings, overrides and isolates (U+061C, U+200E-U+200F, U+202A-U+202E,
 *   U+2066-U+2069), which reorder what is read without showing;
 * - zero-width and invisible characters (U+200B-U+200D, U+2060-U+2065, U+FEFF, U+00AD, U+034F,
 *   U+180E, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0), variation selectors (U+FE00-U+FE0F,
 *   U+E0100-U+E01EF) and tag characters (U+E0000-U+E007F), which hide text;
 * - blank-looking characters (U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000, braille blank
 *   U+2800), which push text out of sight or pass for a space.
 *
 * @type {ReadonlyArray<readonly [number, number?]>}
 */
export const ranges = [
  [0x0000, 0x001f],
  [0x007f, 0x00a0],
  [0x00ad],
  [0x034f],
  [0x061c],
  [0x115f, 0x1160],
  [0x180e],
  [0x2000, 0x200f],
  [0x202a, 0x202f],
  [0x205f, 0x2069],
  [0x2800],
  [0x3000],
  [0x3164],
  [0xfe00, 0xfe0f],
  [0xfeff],
  [0xffa0],
  [0xe0000, 0xe007f],
  [0xe0100, 0xe01ef]
]

const hiddenClass = ranges.map(([from, to = from]) => `\\u{${from.toString(16)}}-\\u{${to.toString(16)}}`).join("")

// An emoji's own presentation selector (U+FE0E, U+FE0F right after a pictograph) and the joiner
// between two pictographs (a family, a profession) show as the emoji they form: left as they are.
const emojiPart = "(?!(?<=\\p{Extended_Pictographic})(?:\\ufe0e|\\ufe0f))" +
  "(?!(?<=\\p{Extended_Pictographic}(?:\\ufe0f|[\\u{1f3fb}-\\u{1f3ff}])?)\\u200d(?=\\p{Extended_Pictographic}))"

/**
 * Matches one hidden character (global: for `replace` and `matchAll`).
 *
 * @type {RegExp}
 */
export const hidden = new RegExp(`${emojiPart}[${hiddenClass}]`, "gu")

const hex4 = (/** @type {number} */ unit) => `\\u${unit.toString(16).padStart(4, "0")}`

/**
 * The escape of code point `code`: `\u202e`, or `\u{e0041}` beyond the Basic Multilingual Plane.
 *
 * @param {number} code
 * @returns {string}
 */
export const escapeCode = (code) => code > 0xffff ? `\\u{${code.toString(16)}}` : hex4(code)

/**
 * `value` as JSON text (indented by `indent`, 0 for one line) with no hidden character left raw:
 * those `JSON.stringify` leaves in strings become `\uXXXX` escapes (a surrogate pair beyond the
 * BMP), so the text is still JSON for the same value. The indentation's line breaks stay: outside
 * strings JSON text has no other control character.
 *
 * @param {unknown} value
 * @param {number} [indent]
 * @returns {string}
 */
export const jsonText = (value, indent = 2) =>
  JSON.stringify(value, null, indent).replace(
    hidden,
    (char) => char === "\n" ? char : Array.from({ length: char.length }, (_, i) => hex4(char.charCodeAt(i))).join("")
  )
