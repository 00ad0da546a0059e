/**
 * Pending lists kept between reads, each request as its JSON: a list is read from the store again
 * only when an event of its session (or of none) has reached the server since it was read, so a
 * read of a session nobody changed costs a `lastSeq` and a join of strings, not a query, a decode
 * per request and an encode per request.
 *
 * What the server knows of the log comes through the audit fan-out, which follows every process's
 * commits; a kept list is used only when the fan-out has seen every event up to the store's head
 * as read at the start of this read, and none of them touched the list's session. A change made
 * before the read, by this process or any other, has an event at or below that head, so it is
 * never missed; the list is as fresh as a query. Every request changes with an event of its
 * session (created, answered, expired, extended, warned), and the store's head is the last of a
 * gap-free sequence in commit order (what the gate's log tailers rely on too), so once the fan-out
 * has seen the head it has seen every event before it.
 */
import type { ApprovalRequest, ApprovalStore, ToolCall, ToolGate, ToolGateError } from "@tool-gate/core"
import { Effect } from "effect"
import type * as AuditFanout from "./auditFanout.js"

/** A pending request: its session (for the caller's filter) and its JSON. */
export interface Item {
  readonly sessionKey: string
  readonly json: string
}

interface Kept {
  /** the fan-out's epoch when it was read */
  readonly epoch: number
  /** the store's head before it was read: the list holds every change up to there */
  readonly readAfter: number
  readonly items: ReadonlyArray<Item>
}

/** Requests kept at most, over all lists; past that, every list is dropped. */
const maxKeptRequests = 10_000

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
  const kept = new Map<string | undefined, Kept>()
  let keptRequests = 0

  const keep = (sessionKey: string | undefined, list: Kept) => {
    const previous = kept.get(sessionKey)
    keptRequests += list.items.length - (previous?.items.length ?? 0)
    kept.set(sessionKey, list)
    if (keptRequests > maxKeptRequests) {
      kept.clear()
      keptRequests = 0
    }
  }

  const pending: PendingLists["pending"] = (sessionKey) =>
    Effect.flatMap(store.lastSeq, (head) => {
      const position = fanout.position()
      const list = kept.get(sessionKey)
      if (
        list !== undefined && position !== undefined && list.epoch === position.epoch &&
        position.through >= head && fanout.lastTouched(sessionKey) <= list.readAfter
      ) {
        return Effect.succeed(list.items)
      }
      return Effect.map(gate.pending({ sessionKey }), (requests) => {
        const items = requests.map((request) => ({ sessionKey: request.toolCall.sessionKey, json: encode(request) }))
        // kept only when the fan-out sees every event after `head`
        if (position !== undefined && position.startedAfter <= head) {
          keep(sessionKey, { epoch: position.epoch, readAfter: head, items })
        }
        return items
      })
    })

  return { pending }
}
