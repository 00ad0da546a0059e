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
import { escapeCode, hidden, jsonText } from "@tool-gate/server/console/hiddenCharacters"
import type { Console } from "effect"
import { Effect } from "effect"

// What a reader cannot see for what it is: one list, in @tool-gate/server's console folder, which
// the web console loads as it is; see hiddenCharacters.js there.
const short: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" }

/** `text` with every control or hidden character shown as an escape: safe to print as one line. */
export const escape = (text: string): string =>
  text.replace(hidden, (char) => short[char] ?? escapeCode(char.codePointAt(0)!))

/**
 * `value` as JSON text (indented by `indent`, 0 for one line) with no control or hidden character left raw:
 * the characters `JSON.stringify` leaves in strings become `\uXXXX` escapes (outside strings JSON
 * text has none but the indentation's line breaks).
 */
export const json = (value: unknown, indent = 2): string => jsonText(value, indent)

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
