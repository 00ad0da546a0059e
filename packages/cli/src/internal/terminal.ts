/**
 * The CLI's output boundary. Most of what `toolgate` prints was chosen by others: tool names,
 * session keys, agent and intent ids and arguments by a model, reasons by approvers, error texts
 * by a server. A control character in any of them would act on the approver's terminal: a newline
 * forges an "approved" line, an escape sequence retitles or clears the screen, a bidi override
 * reorders what is read. So nothing reaches the terminal unescaped:
 *
 * - the commands print through `lines`: every string is one line, and every control or hidden
 *   character in it (C0 with newline and ESC, DEL, C1 with U+009B CSI, bidi overrides, isolates and
 *   marks, zero-width and invisible characters, tag characters, variation selectors, blank-looking
 *   spaces) is shown as an escape (`\n`, `\u001b`, `\u2800`, `\u{e0041}`);
 * - `--json` output is JSON text whose strings escape those characters (`JSON.stringify` leaves
 *   all but C0 raw), so it stays valid JSON, one line per `Console.log`;
 * - @effect/cli's own output prints through `docs`, its styling dropped: help (on stdout) keeps its
 *   line breaks, usage errors (on stderr, quoting the command line) are one escaped line each.
 */
import type { Console } from "effect"
import { Effect } from "effect"

// What a reader cannot see for what it is. The web console keeps the same list in
// packages/server/src/console/console.js (another runtime, no shared module): change both.
// - C0, DEL, C1 (U+009B is CSI by itself);
// - bidi marks, embeddings, overrides and isolates (U+061C, U+200E-U+200F, U+202A-U+202E,
//   U+2066-U+2069), which reorder what is read without showing;
// - zero-width and invisible characters (U+200B-U+200D, U+2060-U+2065, U+FEFF, U+00AD, U+034F,
//   U+180E, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0), variation selectors (U+FE00-U+FE0F,
//   U+E0100-U+E01EF) and tag characters (U+E0000-U+E007F), which hide text;
// - blank-looking characters (U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000, braille blank
//   U+2800), which push text out of sight or pass for a space.
const hiddenRanges: ReadonlyArray<readonly [number, number?]> = [
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
const hiddenClass = hiddenRanges.map(([from, to = from]) => `\\u{${from.toString(16)}}-\\u{${to.toString(16)}}`).join(
  ""
)
// An emoji's own presentation selector (U+FE0E, U+FE0F right after a pictograph) and the joiner
// between two pictographs (a family, a profession) show as the emoji they form: left as they are.
const emojiPart = "(?!(?<=\\p{Extended_Pictographic})(?:\\ufe0e|\\ufe0f))" +
  "(?!(?<=\\p{Extended_Pictographic}(?:\\ufe0f|[\\u{1f3fb}-\\u{1f3ff}])?)\\u200d(?=\\p{Extended_Pictographic}))"
const hidden = new RegExp(`${emojiPart}[${hiddenClass}]`, "gu")
// In JSON text C0 appears only as the indentation's line breaks (`JSON.stringify` escapes it in strings).
const jsonRaw = new RegExp(`${emojiPart}(?![\\u0000-\\u001f])[${hiddenClass}]`, "gu")
const short: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" }

const hex4 = (unit: number): string => `\\u${unit.toString(16).padStart(4, "0")}`

/** `\uXXXX`, or `\u{XXXXX}` beyond the Basic Multilingual Plane. */
const unicodeEscape = (char: string): string => {
  const code = char.codePointAt(0)!
  return code > 0xffff ? `\\u{${code.toString(16)}}` : hex4(code)
}

/** `\uXXXX`, or the surrogate pair `\uXXXX\uXXXX` beyond the BMP: what JSON can read. */
const jsonEscape = (char: string): string =>
  Array.from({ length: char.length }, (_, i) => hex4(char.charCodeAt(i))).join("")

/** `text` with every control or hidden character shown as an escape: safe to print as one line. */
export const escape = (text: string): string => text.replace(hidden, (char) => short[char] ?? unicodeEscape(char))

/**
 * `value` as JSON text (indented by `indent`, 0 for one line) with no control or hidden character left raw:
 * the characters `JSON.stringify` leaves in strings become `\uXXXX` escapes (outside strings JSON
 * text has none but the indentation's line breaks).
 */
export const json = (value: unknown, indent = 2): string =>
  JSON.stringify(value, null, indent).replace(jsonRaw, jsonEscape)

// The styling @effect/cli's help renders (Select Graphic Rendition sequences).
const styling = /\u001b\[[0-9;]*m/g

/** A console whose strings pass `out` (log, info, debug) or `err` (error, warn) on their way. */
const mapText = (
  base: Console.Console,
  out: (text: string) => string,
  err: (text: string) => string
): Console.Console => {
  const map = (f: (text: string) => string) => (values: ReadonlyArray<unknown>) =>
    values.map((value) => (typeof value === "string" ? f(value) : value))
  const [toOut, toErr] = [map(out), map(err)]
  const unsafe = base.unsafe
  return {
    ...base,
    log: (...values) => base.log(...toOut(values)),
    info: (...values) => base.info(...toOut(values)),
    debug: (...values) => base.debug(...toOut(values)),
    error: (...values) => base.error(...toErr(values)),
    warn: (...values) => base.warn(...toErr(values)),
    // Effect's loggers write through `unsafe` (`serve` logs what the store and the platform report)
    unsafe: {
      ...unsafe,
      log: (...values) => unsafe.log(...toOut(values)),
      info: (...values) => unsafe.info(...toOut(values)),
      debug: (...values) => unsafe.debug(...toOut(values)),
      error: (...values) => unsafe.error(...toErr(values)),
      warn: (...values) => unsafe.warn(...toErr(values))
    }
  }
}

/** Every string printed is one line, escaped. */
export const lines = (base: Console.Console): Console.Console => mapText(base, escape, escape)

const plain = (text: string): string => text.replace(styling, "")

/**
 * @effect/cli's output: help keeps its line breaks; a usage error (one paragraph, which may quote
 * the command line) is one escaped line. Styling is dropped from both.
 */
export const docs = (base: Console.Console): Console.Console =>
  mapText(
    base,
    (text) => plain(text).split("\n").map(escape).join("\n"),
    (text) => escape(plain(text).replace(/\n+$/, ""))
  )

/** Runs `effect` with the current console behind `wrap`. */
export const withConsole =
  (wrap: (base: Console.Console) => Console.Console) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.console, (base) => Effect.withConsole(effect, wrap(base)))
