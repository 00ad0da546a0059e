/**
 * Where checkpoints live: beside the approval store, in the same database when it is SQL
 * (`SqlCheckpointStore`), or in memory (`layerMemory`). The state is stored as the JSON text the
 * checkpoint's own schema encoded.
 *
 * @example
 * import { Checkpoint, CheckpointStore, ToolGate, Policy } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Live = Checkpoint.layer.pipe(
 *   Layer.provideMerge(ToolGate.layerMemory({ policy: Policy.allowAll })),
 *   Layer.provide(CheckpointStore.layerMemory)
 * )
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option } from "effect"
import type { PersistenceError } from "./ToolGateError.js"

/**
 * A checkpoint as the store keeps it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Row {
  readonly token: string
  readonly name: string
  /** JSON text, encoded by the checkpoint's state schema */
  readonly state: string
  readonly requestIds: ReadonlyArray<string>
  readonly createdAt: number
  /** who holds (or last held) the resume lease, and until when */
  readonly claimedBy?: string | undefined
  readonly claimedUntil?: number | undefined
  /** how many times the checkpoint was claimed: the fencing token of the latest lease (0: never) */
  readonly claims: number
  /** when the resume was completed: the checkpoint is done */
  readonly completedAt?: number | undefined
}

/**
 * A checkpoint to save: never claimed yet.
 *
 * @since 0.1.0
 * @category models
 */
export type NewRow = Pick<Row, "token" | "name" | "state" | "requestIds" | "createdAt">

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * `false` (and nothing written) when one of the requests already belongs to a checkpoint, but for
   * the same save again (the same token over the same requests): `true`, as a store may run a save
   * again after its answer was lost.
   */
  readonly save: (row: NewRow) => Effect.Effect<boolean, PersistenceError>
  readonly find: (
    by: { readonly token: string } | { readonly requestId: string }
  ) => Effect.Effect<Option.Option<Row>, PersistenceError>
  /**
   * The new lease's fencing token (the count of claims, this one included) when `owner` now holds
   * the lease until `until`: the checkpoint is not completed and nobody else holds a lease still
   * running at `now` (the owner may claim again; its earlier lease is superseded). `None` otherwise.
   */
  readonly claim: (
    token: string,
    owner: string,
    now: number,
    until: number
  ) => Effect.Effect<Option.Option<number>, PersistenceError>
  /**
   * Moves the end of the lease `(owner, fence)` to `until`, `true` when it is still the latest
   * claim and the checkpoint is not completed. One conditional write: once it succeeds, nobody
   * can claim before `until`; once another owner claimed, it never succeeds again.
   */
  readonly renew: (
    token: string,
    owner: string,
    fence: number,
    until: number
  ) => Effect.Effect<boolean, PersistenceError>
  /** Replaces the state, `true` when `(owner, fence)` is the latest claim and the checkpoint is not completed. */
  readonly update: (
    token: string,
    owner: string,
    fence: number,
    state: string
  ) => Effect.Effect<boolean, PersistenceError>
  /**
   * `true` when `(owner, fence)` was the latest claim and the checkpoint was not completed: now it
   * is. Idempotent: completing again with the same `(owner, fence, at)` is `true` too (a store may
   * run it again after its answer was lost).
   */
  readonly complete: (
    token: string,
    owner: string,
    fence: number,
    at: number
  ) => Effect.Effect<boolean, PersistenceError>
  /** Checkpoints at the wait point `name` not completed yet, oldest first. */
  readonly open: (name: string) => Effect.Effect<ReadonlyArray<Row>, PersistenceError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class CheckpointStore extends Context.Tag("@tool-gate/core/CheckpointStore")<CheckpointStore, Service>() {}

/**
 * A change of an open checkpoint by the holder of its latest lease.
 *
 * @since 0.1.0
 * @category models
 */
export type LeasedChange =
  | { readonly _tag: "Renew"; readonly claimedUntil: number }
  | { readonly _tag: "Update"; readonly state: string }
  | { readonly _tag: "Complete"; readonly completedAt: number }

/**
 * What a checkpoint driver does, each method one atomic step: `Service` without the three leased
 * writes, which are one conditional write here (`writeLeased`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Encoded extends Pick<Service, "save" | "find" | "claim" | "open"> {
  /**
   * Applies `change`, `true` when `(owner, fence)` is the latest claim and the checkpoint is not
   * completed (or, for a completion, completed by the same completion: see `complete`).
   */
  readonly writeLeased: (
    token: string,
    owner: string,
    fence: number,
    change: LeasedChange
  ) => Effect.Effect<boolean, PersistenceError>
}

/**
 * The store over a driver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEncoded = (encoded: Encoded): Service => ({
  save: encoded.save,
  find: encoded.find,
  claim: encoded.claim,
  renew: (token, owner, fence, until) =>
    encoded.writeLeased(token, owner, fence, { _tag: "Renew", claimedUntil: until }),
  update: (token, owner, fence, state) => encoded.writeLeased(token, owner, fence, { _tag: "Update", state }),
  complete: (token, owner, fence, at) =>
    encoded.writeLeased(token, owner, fence, { _tag: "Complete", completedAt: at }),
  open: encoded.open
})

/**
 * The in-process driver. Each method runs synchronously, so each is atomic like a transaction.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemoryDriver: Effect.Effect<Encoded> = Effect.sync(() => {
  const rows = new Map<string, Row>()
  const byRequest = new Map<string, string>()
  return {
    save: (row) =>
      Effect.sync(() => {
        if (row.requestIds.some((id) => byRequest.has(id))) {
          // the same save again: this token, over these requests and no others
          const saved = rows.get(row.token)
          return saved !== undefined && saved.requestIds.length === row.requestIds.length &&
            row.requestIds.every((id) => byRequest.get(id) === row.token)
        }
        rows.set(row.token, { ...row, claims: 0 })
        for (const id of row.requestIds) byRequest.set(id, row.token)
        return true
      }),
    find: (by) =>
      Effect.sync(() => {
        const token = "token" in by ? by.token : byRequest.get(by.requestId)
        return Option.fromNullable(token === undefined ? undefined : rows.get(token))
      }),
    claim: (token, owner, now, until) =>
      Effect.sync(() => {
        const row = rows.get(token)
        if (row === undefined || row.completedAt !== undefined) return Option.none()
        if (row.claimedBy !== undefined && row.claimedBy !== owner && row.claimedUntil! > now) return Option.none()
        rows.set(token, { ...row, claimedBy: owner, claimedUntil: until, claims: row.claims + 1 })
        return Option.some(row.claims + 1)
      }),
    writeLeased: (token, owner, fence, change) =>
      Effect.sync(() => {
        const row = rows.get(token)
        // a completion finds its own completion again: completing is idempotent
        const open = row?.completedAt === undefined ||
          (change._tag === "Complete" && row.completedAt === change.completedAt)
        if (row === undefined || !open || row.claimedBy !== owner || row.claims !== fence) return false
        const { _tag: _, ...fields } = change
        rows.set(token, { ...row, ...fields })
        return true
      }),
    open: (name) =>
      Effect.sync(() => [...rows.values()].filter((row) => row.name === name && row.completedAt === undefined))
  }
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service> = Effect.map(makeMemoryDriver, makeEncoded)

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<CheckpointStore> = Layer.effect(CheckpointStore, makeMemory)
