// The pending list: cards grouped by session (sessions in key order, oldest request first), the
// requests dismissed with "Later", the counters, and the countdowns.
import { answer, extend } from "./answers.js"
import { makeCard, setTimeLeft } from "./cards.js"
import { $, el } from "./dom.js"
import { plain, visible } from "./hiddenText.js"
import { formatLeft, formatTime, serverNow, state } from "./state.js"

const actions = {
  answer: (card, requestId, body) => answer(card, requestId, body, remove),
  extend: (card, requestId, ttlMs) => extend(card, state.requests.get(requestId), ttlMs, { remove, upsert: shown }),
  dismiss
}

/** `request` as the server has it now, its countdown at once. */
function shown(request) {
  upsert(request)
  const entry = state.cards.get(request.requestId)
  if (entry !== undefined) setTimeLeft(entry, request)
}

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

export function upsert(request) {
  const requestId = request.requestId
  const known = state.cards.get(requestId)
  state.requests.set(requestId, request)
  if (known !== undefined) {
    known.timeLeft.title = `expires at ${formatTime(request.expiresAt)}`
    return
  }
  const { list } = group(request.toolCall.sessionKey)
  const entry = makeCard(request, actions)
  state.cards.set(requestId, entry)
  // oldest first within a session
  const later = [...list.children].find((card) =>
    state.requests.get(card.dataset.requestId).createdAt > request.createdAt
  )
  list.insertBefore(entry.card, later ?? null)
  entry.card.hidden = state.dismissed.has(requestId)
}

export function remove(requestId) {
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
/** Every second: the countdowns, and requests whose time is up leave the list. */
export function tick() {
  const now = serverNow()
  for (const [requestId, request] of state.requests) {
    if (request.expiresAt <= now) remove(requestId)
    else setTimeLeft(state.cards.get(requestId), request)
  }
  if (!$("dismissed").hidden) renderDismissed()
}

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

export function toggleDismissed() {
  const open = $("dismissed").hidden
  $("dismissed").hidden = !open
  $("dismissed-toggle").setAttribute("aria-expanded", String(open))
  if (open) renderDismissed()
}

/** The counters, the groups' counts and the title, after any change to the list. */
export function update() {
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
