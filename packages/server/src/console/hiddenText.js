// Hidden characters on the page: each one (or a run of the same one) a marked escape that names
// it, never the raw character. The list itself is hiddenCharacters.js, shared with the CLI.
import { el } from "./dom.js"
import { escapeCode, hidden } from "./hiddenCharacters.js"

const CHAR_NAMES = {
  0x00a0: "NO-BREAK SPACE",
  0x00ad: "SOFT HYPHEN",
  0x034f: "COMBINING GRAPHEME JOINER",
  0x061c: "ARABIC LETTER MARK",
  0x115f: "HANGUL CHOSEONG FILLER",
  0x1160: "HANGUL JUNGSEONG FILLER",
  0x180e: "MONGOLIAN VOWEL SEPARATOR",
  0x2000: "EN QUAD",
  0x2001: "EM QUAD",
  0x2002: "EN SPACE",
  0x2003: "EM SPACE",
  0x2004: "THREE-PER-EM SPACE",
  0x2005: "FOUR-PER-EM SPACE",
  0x2006: "SIX-PER-EM SPACE",
  0x2007: "FIGURE SPACE",
  0x2008: "PUNCTUATION SPACE",
  0x2009: "THIN SPACE",
  0x200a: "HAIR SPACE",
  0x200b: "ZERO WIDTH SPACE",
  0x200c: "ZERO WIDTH NON-JOINER",
  0x200d: "ZERO WIDTH JOINER",
  0x200e: "LEFT-TO-RIGHT MARK",
  0x200f: "RIGHT-TO-LEFT MARK",
  0x202a: "LEFT-TO-RIGHT EMBEDDING",
  0x202b: "RIGHT-TO-LEFT EMBEDDING",
  0x202c: "POP DIRECTIONAL FORMATTING",
  0x202d: "LEFT-TO-RIGHT OVERRIDE",
  0x202e: "RIGHT-TO-LEFT OVERRIDE",
  0x202f: "NARROW NO-BREAK SPACE",
  0x205f: "MEDIUM MATHEMATICAL SPACE",
  0x2060: "WORD JOINER",
  0x2061: "FUNCTION APPLICATION",
  0x2062: "INVISIBLE TIMES",
  0x2063: "INVISIBLE SEPARATOR",
  0x2064: "INVISIBLE PLUS",
  0x2066: "LEFT-TO-RIGHT ISOLATE",
  0x2067: "RIGHT-TO-LEFT ISOLATE",
  0x2068: "FIRST STRONG ISOLATE",
  0x2069: "POP DIRECTIONAL ISOLATE",
  0x2800: "BRAILLE PATTERN BLANK",
  0x3000: "IDEOGRAPHIC SPACE",
  0x3164: "HANGUL FILLER",
  0xfeff: "ZERO WIDTH NO-BREAK SPACE",
  0xffa0: "HALFWIDTH HANGUL FILLER"
}

function charName(code) {
  const named = CHAR_NAMES[code]
  if (named !== undefined) return named
  if (code <= 0x9f) return "CONTROL CHARACTER"
  if (code >= 0xfe00 && code <= 0xfe0f) return `VARIATION SELECTOR-${code - 0xfe00 + 1}`
  if (code >= 0xe0100) return `VARIATION SELECTOR-${code - 0xe0100 + 17}`
  if (code >= 0xe0020 && code <= 0xe007e) return `TAG CHARACTER (hides "${String.fromCharCode(code - 0xe0000)}")`
  if (code >= 0xe0000) return "TAG CHARACTER"
  return "INVISIBLE CHARACTER"
}

/** Whether `text` holds a hidden character (line breaks aside when `lineBreaks`, as in JSON text). */
export function hasHidden(text, lineBreaks = false) {
  for (const [char] of text.matchAll(hidden)) if (!(lineBreaks && char === "\n")) return true
  return false
}

/**
 * `text` as nodes for an element, each hidden character (or run of the same one) a marked escape
 * that names it, never the raw character: `\u202e`, `\u2800×4000`. With `lineBreaks`, line feeds
 * stay (the indentation of JSON text, where JSON.stringify escaped every other C0 control).
 */
export function visible(text, lineBreaks = false) {
  const nodes = []
  let at = 0
  let run
  const flush = () => {
    if (run === undefined) return
    const name = `U+${run.code.toString(16).padStart(4, "0").toUpperCase()} ${charName(run.code)}`
    const label = run.count > 1 ? `${escapeCode(run.code)}×${run.count}` : escapeCode(run.code)
    nodes.push(
      el("span", { class: "hidden-char", title: run.count > 1 ? `${run.count} × ${name}` : name }, label)
    )
    run = undefined
  }
  for (const match of text.matchAll(hidden)) {
    const char = match[0]
    if (lineBreaks && char === "\n") continue
    const code = char.codePointAt(0)
    if (match.index > at || run?.code !== code) {
      flush()
      if (match.index > at) nodes.push(text.slice(at, match.index))
      run = { code, count: 0 }
    }
    run.count++
    at = match.index + char.length
  }
  flush()
  if (at < text.length) nodes.push(text.slice(at))
  return nodes
}

/** `text` with every hidden character as its escape: for attributes and one-line notices. */
export const plain = (text) => text.replace(hidden, (char) => escapeCode(char.codePointAt(0)))
