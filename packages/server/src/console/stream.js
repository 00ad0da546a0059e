// The live stream: the page follows the audit stream (resuming with Last-Event-ID after a drop, so
// nothing is missed) and asks the API again about each request an event names. Every tab does the
// same, so tabs agree.
import { api, enc } from "./api.js"
import { $ } from "./dom.js"
import { remove, update, upsert } from "./list.js"
import { state } from "./state.js"

const RETRY_MS = 1000

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
 * reconnects after a drop with Last-Event-ID: the server replays exactly what came after it. A
 * refused token ends it with `onRefused(message)`.
 */
export async function follow(signal, onRefused) {
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
        return onRefused(body?.message ?? "The token was refused")
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
