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
    { class: "session", "data-session": sessionKey, "aria-label": `Session ${sessionKey}` },
    el("h2", {}, el("span", { class: "label" }, "session "), el("span", { class: "session-key" }, sessionKey), count),
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

function makeCard(request) {
  const call = request.toolCall
  const timeLeft = el("span", { class: "time-left", title: `expires at ${formatTime(request.expiresAt)}` })
  const meta = el("dl", { class: "meta" })
  const field = (name, value) => {
    if (value !== undefined && value !== "") meta.append(el("div", {}, el("dt", {}, name), el("dd", {}, value)))
  }
  field("agent", call.agentId)
  field("intent", call.intentId)
  field("user", call.userId)
  field("directory", call.workingDirectory)
  field("rule", request.rule.id)
  field("asked", formatTime(request.createdAt))
  const card = el(
    "article",
    {
      class: "request",
      "data-request-id": request.requestId,
      "aria-label": `${call.name} in session ${call.sessionKey}`
    },
    el(
      "header",
      {},
      el("span", { class: "tool" }, call.name),
      el("span", { class: "request-id" }, request.requestId),
      timeLeft
    ),
    meta,
    request.reason ? el("p", { class: "reason" }, request.reason) : undefined,
    el("pre", { class: "args" }, JSON.stringify(call.args, null, 2)),
    el("div", { class: "actions" }),
    el("p", { class: "error card-error", role: "alert", hidden: true })
  )
  fillActions(card, request)
  const entry = { card, timeLeft }
  setTimeLeft(entry, request)
  return entry
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
  argsText.value = JSON.stringify(request.toolCall.args, null, 2)
  const argsError = el("p", { class: "error", hidden: true })
  const approveEdited = el("button", { type: "submit", class: "primary" }, "Approve with these arguments")
  argsText.addEventListener("input", () => {
    const { error } = parseArgs(argsText.value)
    argsError.hidden = error === undefined
    argsError.textContent = error ?? ""
    approveEdited.disabled = error !== undefined
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
    approveEdited,
    el("button", { type: "button", class: "link", onclick: () => (editForm.hidden = true) }, "Cancel")
  )

  actions.replaceChildren(
    el(
      "div",
      { class: "buttons" },
      el(
        "button",
        { type: "button", class: "primary", onclick: () => answer(card, id, { decision: "approve_once" }) },
        "Approve once"
      ),
      el(
        "span",
        { class: "joined" },
        el("button", {
          type: "button",
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
  const what = `${call.name} in session ${call.sessionKey}`
  const resolution = request.resolution ?? {}
  const by = resolution.respondedBy ? ` by ${resolution.respondedBy}` : ""
  if (request.status === "approved") {
    const how = resolution.decision === "approve_session" ? "approved for the session" : "approved once"
    return `${what}: ${how}${resolution.editedArgs ? " with edited arguments" : ""}${by}`
  }
  if (request.status === "denied") {
    // an edit the policy denies ends denied although the human approved
    const who = resolution.decision === "deny" ? `denied${by}` : "denied by the policy"
    return `${what}: ${who}${resolution.reason ? `: ${resolution.reason}` : ""}`
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
      notice(failure.message, "error")
    } else {
      for (const control of buttons) control.disabled = false
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
      el("span", { class: "tool" }, call.name),
      " ",
      el("code", {}, args.length > 60 ? `${args.slice(0, 59)}…` : args),
      ` · session ${call.sessionKey} · ${formatLeft(request.expiresAt - serverNow())} `,
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
