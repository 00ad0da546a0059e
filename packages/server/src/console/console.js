// The tool-gate web console: plain JavaScript modules, no build step, no dependencies. This one
// signs in and out and starts the rest: state.js (what the page knows), api.js, stream.js (the
// live audit stream), list.js (the pending list), cards.js and args.js (a request's card),
// answers.js, hiddenText.js over hiddenCharacters.js (the list of hidden characters the CLI
// shares), dom.js.
//
// The server's store is the source of truth. The page loads the pending list once, then follows
// the audit stream and asks the API again about each request an event names.
import { api } from "./api.js"
import { $ } from "./dom.js"
import { tick, toggleDismissed, update, upsert } from "./list.js"
import { offsetFrom, state } from "./state.js"
import { follow } from "./stream.js"

const TOKEN_KEY = "toolgate.token"

/** Who the token is (`GET /me`): the role decides whether the cards offer answers. */
function showIdentity(me) {
  state.canAnswer = me.role === "approver"
  $("identity").textContent = state.canAnswer ? "approver" : "auditor (read-only)"
  $("identity").title = me.sessions === undefined ? me.name : `${me.name}: sessions ${me.sessions.join(", ")}`
  $("identity").hidden = false
  $("read-only").hidden = state.canAnswer
}

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
    follow(run.signal, signOut)
  } catch (error) {
    if (run.signal.aborted) return
    if (error.status === 401) signOut(error.message)
    else showLogin(error.message)
  }
}

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
