// A card's arguments: shown as JSON text, marked, cut after a preview that says how much follows;
// approving waits until the whole arguments were shown, and edited arguments until they parse.
import { el } from "./dom.js"
import { visible } from "./hiddenText.js"

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
export function argsView(card, text) {
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

/** Approving waits until the whole arguments were shown, and edited arguments until they parse. */
export function syncApprove(card) {
  for (const button of card.querySelectorAll("button.approve")) {
    button.disabled = card.argsUnread === true || button.dataset.invalid === "true"
    if (card.argsUnread === true) button.title = "Show all the arguments first"
    else button.removeAttribute("title")
  }
}

/** Edited arguments: a JSON object, or the reason they are not one. */
export function parseArgs(text) {
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
