/**
 * Pending lists kept between reads, each request as its JSON, and kept up to date from the live
 * log (the audit fan-out, which follows every process's commits): an answer or an expiry removes
 * its request from the kept lists; an event that may change a session's pending requests any
 * other way (a new request, an extension, a warning, or an event this module does not know) drops
 * the session's list, read again at its next read. So a read of a list nobody changed that way
 * costs a `lastSeq` and a join of strings, not a query, a decode and an encode per request.
 *
 * A kept list is used only when the fan-out has seen every event up to the store's head as read at
 * the start of this read: a change made before the read, by this process or any other, has an
 * event at or below that head, so it is never missed and the list is as fresh as a query. That
 * holds because every change of a request comes with an event of its session, and the store's
 * head is the last of a gap-free sequence in commit order (what the gate's log tailers rely on
 * too). A list read after the head `h` is kept only if no event of its session after `h` has
 * arrived yet (the list may or may not hold such an event's change); the later ones are applied.
 */
import type { ApprovalRequest, ApprovalStore, AuditEvent, ToolCall, ToolGate, ToolGateError } from "@tool-gate/core"
import { Effect } from "effect"
import type * as AuditFanout from "./auditFanout.js"

/** A pending request: its session (for the caller's filter) and its JSON. */
export interface Item {
  readonly requestId: string
  readonly sessionKey: string
  readonly json: string
}

interface Kept {
  /** the fan-out's epoch when it was read */
  readonly epoch: number
  /** the store's head before it was read: the list holds every change up to there */
  readonly readAfter: number
  items: ReadonlyArray<Item>
}

/** Requests kept at most, over all lists; past that, every list is dropped. */
const maxKeptRequests = 10_000

/** Sessions whose last events are remembered; past that, all are taken to have one just now. */
const maxSessions = 10_000

/** Events that change no pending request. */
const unchanging: ReadonlySet<AuditEvent.EventType> = new Set([
  "decision",
  "session.granted",
  "session.revoked",
  "approvals.cleared",
  "policy.shadow",
  "call.refused",
  "policy.loaded"
])

/** Events that end their request's pending (it leaves every pending list). */
const ending: ReadonlySet<AuditEvent.EventType> = new Set(["approval.resolved", "approval.expired"])

/** The last seq per session, and for events of no session (which may concern any). */
const lastBySession = () => {
  const bySession = new Map<string, number>()
  let noSession = 0
  return {
    set: (sessionKey: string | undefined, seq: number) => {
      if (sessionKey === undefined) {
        noSession = seq
      } else if (bySession.size >= maxSessions && !bySession.has(sessionKey)) {
        bySession.clear()
        noSession = seq
      } else {
        bySession.set(sessionKey, seq)
      }
    },
    get: (sessionKey: string) => Math.max(bySession.get(sessionKey) ?? 0, noSession),
    clear: () => {
      bySession.clear()
      noSession = 0
    }
  }
}

export interface PendingLists {
  /** The pending requests of a session, or of every session: as `gate.pending`, encoded. */
  readonly pending: (
    sessionKey: ToolCall.SessionKey | undefined
  ) => Effect.Effect<ReadonlyArray<Item>, ToolGateError.PersistenceError>
}

export const make = (options: {
  readonly gate: ToolGate.ToolGate["Type"]
  readonly store: ApprovalStore.ApprovalStore["Type"]
  readonly fanout: AuditFanout.Fanout
  readonly encode: (request: ApprovalRequest.ApprovalRequest) => string
}): PendingLists => {
  const { encode, fanout, gate, store } = options
  /** per session (`undefined`: every session) */
  const kept = new Map<string | undefined, Kept>()
  let keptRequests = 0
  /** the fan-out's epoch the two below are of */
  let epoch = 0
  /** per session, its last event that arrived */
  const arrived = lastBySession()
  /** per session, its last event that arrived and may change its pending requests but by ending one */
  const changed = lastBySession()
  /** the same, of any session */
  let changedAny = 0

  const drop = (sessionKey: string | undefined) => {
    keptRequests -= kept.get(sessionKey)?.items.length ?? 0
    kept.delete(sessionKey)
  }

  const keep = (sessionKey: string | undefined, list: Kept) => {
    drop(sessionKey)
    keptRequests += list.items.length
    kept.set(sessionKey, list)
    if (keptRequests > maxKeptRequests) {
      kept.clear()
      keptRequests = 0
    }
  }

  const end = (list: Kept | undefined, requestId: string) => {
    if (list === undefined) return
    const items = list.items.filter((item) => item.requestId !== requestId)
    keptRequests -= list.items.length - items.length
    list.items = items
  }

  /** The fan-out's position, what is known of the log following it from its last (re)start. */
  const current = () => {
    const position = fanout.position()
    if (position !== undefined && position.epoch !== epoch) {
      // a new start: what was kept was read under the last one
      epoch = position.epoch
      arrived.clear()
      changed.clear()
      changedAny = 0
      kept.clear()
      keptRequests = 0
    }
    return position
  }

  fanout.watch((event) => {
    current()
    arrived.set(event.sessionKey, event.seq)
    if (unchanging.has(event.type)) return
    if (ending.has(event.type) && event.requestId !== undefined && event.sessionKey !== undefined) {
      end(kept.get(event.sessionKey), event.requestId)
      end(kept.get(undefined), event.requestId)
      return
    }
    changed.set(event.sessionKey, event.seq)
    changedAny = event.seq
  })

  const pending: PendingLists["pending"] = (sessionKey) =>
    Effect.flatMap(store.lastSeq, (head) => {
      const position = current()
      const list = kept.get(sessionKey)
      if (
        list !== undefined && position !== undefined && list.epoch === position.epoch && position.through >= head &&
        (sessionKey === undefined ? changedAny : changed.get(sessionKey)) <= list.readAfter
      ) {
        return Effect.succeed(list.items)
      }
      return Effect.map(gate.pending({ sessionKey }), (requests) => {
        const items = requests.map((request) => ({
          requestId: request.requestId,
          sessionKey: request.toolCall.sessionKey,
          json: encode(request)
        }))
        // kept when the fan-out sees every event after `head` of the list's sessions from now on
        const now = current()
        if (
          now !== undefined && now.startedAfter <= head &&
          (sessionKey === undefined ? now.through : arrived.get(sessionKey)) <= head
        ) {
          keep(sessionKey, { epoch: now.epoch, readAfter: head, items })
        }
        return items
      })
    })

  return { pending }
}
