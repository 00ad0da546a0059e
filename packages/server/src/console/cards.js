// A pending request's card: what is asked (hidden characters marked, with a warning naming the
// fields that hold them), the time left, and the answers the token may give.
import { argsView, parseArgs, syncApprove } from "./args.js"
import { el } from "./dom.js"
import { jsonText } from "./hiddenCharacters.js"
import { hasHidden, plain, visible } from "./hiddenText.js"
import { formatLeft, formatTime, serverNow, state } from "./state.js"

/** Where the call comes from, as [name, value] pairs: listed on the card, checked for hidden characters. */
const provenance = (request) => [
  ["agent", request.toolCall.agentId],
  ["intent", request.toolCall.intentId],
  ["user", request.toolCall.userId],
  ["directory", request.toolCall.workingDirectory],
  ["rule", request.rule.id]
]

/** The names of the fields of `request` that hold hidden characters. */
function hiddenFields(request, argsText) {
  const fields = [
    ["tool name", request.toolCall.name],
    ["session key", request.toolCall.sessionKey],
    ["request id", request.requestId],
    ...provenance(request),
    ["reason", request.reason]
  ]
  const names = fields.filter(([, value]) => typeof value === "string" && hasHidden(value)).map(([name]) => name)
  return hasHidden(argsText, true) ? [...names, "arguments"] : names
}

/**
 * The card of `request`, and its countdown. `actions.answer(card, requestId, body)` sends an
 * answer, `actions.extend(card, requestId, ttlMs)` more time, `actions.dismiss(requestId)` hides
 * the card under "Later".
 */
export function makeCard(request, actions) {
  const call = request.toolCall
  const timeLeft = el("span", { class: "time-left", title: `expires at ${formatTime(request.expiresAt)}` })
  const meta = el("dl", { class: "meta" })
  for (const [name, value] of [...provenance(request), ["asked", formatTime(request.createdAt)]]) {
    if (value !== undefined && value !== "") {
      meta.append(el("div", {}, el("dt", {}, name), el("dd", {}, ...visible(value))))
    }
  }
  const argsText = JSON.stringify(call.args, null, 2)
  const flagged = hiddenFields(request, argsText)
  const card = el("article", {
    class: flagged.length > 0 ? "request suspicious" : "request",
    "data-request-id": request.requestId,
    "aria-label": `${plain(call.name)} in session ${plain(call.sessionKey)}`
  })
  // parts a request may not have are left out (`append` would show `undefined` as text)
  const parts = [
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
  ]
  card.append(...parts.filter((part) => part !== undefined))
  fillActions(card, request, actions)
  const entry = { card, timeLeft }
  setTimeLeft(entry, request)
  return entry
}

// What "Extend…" offers: the deadline moves to this long from now, never earlier.
const extensions = [["15 minutes", 900_000], ["1 hour", 3_600_000], ["4 hours", 14_400_000], ["1 day", 86_400_000]]

/** The card's buttons: answers (and more time) for an approver, only "Later" otherwise. */
function fillActions(card, request, { answer, dismiss, extend }) {
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
  const denyForm = cardForm(
    "deny-form",
    () => {
      const text = reason.value.trim()
      answer(card, id, text === "" ? { decision: "deny" } : { decision: "deny", reason: text })
    },
    reason,
    el("button", { type: "submit", class: "danger" }, "Deny")
  )

  const argsText = el("textarea", { rows: 6, spellcheck: "false", "aria-label": "Arguments (JSON)" })
  // hidden characters as JSON escapes: the same value, and nothing in the box the eye cannot see
  argsText.value = jsonText(request.toolCall.args)
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
  const editForm = cardForm(
    "edit-form",
    () => {
      const { value, error } = parseArgs(argsText.value)
      if (error === undefined) answer(card, id, { decision: "approve_once", editedArgs: value })
    },
    argsText,
    argsError,
    argsHidden,
    approveEdited
  )

  const ttl = el(
    "select",
    { "aria-label": "Expires in" },
    ...extensions.map(([label, ms]) => el("option", { value: ms }, label))
  )
  const extendForm = cardForm(
    "extend-form",
    () => {
      extendForm.hidden = true
      extend(card, id, Number(ttl.value))
    },
    el("span", {}, "Expires in"),
    ttl,
    el("button", { type: "submit" }, "Extend"),
    el("span", { class: "hint" }, "from now; a later deadline is kept")
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
      el("button", { type: "button", onclick: () => openForm(extendForm, ttl) }, "Extend…"),
      later
    ),
    denyForm,
    editForm,
    extendForm
  )
  syncApprove(card)
}

/** A form the card opens in place of its buttons' row: `submit` on submit, and a Cancel that closes it. */
function cardForm(className, submit, ...controls) {
  const form = el(
    "form",
    {
      class: className,
      hidden: true,
      onsubmit: (event) => {
        event.preventDefault()
        submit()
      }
    },
    ...controls,
    el("button", { type: "button", class: "link", onclick: () => (form.hidden = true) }, "Cancel")
  )
  return form
}

function openForm(form, focus) {
  form.hidden = false
  focus.focus()
}

export function setTimeLeft(entry, request) {
  const left = request.expiresAt - serverNow()
  entry.timeLeft.textContent = formatLeft(left)
  entry.timeLeft.classList.toggle("soon", left < 30000)
}
