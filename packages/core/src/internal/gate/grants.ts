/**
 * Session grants: the in-memory projection of session approvals and the gate's session-approval
 * API over it. A session's approvals are read from the store on the first call of that session
 * that needs them (one indexed read) and held from then on, for at most `heldSessions` sessions
 * (the least recently used is dropped and simply read again); the gate's own writes and the log
 * tailer's catch-up change only the sessions held. Start-up reads no approval.
 */
import { Clock, Deferred, type Duration, Effect, Either, Option } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import * as Limits from "../../Limits.js"
import type * as SessionApproval from "../../SessionApproval.js"
import * as ToolCall from "../../ToolCall.js"
import { type InvalidToolCall, type PersistenceError, SessionApprovalNotFound } from "../../ToolGateError.js"
import * as Newest from "../newest.js"
import * as SessionIndex from "../sessionIndex.js"
import type { RevokeOptions } from "./contract.js"
import * as Ids from "./ids.js"

/** Sessions whose approvals a gate holds unless its options say otherwise. */
export const defaultHeldSessions = 10_000

/** Changes of its own a projection remembers between two catch-ups of the tailer. */
const maxOwn = 10_000

/** The projection: read by every decision that needs a session approval, updated by every change. */
export interface Projection {
  /** the log's last sequence number when the gate opened: the tailer reads after it */
  readonly loadedAt: number
  /** The session's approvals when they are held (as used now: the last to be dropped). */
  readonly held: (sessionKey: string) => SessionIndex.SessionGrants | undefined
  /** The session's approvals: held, or read from the store (once, however many fibers ask). */
  readonly grantsOf: (sessionKey: string) => Effect.Effect<SessionIndex.SessionGrants, PersistenceError>
  /** Applies versions this gate wrote or read, to the sessions it holds. */
  readonly project: (rows: ReadonlyArray<SessionApproval.SessionApproval>) => Effect.Effect<void>
  /**
   * Whether the change logged at `seq` is one this gate wrote and projected already, every version
   * it made (so the tailer need not read the approvals again for it).
   */
  readonly projected: (seq: number) => boolean
  /** the log position up to which every change is reflected in the sessions held */
  readonly caughtUpTo: () => number
  /**
   * The tailer's catch-up: `rows` are every approval changed after `caughtUpTo()`, read once the
   * log had been read up to `seq` (none when no change was logged in between).
   */
  readonly caughtUp: (rows: ReadonlyArray<SessionApproval.SessionApproval>, seq: number) => Effect.Effect<void>
}

/**
 * A session held, or being read: the versions that arrive meanwhile wait in `buffer` and are
 * applied over what the read returns. `floor`: the log position the read reflects at least.
 */
type Entry =
  | { readonly _tag: "Held"; readonly grants: SessionIndex.SessionGrants }
  | {
    readonly _tag: "Reading"
    readonly floor: number
    readonly buffer: Array<SessionApproval.SessionApproval>
    readonly read: Deferred.Deferred<SessionIndex.SessionGrants, PersistenceError>
  }

/** The projection, empty, positioned at the log's current end; reads run in the gate's scope. */
export const makeProjection = (
  store: ApprovalStore["Type"],
  heldSessions: number = defaultHeldSessions
): Effect.Effect<Projection, PersistenceError, Scope.Scope> =>
  Effect.gen(function*() {
    if (!Number.isInteger(heldSessions) || heldSessions < 1) {
      return yield* Effect.dieMessage(`heldSessions must be a whole number from 1, got ${String(heldSessions)}`)
    }
    const scope = yield* Effect.scope
    const loadedAt = yield* store.lastSeq
    // insertion order is recency: a session used is moved to the end, the first one is dropped
    const entries = new Map<string, Entry>()
    const keepHeld = Newest.keeper(entries, heldSessions)
    // every change up to here is reflected in the sessions held (the tailer moves it)
    let floor = loadedAt
    // the seqs of the changes this gate wrote and projected, after `floor` (bounded: forgotten,
    // the tailer reads the approvals as it would for another process's change)
    const own = new Set<number>()

    const applyTo = (
      rows: ReadonlyArray<SessionApproval.SessionApproval>,
      touched?: Set<SessionIndex.SessionGrants>
    ) => {
      for (const row of rows) {
        const entry = entries.get(row.sessionKey)
        if (entry === undefined) continue
        if (entry._tag === "Reading") {
          entry.buffer.push(row)
        } else {
          SessionIndex.apply(entry.grants, row, floor)
          touched?.add(entry.grants)
        }
      }
    }

    const read = (sessionKey: string, entry: Extract<Entry, { _tag: "Reading" }>) =>
      Clock.currentTimeMillis.pipe(
        Effect.flatMap((now) => store.sessionApprovals({ sessionKey, activeAt: now })),
        Effect.map((rows) => {
          const grants = SessionIndex.make()
          for (const row of rows) SessionIndex.apply(grants, row, 0)
          for (const row of entry.buffer) SessionIndex.apply(grants, row, entry.floor)
          SessionIndex.prune(grants, floor)
          if (entries.get(sessionKey) === entry) entries.set(sessionKey, { _tag: "Held", grants })
          return grants
        }),
        Effect.onExit((exit) =>
          Effect.sync(() => {
            if (exit._tag === "Failure" && entries.get(sessionKey) === entry) entries.delete(sessionKey)
            Deferred.unsafeDone(entry.read, exit)
          })
        )
      )

    const startReading = (
      sessionKey: string,
      deferred: Deferred.Deferred<SessionIndex.SessionGrants, PersistenceError>
    ) =>
      Effect.suspend(() => {
        const entry = entries.get(sessionKey)
        if (entry?._tag === "Held") return Effect.succeed(entry.grants)
        if (entry?._tag === "Reading") return Deferred.await(entry.read)
        const reading: Entry = { _tag: "Reading", floor, buffer: [], read: deferred }
        entries.set(sessionKey, reading)
        keepHeld()
        // the read belongs to the gate, not to the caller: an interrupted caller leaves it to the others
        return Effect.zipRight(Effect.forkIn(read(sessionKey, reading), scope), Deferred.await(deferred))
      })

    const held = (sessionKey: string) => {
      const entry = entries.get(sessionKey)
      if (entry?._tag !== "Held") return undefined
      entries.delete(sessionKey)
      entries.set(sessionKey, entry)
      return entry.grants
    }

    const grantsOf = (sessionKey: string) =>
      Effect.suspend(() => {
        const grants = held(sessionKey)
        if (grants !== undefined) return Effect.succeed(grants)
        const entry = entries.get(sessionKey)
        if (entry?._tag === "Reading") return Deferred.await(entry.read)
        return Effect.flatMap(
          Deferred.make<SessionIndex.SessionGrants, PersistenceError>(),
          (deferred) => startReading(sessionKey, deferred)
        )
      })

    return {
      loadedAt,
      held,
      grantsOf,
      project: (rows) =>
        Effect.sync(() => {
          applyTo(rows)
          if (own.size >= maxOwn) own.clear()
          for (const row of rows) if (row.seq > floor) own.add(row.seq)
        }),
      projected: (seq) => own.has(seq),
      caughtUpTo: () => floor,
      caughtUp: (rows, seq) =>
        Effect.sync(() => {
          const touched = new Set<SessionIndex.SessionGrants>()
          applyTo(rows, touched)
          floor = Math.max(floor, seq)
          for (const grants of touched) SessionIndex.prune(grants, floor)
          for (const at of own) if (at <= floor) own.delete(at)
        })
    }
  })

/** The id of the call `hasApproval` looks up grants for: no call runs under it. */
const probeId = ToolCall.ToolCallId.make("probe")

/** The session-approval API of the gate. */
export const make = (options: {
  readonly store: ApprovalStore["Type"]
  readonly projection: Projection
  readonly sessionKeyOf: (sessionKey: string) => Either.Either<ToolCall.SessionKey, InvalidToolCall>
}) => {
  const { projection, sessionKeyOf, store } = options
  const { grantsOf, project } = projection

  const hasApproval = (
    toolId: string,
    sessionKey: ToolCall.SessionKey,
    call?: { readonly args?: ToolCall.ToolArgs; readonly workingDirectory?: string }
  ) =>
    Effect.gen(function*() {
      if (Either.isLeft(sessionKeyOf(sessionKey))) return false
      const grants = yield* grantsOf(sessionKey)
      const now = yield* Clock.currentTimeMillis
      if (call === undefined) return SessionIndex.hasToolWide(grants, toolId, now)
      const probe: ToolCall.ToolCall = {
        id: probeId,
        name: toolId,
        args: call.args ?? {},
        sessionKey,
        ...(call.workingDirectory !== undefined ? { workingDirectory: call.workingDirectory } : {})
      }
      return SessionIndex.lookup(grants, probe, now) !== undefined
    })

  const recordApproval = (
    toolId: string,
    sessionKey: ToolCall.SessionKey,
    approved: boolean,
    recordOptions?: { readonly grantedBy?: string; readonly ttl?: Duration.DurationInput }
  ) =>
    Effect.gen(function*() {
      const key = yield* sessionKeyOf(sessionKey)
      const ttlMs = recordOptions?.ttl !== undefined ? yield* Limits.ttlMillis("ttl", recordOptions.ttl) : undefined
      const now = yield* Clock.currentTimeMillis
      const toolName = ToolCall.normalizeName(toolId)
      const actor = recordOptions?.grantedBy
      if (approved) {
        const granted = yield* store.grant(
          {
            id: Ids.sessionApprovalId(),
            sessionKey: key,
            toolName,
            scope: "tool",
            ...(actor !== undefined ? { grantedBy: actor } : {}),
            createdAt: now,
            ...(ttlMs !== undefined ? { expiresAt: now + ttlMs } : {})
          },
          AuditEvent.sessionGranted(sessionKey, toolName, now, actor)
        )
        yield* project([granted])
      } else {
        const revoked = yield* store.revokeWhere(
          { sessionKey, toolName },
          now,
          AuditEvent.sessionToolRevoked(sessionKey, toolName, now, actor)
        )
        yield* project(revoked)
      }
    })

  const clearApprovals = (sessionKey?: ToolCall.SessionKey, actor?: string) =>
    Effect.gen(function*() {
      if (sessionKey !== undefined) yield* sessionKeyOf(sessionKey)
      const now = yield* Clock.currentTimeMillis
      const revoked = yield* store.revokeWhere({ sessionKey }, now, AuditEvent.approvalsCleared(sessionKey, now, actor))
      yield* project(revoked)
      return revoked.length
    })

  const sessionApprovals = (sessionKey?: ToolCall.SessionKey) =>
    sessionKey !== undefined && Either.isLeft(sessionKeyOf(sessionKey))
      ? Effect.succeed([])
      : Effect.flatMap(Clock.currentTimeMillis, (now) => store.sessionApprovals({ sessionKey, activeAt: now }))

  const revokeApproval = (id: SessionApproval.SessionApprovalId, { actor, sessionKey }: RevokeOptions = {}) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [held] = yield* store.sessionApprovals({ id })
      // Ids are global: a caller limited to one session never reaches another session's approval.
      if (sessionKey !== undefined && held?.sessionKey !== sessionKey) {
        return yield* new SessionApprovalNotFound({ sessionApprovalId: id })
      }
      const revoked = yield* store.revoke(
        id,
        now,
        AuditEvent.sessionApprovalRevoked(id, held, now, actor)
      )
      if (Option.isNone(revoked)) return yield* new SessionApprovalNotFound({ sessionApprovalId: id })
      yield* project([revoked.value])
      return revoked.value
    })

  return { hasApproval, recordApproval, clearApprovals, sessionApprovals, revokeApproval } as const
}
