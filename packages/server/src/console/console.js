// The tool-gate web console: plain JavaScript, no build step, no dependencies.
//
// The server's store is the source of truth. The page loads the pending list once, then follows
// the audit stream (resuming with Last-Event-ID after a drop, so nothing is missed) and asks the
// API again about each request an event names. Every tab does the same, so tabs agree; a tab that
// answers a request another tab already answered gets the server's refusal and shows it.
//
// Everything from the server is put in the page with textContent, never innerHTML: tool
// arguments come from agents and may carry markup.
"use strict"

const TOKEN_KEY = "toolgate.token"
const RETRY_MS = 1000

const state = {
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

const $ = (id) => document.getElementById(id)

/** An element with attributes and children (strings become text nodes). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value)
    else if (value === true) node.setAttribute(name, "")
    else node.setAttribute(name, String(value))
  }
  node.append(...children.filter((child) => child !== undefined && child !== null))
  return node
}

// ---- hidden characters ------------------------------------------------------------------------

// What a reader cannot see for what it is. The CLI keeps the same list in
// packages/cli/src/internal/terminal.ts (another runtime, no shared module): change both.
// C0, DEL and C1 controls; bidi marks, embeddings, overrides and isolates (U+061C, U+200E,
// U+200F, U+202A-U+202E, U+2066-U+2069), which reorder what is read; zero-width and invisible
// characters (U+200B-U+200D, U+2060-U+2065, U+FEFF, U+00AD, U+034F, U+180E, the Hangul fillers),
// variation selectors and tag characters, which hide text; blank-looking characters (U+00A0,
// U+2000-U+200A, U+202F, U+205F, U+3000, the braille blank U+2800), which push text out of sight.
const HIDDEN_RANGES = [
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
// An emoji's own presentation selector and the joiner between two pictographs show as the emoji
// they form: left as they are.
const HIDDEN = new RegExp(
  "(?!(?<=\\p{Extended_Pictographic})(?:\\ufe0e|\\ufe0f))" +
    "(?!(?<=\\p{Extended_Pictographic}(?:\\ufe0f|[\\u{1f3fb}-\\u{1f3ff}])?)\\u200d(?=\\p{Extended_Pictographic}))" +
    `[${HIDDEN_RANGES.map(([from, to = from]) => `\\u{${from.toString(16)}}-\\u{${to.toString(16)}}`).join("")}]`,
  "gu"
)

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

const hex = (code) => code.toString(16).padStart(4, "0")

/** `\u202e`, or `\u{e0041}` beyond the Basic Multilingual Plane. */
const escapeOf = (code) => code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${hex(code)}`

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
function hasHidden(text, lineBreaks = false) {
  for (const [char] of text.matchAll(HIDDEN)) if (!(lineBreaks && char === "\n")) return true
  return false
}

/**
 * `text` as nodes for an element, each hidden character (or run of the same one) a marked escape
 * that names it, never the raw character: `\u202e`, `\u2800×4000`. With `lineBreaks`, line feeds
 * stay (the indentation of JSON text, where JSON.stringify escaped every other C0 control).
 */
function visible(text, lineBreaks = false) {
  const nodes = []
  let at = 0
  let run
  const flush = () => {
    if (run === undefined) return
    const name = `U+${hex(run.code).toUpperCase()} ${charName(run.code)}`
    const label = run.count > 1 ? `${escapeOf(run.code)}×${run.count}` : escapeOf(run.code)
    nodes.push(
      el("span", { class: "hidden-char", title: run.count > 1 ? `${run.count} × ${name}` : name }, label)
    )
    run = undefined
  }
  for (const match of text.matchAll(HIDDEN)) {
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
const plain = (text) => text.replace(HIDDEN, (char) => escapeOf(char.codePointAt(0)))

/** JSON text of `value` whose hidden characters are JSON escapes: the same value, readable in a textarea. */
const readableJson = (value) =>
  JSON.stringify(value, null, 2).replace(
    HIDDEN,
    (char) => char === "\n" ? char : [...Array(char.length).keys()].map((i) => `\\u${hex(char.charCodeAt(i))}`).join("")
  )

// ---- the API ----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message)
    this.status = status
  }
}

/** A request to the approval API with the token; fails with an ApiError carrying the server's message. */
async function api(method, path, body, signal = state.run?.signal) {
  const headers = { authorization: `Bearer ${state.token}` }
  if (body !== undefined) headers["content-type"] = "application/json"
  let response
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store"
    })
  } catch (error) {
    if (signal?.aborted) throw error
    throw new ApiError(0, `The server could not be reached (${error.message})`)
  }
  const text = await response.text()
  let json
  try {
    json = text === "" ? undefined : JSON.parse(text)
  } catch {
    json = undefined
  }
  if (!response.ok) {
    throw new ApiError(response.status, json?.message ?? (text || `${response.status} ${response.statusText}`))
  }
  return { json, response }
}

const enc = encodeURIComponent

/** Who the token is (`GET /me`): the role decides whether the cards offer answers. */
function showIdentity(me) {
  state.canAnswer = me.role === "approver"
  $("identity").textContent = state.canAnswer ? "approver" : "auditor (read-only)"
  $("identity").title = me.sessions === undefined ? me.name : `${me.name}: sessions ${me.sessions.join(", ")}`
  $("identity").hidden = false
  $("read-only").hidden = state.canAnswer
}

// The server's clock decides expiry. Its Date header (whole seconds) says how far ours is off;
// differences under two seconds are within that rounding and ignored.
function offsetFrom(response) {
  const date = Date.parse(response.headers.get("date") ?? "")
  if (Number.isNaN(date)) return 0
  const offset = date + 500 - Date.now()
  return Math.abs(offset) < 2000 ? 0 : offset
}

const serverNow = () => Date.now() + state.clockOffset

// ---- signing in and out -----------------------------------------------------------------------

function showLogin(message) {
  for (
    const id of ["pending-count", "dismissed-toggle", "live", "identity", "sign-out", "read-only", "empty", "dismissed"]
  ) {
    $(id).hidden = true
  }
  $("login").hidden = false
  $("login-error").hidden = message === undefined
  $("login-error").textContent = message ?? ""
  $("token").focus()
}

function clear() {
  state.run?.abort()
  state.run = null
  state.requests.clear()
  state.cards.clear()
  state.groups.clear()
  state.dismissed.clear()
  state.canAnswer = false
  state.lastSeq = 0
  $("sessions").replaceChildren()
  $("dismissed-list").replaceChildren()
  $("notices").replaceChildren()
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY)
  state.token = null
  clear()
  showLogin(message)
}

async function start(token) {
  clear()
  state.token = token
  const run = new AbortController()
  state.run = run
  try {
    // The stream resumes after the head read before the list, so nothing after the list is missed.
    const [{ json: me }, { json: head }] = await Promise.all([api("GET", "/me"), api("GET", "/audit/head")])
    const { json: pending, response } = await api("GET", "/approvals/pending")
    state.clockOffset = offsetFrom(response)
    showIdentity(me)
    $("login").hidden = true
    $("sign-out").hidden = false
    for (const request of pending) upsert(request)
    state.lastSeq = head.lastSeq
    update()
    follow(run.signal)
  } catch (error) {
    if (run.signal.aborted) return
    if (error.status === 401) signOut(error.message)
    else showLogin(error.message)
  }
}

// ---- the live stream --------------------------------------------------------------------------

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener("abort", () => {
      clearTimeout(timer)
      resolve()
    }, { once: true })
  })
}

function setLive(live) {
  $("live").hidden = false
  $("live").textContent = live ? "live" : "reconnecting…"
  $("live").classList.toggle("off", !live)
}

/**
 * Follows `/audit/stream` with fetch, since EventSource cannot send an Authorization header, and
 * reconnects after a drop with Last-Event-ID: the server replays exactly what came after it.
 */
async function follow(signal) {
  while (!signal.aborted) {
    try {
      const response = await fetch("/audit/stream", {
        headers: {
          authorization: `Bearer ${state.token}`,
          accept: "text/event-stream",
          "last-event-id": String(state.lastSeq)
        },
        signal,
        cache: "no-store"
      })
      if (response.status === 401) {
        const body = await response.json().catch(() => undefined)
        return signOut(body?.message ?? "The token was refused")
      }
      if (!response.ok) throw new Error(`the audit stream answered ${response.status}`)
      setLive(true)
      await readEvents(response.body, handleEvent)
    } catch {
      if (signal.aborted) return
    }
    setLive(false)
    await sleep(RETRY_MS, signal)
  }
}

/**
 * Reads Server-Sent Events blocks (`id:` and `data:` lines, a blank line after each). If handling
 * one fails, the connection is closed, so the caller reconnects from the last event handled.
 */
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      buffer += value
      let end
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        let id
        const data = []
        for (const line of block.split("\n")) {
          const colon = line.indexOf(":")
          if (colon <= 0) continue // a comment (": keep-alive") or no field
          const field = line.slice(0, colon)
          const text = line.slice(colon + 1).replace(/^ /, "")
          if (field === "id") id = text
          else if (field === "data") data.push(text)
        }
        if (data.length > 0) await onEvent(JSON.parse(data.join("\n")), id)
      }
    }
  } finally {
    reader.cancel().catch(() => {})
  }
}

/**
 * One audit event. Events are handled one at a time, in order, and the sequence number moves on
 * only once the event is handled, so a reconnect replays whatever was cut short.
 */
async function handleEvent(event, id) {
  switch (event.type) {
    case "approval.requested":
    case "approval.extended":
      await refresh(event.requestId)
      break
    case "approval.resolved":
    case "approval.expired":
      remove(event.requestId)
      break
  }
  if (id !== undefined) state.lastSeq = Number(id)
}

/** Shows the request as the server has it now: pending, or gone. */
async function refresh(requestId) {
  try {
    const { json: request } = await api("GET", `/approvals/${enc(requestId)}`)
    if (request.status !== "pending") return remove(requestId)
    upsert(request)
    update()
  } catch (error) {
    if (error.status === 404 || error.status === 403) return remove(requestId)
    throw error
  }
}

// ---- the list ---------------------------------------------------------------------------------

function formatLeft(ms) {
  const seconds = Math.max(0, Math.ceil(ms / 1000))
  const h = Math.floor(seconds / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = String(seconds % 60).padStart(2, "0")
  if (h >= 24) return `${Math.floor(h / 24)}d ${h % 24}h left`
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s} left` : `${m}:${s} left`
}

const formatTime = (at) => new Date(at - state.clockOffset).toLocaleTimeString()

function group(sessionKey) {
  let entry = state.groups.get(sessionKey)
  if (entry !== undefined) return entry
  const count = el("span", { class: "group-count" })
  const list = el("div", { class: "group-list" })
  const section = el(
    "section",
    { class: "session", "data-session": sessionKey, "aria-label": `Session ${plain(sessionKey)}` },
    el(
      "h2",
      {},
      el("span", { class: "label" }, "session "),
      el("span", { class: "session-key" }, ...visible(sessionKey)),
      count
    ),
    list
  )
  entry = { section, list, count }
  state.groups.set(sessionKey, entry)
  // sessions in key order
  const next = [...state.groups.keys()].sort().find((key) => key > sessionKey)
  $("sessions").insertBefore(section, next === undefined ? null : state.groups.get(next).section)
  return entry
}

function upsert(request) {
  const requestId = request.requestId
  const known = state.cards.get(requestId)
  state.requests.set(requestId, request)
  if (known !== undefined) {
    known.timeLeft.title = `expires at ${formatTime(request.expiresAt)}`
    return
  }
  const { list } = group(request.toolCall.sessionKey)
  const entry = makeCard(request)
  state.cards.set(requestId, entry)
  // oldest first within a session
  const later = [...list.children].find((card) =>
    state.requests.get(card.dataset.requestId).createdAt > request.createdAt
  )
  list.insertBefore(entry.card, later ?? null)
  entry.card.hidden = state.dismissed.has(requestId)
}

function remove(requestId) {
  const entry = state.cards.get(requestId)
  const request = state.requests.get(requestId)
  state.requests.delete(requestId)
  state.cards.delete(requestId)
  state.dismissed.delete(requestId)
  if (entry === undefined) return
  entry.card.remove()
  const sessionKey = request.toolCall.sessionKey
  if (![...state.requests.values()].some((r) => r.toolCall.sessionKey === sessionKey)) {
    state.groups.get(sessionKey)?.section.remove()
    state.groups.delete(sessionKey)
  }
  update()
}

// How much of the arguments a card shows before it says they continue and offers the rest.
const ARGS_LINES = 20
const ARGS_CHARS = 2000

const count = (n, one, many) => `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`

/** Where the shown part of `text` ends: after ARGS_LINES lines or ARGS_CHARS characters. */
function previewEnd(text) {
  let end = Math.min(text.length, ARGS_CHARS)
  let lineBreak = -1
  for (let line = 0; line < ARGS_LINES; line++) {
    lineBreak = text.indexOf("\n", lineBreak + 1)
    if (lineBreak < 0) break
  }
  if (lineBreak >= 0) end = Math.min(end, lineBreak)
  // never between the two halves of a surrogate pair
  if (end < text.length && /[\udc00-\udfff]/.test(text[end])) end--
  return end
}

/**
 * The arguments as JSON text, hidden characters marked. Longer text shows its beginning, ends
 * with a mark, and says how much follows, with "Show all"; until that is pressed the card's
 * approve buttons stay disabled (`card.argsUnread`), so nobody approves what they could not read.
 */
function argsView(card, text) {
  const pre = el("pre", { class: "args" })
  const end = previewEnd(text)
  if (end === text.length) {
    pre.append(...visible(text, true))
    return [pre]
  }
  card.argsUnread = true
  const rest = text.slice(end)
  const lines = rest.split("\n").length - 1
  pre.append(...visible(text.slice(0, end), true), el("span", { class: "args-cut" }, "… (continues)"))
  const showAll = el("button", { type: "button", class: "link" }, "Show all")
  const more = el(
    "p",
    { class: "args-more", role: "status" },
    `The arguments continue: ${count([...rest].length, "more character", "more characters")}` +
      (lines > 0 ? `, ${count(lines, "more line", "more lines")}` : "") +
      ". Read them all before approving. ",
    showAll
  )
  showAll.addEventListener("click", () => {
    pre.replaceChildren(...visible(text, true))
    more.replaceChildren(`Showing all ${count([...text].length, "character", "characters")} of the arguments.`)
    card.argsUnread = false
    syncApprove(card)
  })
  return [pre, more]
}

/** The names of the fields of `request` that hold hidden characters. */
function hiddenFields(request, argsText) {
  const call = request.toolCall
  const fields = [
    ["tool name", call.name],
    ["session key", call.sessionKey],
    ["request id", request.requestId],
    ["agent", call.agentId],
    ["intent", call.intentId],
    ["user", call.userId],
    ["directory", call.workingDirectory],
    ["rule", request.rule.id],
    ["reason", request.reason]
  ]
  const names = fields.filter(([, value]) => typeof value === "string" && hasHidden(value)).map(([name]) => name)
  return hasHidden(argsText, true) ? [...names, "arguments"] : names
}

function makeCard(request) {
  const call = request.toolCall
  const timeLeft = el("span", { class: "time-left", title: `expires at ${formatTime(request.expiresAt)}` })
  const meta = el("dl", { class: "meta" })
  const field = (name, value) => {
    if (value !== undefined && value !== "") {
      meta.append(el("div", {}, el("dt", {}, name), el("dd", {}, ...visible(value))))
    }
  }
  field("agent", call.agentId)
  field("intent", call.intentId)
  field("user", call.userId)
  field("directory", call.workingDirectory)
  field("rule", request.rule.id)
  field("asked", formatTime(request.createdAt))
  const argsText = JSON.stringify(call.args, null, 2)
  const flagged = hiddenFields(request, argsText)
  const card = el("article", {
    class: flagged.length > 0 ? "request suspicious" : "request",
    "data-request-id": request.requestId,
    "aria-label": `${plain(call.name)} in session ${plain(call.sessionKey)}`
  })
  card.append(
    el(
      "header",
      {},
      el("span", { class: "tool" }, ...visible(call.name)),
      el("span", { class: "request-id" }, ...visible(request.requestId)),
      timeLeft
    ),
    meta,
    request.reason ? el("p", { class: "reason" }, ...visible(request.reason)) : undefined,
    ...argsView(card, argsText),
    flagged.length > 0
      ? el(
        "p",
        { class: "hidden-warning", role: "alert" },
        `Hidden or direction-changing characters in: ${flagged.join(", ")}. They are shown as marked escapes ` +
          "(such as \\u202e, with their names on hover); the call contains the characters themselves."
      )
      : undefined,
    el("div", { class: "actions" }),
    el("p", { class: "error card-error", role: "alert", hidden: true })
  )
  fillActions(card, request)
  const entry = { card, timeLeft }
  setTimeLeft(entry, request)
  return entry
}

/** Approving waits until the whole arguments were shown, and edited arguments until they parse. */
function syncApprove(card) {
  for (const button of card.querySelectorAll("button.approve")) {
    button.disabled = card.argsUnread === true || button.dataset.invalid === "true"
    if (card.argsUnread === true) button.title = "Show all the arguments first"
    else button.removeAttribute("title")
  }
}

/** The card's buttons: answers for an approver, only "Later" otherwise. */
function fillActions(card, request) {
  const actions = card.querySelector(".actions")
  const later = el("button", { type: "button", class: "link", onclick: () => dismiss(request.requestId) }, "Later")
  if (!state.canAnswer) return actions.replaceChildren(later)

  const id = request.requestId
  const scope = el(
    "select",
    { "aria-label": "Session approval scope" },
    el("option", { value: "exact" }, "exact arguments"),
    el("option", { value: "tool" }, "whole tool")
  )
  scope.value = request.sessionScope

  const reason = el("input", { name: "reason", placeholder: "why (the agent reads this)", "aria-label": "Reason" })
  const denyForm = el(
    "form",
    {
      class: "deny-form",
      hidden: true,
      onsubmit: (event) => {
        event.preventDefault()
        const text = reason.value.trim()
        answer(card, id, text === "" ? { decision: "deny" } : { decision: "deny", reason: text })
      }
    },
    reason,
    el("button", { type: "submit", class: "danger" }, "Deny"),
    el("button", { type: "button", class: "link", onclick: () => (denyForm.hidden = true) }, "Cancel")
  )

  const argsText = el("textarea", { rows: 6, spellcheck: "false", "aria-label": "Arguments (JSON)" })
  // hidden characters as JSON escapes: the same value, and nothing in the box the eye cannot see
  argsText.value = readableJson(request.toolCall.args)
  const argsError = el("p", { class: "error", hidden: true })
  const argsHidden = el("p", { class: "edit-hidden", role: "alert", hidden: true })
  const approveEdited = el("button", { type: "submit", class: "primary approve" }, "Approve with these arguments")
  argsText.addEventListener("input", () => {
    const { error } = parseArgs(argsText.value)
    argsError.hidden = error === undefined
    argsError.textContent = error ?? ""
    approveEdited.dataset.invalid = String(error !== undefined)
    const hidden = hasHidden(argsText.value, true)
    argsHidden.hidden = !hidden
    argsHidden.replaceChildren(
      ...(hidden ? ["The edited arguments contain hidden characters: ", ...visible(argsText.value, true)] : [])
    )
    syncApprove(card)
  })
  const editForm = el(
    "form",
    {
      class: "edit-form",
      hidden: true,
      onsubmit: (event) => {
        event.preventDefault()
        const { value, error } = parseArgs(argsText.value)
        if (error === undefined) answer(card, id, { decision: "approve_once", editedArgs: value })
      }
    },
    argsText,
    argsError,
    argsHidden,
    approveEdited,
    el("button", { type: "button", class: "link", onclick: () => (editForm.hidden = true) }, "Cancel")
  )

  actions.replaceChildren(
    el(
      "div",
      { class: "buttons" },
      el(
        "button",
        { type: "button", class: "primary approve", onclick: () => answer(card, id, { decision: "approve_once" }) },
        "Approve once"
      ),
      el(
        "span",
        { class: "joined" },
        el("button", {
          type: "button",
          class: "approve",
          onclick: () => answer(card, id, { decision: "approve_session", scope: scope.value })
        }, "Approve for session"),
        scope
      ),
      el("button", { type: "button", onclick: () => openForm(denyForm, reason) }, "Deny…"),
      el("button", { type: "button", onclick: () => openForm(editForm, argsText) }, "Edit args…"),
      later
    ),
    denyForm,
    editForm
  )
  syncApprove(card)
}

function openForm(form, focus) {
  form.hidden = false
  focus.focus()
}

/** Edited arguments: a JSON object, or the reason they are not one. */
function parseArgs(text) {
  let value
  try {
    value = JSON.parse(text)
  } catch (error) {
    return { error: `Not valid JSON: ${error.message}` }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { error: "The arguments must be a JSON object ({ ... })" }
  }
  return { value }
}

function setTimeLeft(entry, request) {
  const left = request.expiresAt - serverNow()
  entry.timeLeft.textContent = formatLeft(left)
  entry.timeLeft.classList.toggle("soon", left < 30000)
}

/** Every second: the countdowns, and requests whose time is up leave the list. */
function tick() {
  const now = serverNow()
  for (const [requestId, request] of state.requests) {
    if (request.expiresAt <= now) remove(requestId)
    else setTimeLeft(state.cards.get(requestId), request)
  }
  if (!$("dismissed").hidden) renderDismissed()
}

// ---- answering --------------------------------------------------------------------------------

function describe(request) {
  const call = request.toolCall
  const what = `${plain(call.name)} in session ${plain(call.sessionKey)}`
  const resolution = request.resolution ?? {}
  const by = resolution.respondedBy ? ` by ${resolution.respondedBy}` : ""
  if (request.status === "approved") {
    const how = resolution.decision === "approve_session" ? "approved for the session" : "approved once"
    return `${what}: ${how}${resolution.editedArgs ? " with edited arguments" : ""}${by}`
  }
  if (request.status === "denied") {
    // an edit the policy denies ends denied although the human approved
    const who = resolution.decision === "deny" ? `denied${by}` : "denied by the policy"
    return `${what}: ${who}${resolution.reason ? `: ${plain(resolution.reason)}` : ""}`
  }
  return `${what}: ${request.status}`
}

async function answer(card, requestId, body) {
  const buttons = card.querySelectorAll("button, select, input, textarea")
  const error = card.querySelector(".card-error")
  for (const control of buttons) control.disabled = true
  error.hidden = true
  try {
    const { json: request } = await api("POST", `/approvals/${enc(requestId)}/respond`, body)
    remove(requestId)
    notice(describe(request), request.status === "approved" ? "ok" : "info")
  } catch (failure) {
    if (failure.status === 404 || failure.status === 409 || failure.status === 410) {
      // answered elsewhere, expired or gone: the server's message says which; the card goes
      remove(requestId)
      notice(plain(failure.message), "error")
    } else {
      for (const control of buttons) control.disabled = false
      syncApprove(card)
      error.hidden = false
      error.textContent = failure.message
    }
  }
}

function notice(text, kind) {
  const item = el(
    "div",
    { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" },
    el("span", {}, text),
    el("button", { type: "button", class: "link", "aria-label": "Close", onclick: () => item.remove() }, "×")
  )
  $("notices").prepend(item)
  for (const old of [...$("notices").children].slice(5)) old.remove()
}

// ---- dismissing and the counters --------------------------------------------------------------

function dismiss(requestId) {
  state.dismissed.add(requestId)
  state.cards.get(requestId).card.hidden = true
  update()
}

function reopen(requestId) {
  state.dismissed.delete(requestId)
  const entry = state.cards.get(requestId)
  if (entry !== undefined) {
    entry.card.hidden = false
    entry.card.scrollIntoView({ block: "nearest" })
  }
  update()
}

function renderDismissed() {
  const items = [...state.dismissed].map((requestId) => {
    const request = state.requests.get(requestId)
    const call = request.toolCall
    const args = JSON.stringify(call.args)
    return el(
      "li",
      { "data-request-id": requestId },
      el("span", { class: "tool" }, ...visible(call.name)),
      " ",
      el("code", {}, ...visible(args.length > 60 ? `${args.slice(0, 59)}…` : args)),
      " · session ",
      ...visible(call.sessionKey),
      ` · ${formatLeft(request.expiresAt - serverNow())} `,
      el("button", { type: "button", class: "link", onclick: () => reopen(requestId) }, "Reopen")
    )
  })
  $("dismissed-list").replaceChildren(...items)
}

function toggleDismissed() {
  const open = $("dismissed").hidden
  $("dismissed").hidden = !open
  $("dismissed-toggle").setAttribute("aria-expanded", String(open))
  if (open) renderDismissed()
}

/** The counters, the groups' counts and the title, after any change to the list. */
function update() {
  const total = state.requests.size
  $("pending-count").hidden = false
  $("pending-count").textContent = `${total} pending`
  document.title = total > 0 ? `(${total}) tool-gate console` : "tool-gate console"
  const dismissed = state.dismissed.size
  $("dismissed-toggle").hidden = dismissed === 0
  $("dismissed-toggle").textContent = `${dismissed} dismissed`
  if (dismissed === 0) {
    $("dismissed").hidden = true
    $("dismissed-toggle").setAttribute("aria-expanded", "false")
  } else if (!$("dismissed").hidden) {
    renderDismissed()
  }
  for (const [sessionKey, { count, section }] of state.groups) {
    const requests = [...state.requests.values()].filter((r) => r.toolCall.sessionKey === sessionKey)
    const shown = requests.filter((r) => !state.dismissed.has(r.requestId)).length
    count.textContent = `${requests.length} pending`
    section.hidden = shown === 0
  }
  $("empty").hidden = total > 0
}

// ---- start ------------------------------------------------------------------------------------

$("login").addEventListener("submit", (event) => {
  event.preventDefault()
  const token = $("token").value.trim()
  if (token === "") return
  $("token").value = ""
  sessionStorage.setItem(TOKEN_KEY, token)
  start(token)
})
$("sign-out").addEventListener("click", () => signOut())
$("dismissed-toggle").addEventListener("click", toggleDismissed)
setInterval(tick, 1000)

const saved = sessionStorage.getItem(TOKEN_KEY)
if (saved === null) showLogin()
else start(saved)
