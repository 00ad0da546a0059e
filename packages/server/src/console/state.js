// What the page knows, shared by its modules. The server's store is the source of truth: this is
// the pending list as last read, the sign-in that read it, and how far the server's clock (which
// decides expiry) is from ours, with the times shown by it.

export const state = {
  token: null,
  /** requestId -> the pending request */
  requests: new Map(),
  /** requestId -> { card, timeLeft } */
  cards: new Map(),
  /** sessionKey -> { section, list, count } */
  groups: new Map(),
  /** requests hidden with "Later"; still pending, listed under the dismissed counter */
  dismissed: new Set(),
  /** whether the token may answer (its role, from GET /me) */
  canAnswer: false,
  /** server clock minus ours, in milliseconds */
  clockOffset: 0,
  /** the last audit sequence number handled; the stream resumes after it */
  lastSeq: 0,
  /** aborts everything the current sign-in started */
  run: null
}

// The server's clock decides expiry. Its Date header (whole seconds) says how far ours is off;
// differences under two seconds are within that rounding and ignored.
export function offsetFrom(response) {
  const date = Date.parse(response.headers.get("date") ?? "")
  if (Number.isNaN(date)) return 0
  const offset = date + 500 - Date.now()
  return Math.abs(offset) < 2000 ? 0 : offset
}

export const serverNow = () => Date.now() + state.clockOffset

export function formatLeft(ms) {
  const seconds = Math.max(0, Math.ceil(ms / 1000))
  const h = Math.floor(seconds / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = String(seconds % 60).padStart(2, "0")
  if (h >= 24) return `${Math.floor(h / 24)}d ${h % 24}h left`
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s} left` : `${m}:${s} left`
}

export const formatTime = (at) => new Date(at - state.clockOffset).toLocaleTimeString()
