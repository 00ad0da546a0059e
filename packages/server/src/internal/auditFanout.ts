/**
 * The audit stream's fan-out: one reader of the gate's live log for every SSE client of a server.
 * Each batch of live events is filtered and rendered once per distinct view and pushed to each
 * client's response as bytes, so a client costs a filter and a write per batch, not a stream of
 * its own per event.
 *
 * A client replays the log from the store first (pages of 500), or from the last live events the
 * fan-out keeps once they reach back far enough, while the fan-out holds what it reads for the
 * client; then it takes what was held after its last replayed event, and goes live in the step
 * that finds nothing more held. The replay goes at the client's pace (a page, then the next once
 * it has taken that one), so a client that reads slowly, or not at all, never makes the server
 * read the whole log into memory for it; one that falls too far behind the live log is failed,
 * and resumes with Last-Event-ID. The fan-out reads the log from the head it found when it started
 * (`auditLog`: nothing after it is missed), and a client starts its replay only once that head is
 * known, so its replay reaches at least that far: between them, nothing is missed, nothing twice.
 * When the fan-out's read fails (or its live log ends), every client's stream ends with the error
 * (an EventSource comes back with `Last-Event-ID`) and the fan-out starts again a second later.
 */
import type { ApprovalStore, AuditEvent, ToolGate, ToolGateError } from "@tool-gate/core"
import type { Chunk } from "effect"
import { Cause, Deferred, Effect, Scope, Stream } from "effect"

/** What a client is sent: the events of a view, as bytes (rendered once per distinct run of events). */
export type Render = (events: ReadonlyArray<AuditEvent.AuditEvent>) => Uint8Array

interface Client {
  /** the events this client may receive (its filters and its token's sessions) */
  readonly keep: (event: AuditEvent.AuditEvent) => boolean
  /** the seq of the last event it was sent (or skipped) */
  last: number
  /** live events held while it replays; `undefined` once live */
  held: Array<AuditEvent.AuditEvent> | undefined
  readonly push: (bytes: Uint8Array) => boolean
  readonly drained: Effect.Effect<void>
  readonly fail: (cause: Cause.Cause<ToolGateError.PersistenceError>) => void
}

/**
 * How far the live log has reached the fan-out, for caches of what the log's events change (the
 * pending lists): events arrive in seq order, none skipped, from the head the fan-out started at.
 */
export interface Position {
  /** one per (re)start of the fan-out: what was seen under another is no longer known */
  readonly epoch: number
  /** the head the fan-out started reading after */
  readonly startedAfter: number
  /** the seq of the last event that arrived (the head it started at before any did) */
  readonly through: number
}

export interface Fanout {
  /** where the live log stands, or `undefined` while the fan-out is (re)starting */
  readonly position: () => Position | undefined
  /** Calls `watcher` with each live event as it arrives, in seq order, before any client gets it. */
  readonly watch: (watcher: (event: AuditEvent.AuditEvent) => void) => void

  /**
   * Follows the log for one client: replays from `afterSeq`, then live; `push` gets the bytes of
   * each batch, `fail` the cause that ends the stream. Stops when the scope closes.
   *
   * The replay goes at the client's pace: after a push that says the client holds as much as it
   * should (`false`), the next page waits for `drained`. Live batches never wait for one client;
   * one still replaying while more live events than `maxHeld` arrive is failed (it resumes with
   * `Last-Event-ID`), so a client that stops reading holds the server's memory to a bound.
   */
  readonly follow: (options: {
    readonly query: AuditEvent.AuditQuery
    readonly keep: (event: AuditEvent.AuditEvent) => boolean
    readonly push: (bytes: Uint8Array) => boolean
    readonly drained: Effect.Effect<void>
    readonly fail: (cause: Cause.Cause<ToolGateError.PersistenceError>) => void
  }) => Effect.Effect<void, never, Scope.Scope>
}

const pageSize = 500

/** The index of the first event after `seq` in `events` (in seq order). */
const firstAfter = (events: ReadonlyArray<AuditEvent.AuditEvent>, seq: number): number => {
  let low = 0
  let high = events.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (events[middle]!.seq <= seq) low = middle + 1
    else high = middle
  }
  return low
}

/** The events of `events` a client is to receive now, moving its `last` past all of them. */
const take = (client: Client, events: ReadonlyArray<AuditEvent.AuditEvent>): Array<AuditEvent.AuditEvent> => {
  const taken: Array<AuditEvent.AuditEvent> = []
  for (const event of events) {
    if (event.seq <= client.last) continue
    client.last = event.seq
    if (client.keep(event)) taken.push(event)
  }
  return taken
}

export const make = (
  gate: ToolGate.ToolGate["Type"],
  store: ApprovalStore.ApprovalStore["Type"],
  render: Render,
  options?: {
    /** live events kept for the replays of clients that resume after one of them (default 5,000) */
    readonly recent?: number | undefined
    /** live events held for a client while it replays, at most (default four times `recent`) */
    readonly maxHeld?: number | undefined
  }
): Effect.Effect<Fanout, never, Scope.Scope> =>
  Effect.gen(function*() {
    const maxRecent = options?.recent ?? 5_000
    const maxHeld = options?.maxHeld ?? 4 * maxRecent
    const clients = new Set<Client>()
    /** the head the running fan-out reads from, once known; replaced when it starts again */
    let started = yield* Deferred.make<number>()

    const deliver = (events: ReadonlyArray<AuditEvent.AuditEvent>) => {
      for (const client of clients) {
        if (client.held !== undefined) {
          if (client.held.length + events.length > maxHeld) {
            // replaying too slowly to catch up: it resumes from its last event on a new stream
            clients.delete(client)
            client.held = []
            client.fail(Cause.empty)
            continue
          }
          client.held.push(...events)
          continue
        }
        const taken = take(client, events)
        if (taken.length > 0) client.push(render(taken))
      }
    }

    // The live log comes an event at a time; what arrives before the fan-out yields goes out
    // together, so a burst costs each client one push (and one write), not one per event.
    let arrived: Array<AuditEvent.AuditEvent> = []
    const flush = Effect.sync(() => {
      const events = arrived
      arrived = []
      deliver(events)
    })
    let position: { epoch: number; startedAfter: number; through: number } | undefined
    /**
     * The last live events, in seq order, every one that arrived since the first of them: a client
     * resuming after one of them replays from here (the same objects as the live clients got, so
     * rendered already) instead of reading and decoding the log again.
     */
    let recent: Array<AuditEvent.AuditEvent> = []
    let epoch = 0
    const watchers: Array<(event: AuditEvent.AuditEvent) => void> = []

    const collect = (chunk: Chunk.Chunk<AuditEvent.AuditEvent>) =>
      Effect.suspend(() => {
        const idle = arrived.length === 0
        for (const event of chunk) {
          position!.through = event.seq
          for (const watcher of watchers) watcher(event)
          recent.push(event)
          arrived.push(event)
        }
        if (recent.length > 2 * maxRecent) recent = recent.slice(-maxRecent)
        return idle && arrived.length > 0 ? Effect.forkDaemon(Effect.zipRight(Effect.yieldNow(), flush)) : Effect.void
      })

    const run = Effect.flatMap(store.lastSeq, (head) =>
      Effect.zipRight(
        Effect.zipRight(
          Effect.sync(() => {
            recent = []
            position = { epoch: ++epoch, startedAfter: head, through: head }
          }),
          Deferred.succeed(started, head)
        ),
        Stream.runForEachChunk(gate.auditLog({ afterSeq: head }), collect)
      ))

    /** Every client's stream ends with the failure (it resumes with Last-Event-ID); a new start, a new head. */
    const restart = (cause: Cause.Cause<ToolGateError.PersistenceError>) =>
      Effect.gen(function*() {
        position = undefined
        recent = []
        for (const client of clients) client.fail(cause)
        clients.clear()
        started = yield* Deferred.make<number>()
        yield* Effect.logWarning("audit stream: reading the live log failed; its clients were disconnected", cause)
        yield* Effect.sleep("1 second")
      })

    yield* run.pipe(
      Effect.zipRight(Effect.dieMessage("the live audit log ended")),
      Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : restart(cause)),
      Effect.forever,
      Effect.forkScoped
    )

    /**
     * Sends `events` from `from` on to a replaying client a page at a time, each after the client
     * has taken the last (when it said it held as much as it should); nothing once it is failed.
     */
    const send = (client: Client, events: ReadonlyArray<AuditEvent.AuditEvent>, from = 0): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (!clients.has(client)) return Effect.void
        const to = Math.min(events.length, from + pageSize)
        const taken = take(client, events.slice(from, to))
        const wait = taken.length > 0 && !client.push(render(taken)) ? client.drained : Effect.void
        return to < events.length ? Effect.zipRight(wait, send(client, events, to)) : wait
      })

    /**
     * The rest of a client's replay from the recent events, when nothing it still needs is older
     * than they are (then every event after its last one that arrived is among them, and the
     * others are to come live or are held for it): says whether they sufficed.
     */
    const replayRecent = (client: Client): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        if (position === undefined) return Effect.succeed(false)
        if (client.last < position.through && (recent.length === 0 || recent[0]!.seq > client.last + 1)) {
          return Effect.succeed(false)
        }
        // the events it needs, as they are now (kept here while it takes them, whatever `recent` drops)
        return Effect.as(send(client, recent.slice(firstAfter(recent, client.last))), true)
      })

    const follow: Fanout["follow"] = ({ drained, fail, keep, push, query }) =>
      Effect.gen(function*() {
        const client: Client = { keep, last: query.afterSeq ?? 0, held: [], push, drained, fail }
        // A plain finalizer: one of `acquireRelease` restores this fiber's context to run, and the
        // scope is closed from a fiber of its own when the client goes, so that meant patching in
        // every service of the server (about 0.2 ms of a reconnect's 1.1 ms of main thread).
        const scope = yield* Effect.scope
        yield* Effect.uninterruptible(Effect.zipRight(
          Effect.sync(() => clients.add(client)),
          Scope.addFinalizer(scope, Effect.sync(() => clients.delete(client)))
        ))
        yield* Deferred.await(started)
        while (!(yield* replayRecent(client)) && clients.has(client)) {
          const page = yield* store.events({ ...query, afterSeq: client.last, limit: pageSize })
          yield* send(client, page)
          if (page.length < pageSize) break
        }
        // What was held meanwhile, as the replay goes; live from the step that finds none left.
        while (clients.has(client)) {
          const held = client.held!
          if (held.length === 0) {
            client.held = undefined
            return
          }
          client.held = []
          yield* send(client, held)
        }
      }).pipe(
        Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : Effect.sync(() => fail(cause))),
        Effect.forkScoped,
        Effect.asVoid
      )

    return { follow, position: () => position, watch: (watcher) => void watchers.push(watcher) }
  })
