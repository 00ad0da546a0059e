const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed()

/** C0 controls, DEL and C1 controls: newlines and escapes would forge lines in an approver's terminal */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/

/** Below this length a loop over the units beats two native scans (the hot path's ids are short). */
const SHORT = 64

const CLEAN = 0
const HAS_CONTROL = 1
const LONE_SURROGATE = 2

const scan = (s: string): number => {
  if (s.length >= SHORT) return CONTROL.test(s) ? HAS_CONTROL : isWellFormed(s) ? CLEAN : LONE_SURROGATE
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    // one unsigned comparison for the common case: U+0020-U+007E
    if (((c - 0x20) >>> 0) < 0x5f) continue
    if (c < 0x20 || c <= 0x9f) return HAS_CONTROL
    if (c < 0xd800 || c >= 0xe000) continue
    const next = c <= 0xdbff ? s.charCodeAt(i + 1) : Number.NaN
    if (!(next >= 0xdc00 && next <= 0xdfff)) return LONE_SURROGATE
    i++
  }
  return CLEAN
}

/**
 * Why a call's id or text (call id, tool name, session key, agent, intent and user ids, working
 * directory) is refused, if it is: too long, a control character, or a lone surrogate (SQLite
 * stores it as U+FFFD, so `"team-b\ud800"` and `"team-b\udc00"` would become one session).
 * The message never quotes the text.
 */
export const textProblem = (s: string, maxLength: number): string | undefined => {
  if (s.length > maxLength) return `must be at most ${maxLength} characters (UTF-16 code units), got ${s.length}`
  switch (scan(s)) {
    case CLEAN:
      return undefined
    case HAS_CONTROL:
      return "must not contain control characters (U+0000-U+001F, U+007F-U+009F)"
    default:
      return "must be well-formed Unicode (no lone surrogates)"
  }
}

/** `textProblem(s, maxLength) === undefined`, for the hot path */
export const isCleanText = (s: string, maxLength: number): boolean => s.length <= maxLength && scan(s) === CLEAN

/**
 * Whether a string can go into arguments every store keeps alike: no U+0000 (PostgreSQL's jsonb
 * refuses it), no lone surrogate.
 */
export const isPortableString = (s: string): boolean => {
  if (s.length >= SHORT) return s.indexOf("\u0000") === -1 && isWellFormed(s)
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    // one unsigned comparison for the common case: U+0001-U+D7FF
    if (((c - 1) >>> 0) < 0xd7ff) continue
    if (c === 0) return false
    if (c >= 0xe000) continue
    const next = c <= 0xdbff ? s.charCodeAt(i + 1) : Number.NaN
    if (!(next >= 0xdc00 && next <= 0xdfff)) return false
    i++
  }
  return true
}

/** Why a string cannot go into portable arguments, if it cannot. */
export const portableStringProblem = (s: string): string | undefined =>
  isPortableString(s)
    ? undefined
    : s.indexOf("\u0000") !== -1
    ? "must not contain U+0000 (PostgreSQL cannot store it)"
    : "must be well-formed Unicode (no lone surrogates)"

const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f]|\p{Cs}/gu

/**
 * A key or index of a problem's path as it can be printed: a model chooses argument keys, so
 * control characters and lone surrogates are written as `\uXXXX`.
 */
export const printableKey = (key: string | number): string =>
  typeof key === "number"
    ? String(key)
    : key.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
