// Answering a request or extending it, and the notices that say what came of it. A tab that
// answers a request another tab already answered gets the server's refusal and shows it.
import { api, enc } from "./api.js"
import { syncApprove } from "./args.js"
import { $, el } from "./dom.js"
import { plain } from "./hiddenText.js"
import { formatTime } from "./state.js"

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

/**
 * Sends `method path body` from a card, its controls disabled meanwhile; `done(request)` with the
 * server's answer. `remove(requestId)` once the request is no longer pending.
 */
async function send(card, requestId, path, body, remove, done) {
  const buttons = card.querySelectorAll("button, select, input, textarea")
  const error = card.querySelector(".card-error")
  for (const control of buttons) control.disabled = true
  error.hidden = true
  try {
    const { json: request } = await api("POST", path, body)
    done(request)
  } catch (failure) {
    if (failure.status === 404 || failure.status === 409 || failure.status === 410) {
      // answered elsewhere, expired or gone: the server's message says which; the card goes
      remove(requestId)
      notice(plain(failure.message), "error")
      return
    }
    error.hidden = false
    error.textContent = failure.message
  }
  for (const control of buttons) control.disabled = false
  syncApprove(card)
}

/** Sends `body` as the answer to `requestId` from its card; `remove(requestId)` once the request is no longer pending. */
export function answer(card, requestId, body, remove) {
  return send(card, requestId, `/approvals/${enc(requestId)}/respond`, body, remove, (request) => {
    remove(requestId)
    notice(describe(request), request.status === "approved" ? "ok" : "info")
  })
}

/**
 * Moves the deadline of `before` (the request as the card shows it) to `ttlMs` from now, if that
 * is later: the server never brings a deadline forward here, and says so by keeping it.
 * `upsert(request)` shows the request as it is then.
 */
export function extend(card, before, ttlMs, { remove, upsert }) {
  const requestId = before.requestId
  return send(card, requestId, `/approvals/${enc(requestId)}/extend`, { ttlMs }, remove, (request) => {
    upsert(request)
    const what = `${plain(request.toolCall.name)} in session ${plain(request.toolCall.sessionKey)}`
    notice(
      request.expiresAt === before.expiresAt
        ? `${what}: kept; it already expires at ${formatTime(request.expiresAt)}, later than asked`
        : `${what}: extended; it expires at ${formatTime(request.expiresAt)}`,
      "info"
    )
  })
}

function notice(text, kind) {
  const item = el(
    "div",
    { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" },
    el("span", {}, text),
    el("button", { type: "button", class: "link", "aria-label": "Close", onclick: () => item.remove() }, "×")
  )
  // the newest first; a few at most, so the docked notices never cover much of the list
  $("notices").prepend(item)
  for (const old of [...$("notices").children].slice(3)) old.remove()
}
