/**
 * Two gates over one store, the way two processes share a database: for every backend the two
 * gates have their own projection, tailer and sweeper, and meet only in the store.
 *
 * - memory: one `ApprovalStore.makeMemory` shared by both gates
 * - sqlite: two store layers (two connections) on one file in a fresh temp dir
 * - postgres: two store layers (two pools) on one fresh schema, woken by one NOTIFY channel
 */
import { ApprovalStore, type Policy, ToolGate } from "@tool-gate/core"
import { Context, Effect, Layer, type Scope } from "effect"
import { join } from "node:path"
import { postgresUrl } from "../../support/postgresSuite.js"
import { pgClient, pgSchema, pgStoreOver, sqliteClient, storeOver, tempDir } from "../../support/sqlStores.js"

/** What a test gets: two gates and the store they share (read through the first one's connection). */
export interface Gates {
  readonly a: ToolGate.Service
  readonly b: ToolGate.Service
  readonly store: ApprovalStore.Service
}

export interface GateOptions extends Omit<ToolGate.Options, "policy"> {
  readonly policy: Policy.Policy
}

/** Builds two gates on two stores (or one shared store) in the scope. */
export type Backend = (options: GateOptions) => Effect.Effect<Gates, unknown, Scope.Scope>

const gateOver = (options: GateOptions, store: ApprovalStore.Service) =>
  ToolGate.make(options).pipe(Effect.provideService(ApprovalStore.ApprovalStore, store))

const storeOf = <E>(layer: Layer.Layer<ApprovalStore.ApprovalStore, E>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, ApprovalStore.ApprovalStore))

const twoOver = (options: GateOptions, first: ApprovalStore.Service, second: ApprovalStore.Service) =>
  Effect.all({ a: gateOver(options, first), b: gateOver(options, second), store: Effect.succeed(first) })

export const memory: Backend = (options) =>
  Effect.flatMap(ApprovalStore.makeMemory, (store) => twoOver(options, store, store))

export const sqlite: Backend = (options) =>
  Effect.gen(function*() {
    const file = join(yield* tempDir, "toolgate.db")
    const first = yield* storeOf(storeOver(sqliteClient(file)))
    const second = yield* storeOf(storeOver(sqliteClient(file)))
    return yield* twoOver(options, first, second)
  })

let channels = 0

export const postgres = (url: string): Backend => (options) =>
  Effect.gen(function*() {
    const schemaUrl = yield* pgSchema(url)
    const channel = `toolgate_security_${process.pid}_${channels++}`
    const first = yield* storeOf(pgStoreOver(pgClient(schemaUrl), channel))
    const second = yield* storeOf(pgStoreOver(pgClient(schemaUrl), channel))
    return yield* twoOver(options, first, second)
  })

export interface NamedBackend {
  readonly name: string
  readonly backend: Backend
  /** PostgreSQL without `TOOLGATE_PG_URL`: register the tests as skipped, never as passed */
  readonly skip: boolean
}

/** memory, sqlite and postgres (skipped, and said so on stderr, without `TOOLGATE_PG_URL`). */
export const backends = (file: string): ReadonlyArray<NamedBackend> => {
  const url = postgresUrl(`tests in ${file}`)
  return [
    { name: "memory", backend: memory, skip: false },
    { name: "sqlite", backend: sqlite, skip: false },
    { name: "postgres", backend: postgres(url ?? ""), skip: url === undefined }
  ]
}
