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
  readonly resumedAt?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** `false` (and nothing written) when one of the requests already belongs to a checkpoint. */
  readonly save: (row: Row) => Effect.Effect<boolean, PersistenceError>
  readonly find: (
    by: { readonly token: string } | { readonly requestId: string }
  ) => Effect.Effect<Option.Option<Row>, PersistenceError>
  /** `true` for the one caller that resumes it. */
  readonly markResumed: (token: string, at: number) => Effect.Effect<boolean, PersistenceError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class CheckpointStore extends Context.Tag("@tool-gate/core/CheckpointStore")<CheckpointStore, Service>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service> = Effect.sync(() => {
  const rows = new Map<string, Row>()
  const byRequest = new Map<string, string>()
  return {
    save: (row) =>
      Effect.sync(() => {
        if (row.requestIds.some((id) => byRequest.has(id))) return false
        rows.set(row.token, row)
        for (const id of row.requestIds) byRequest.set(id, row.token)
        return true
      }),
    find: (by) =>
      Effect.sync(() => {
        const token = "token" in by ? by.token : byRequest.get(by.requestId)
        return Option.fromNullable(token === undefined ? undefined : rows.get(token))
      }),
    markResumed: (token, at) =>
      Effect.sync(() => {
        const row = rows.get(token)
        if (row === undefined || row.resumedAt !== undefined) return false
        rows.set(token, { ...row, resumedAt: at })
        return true
      })
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<CheckpointStore> = Layer.effect(CheckpointStore, makeMemory)
