/**
 * The tests' own list of characters a reader cannot see for what they are (the line feed aside,
 * which separates lines and indents JSON): controls, bidi controls, zero-width, invisible, tag,
 * variation selector and blank-looking characters. Written apart from the CLI's and the console's
 * tables, so that what either prints is checked against a list neither of them is.
 */
const ranges: ReadonlyArray<readonly [number, number?]> = [
  [0x00, 0x09],
  [0x0b, 0x1f],
  [0x7f, 0xa0],
  [0xad],
  [0x34f],
  [0x61c],
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

/** Matches any hidden character (not the line feed). */
export const hiddenChar = new RegExp(
  `[${ranges.map(([from, to = from]) => `\\u{${from.toString(16)}}-\\u{${to.toString(16)}}`).join("")}]`,
  "u"
)
