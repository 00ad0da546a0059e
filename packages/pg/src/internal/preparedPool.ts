/**
 * A `PgClient` whose connections keep the statements they repeat prepared. node-postgres sends
 * every statement with parameters unnamed, so the server parses, analyses and plans it again on
 * each run: measured on the stores' round trips, that was a third of the server's CPU. Here a
 * statement's text gets a name the first time it runs on a connection (one `Parse`); later runs
 * only bind and execute it, and PostgreSQL switches to a generic plan when that costs no more.
 *
 * A query without parameters (`SELECT`, `WITH`, `INSERT`, `UPDATE`, `DELETE`: what the planner
 * plans) is named the second time it runs: node-postgres sends it as a simple query, parsed and
 * planned on every run too (the log's head, read before every pending list a server serves, took
 * the server 76-98 µs a run so, against 25 prepared), while most such texts run once (a
 * migration's). Other statements (`BEGIN`, `COMMIT`, DDL) have no plan to keep, and a text of
 * several statements cannot be prepared: they run unnamed.
 *
 * Bounded: only statements with at most `maxParams` parameters are named (a statement over many
 * rows is seldom run twice with the same number of rows, and its plan is large), and only the first
 * `maxStatements` texts of the pool, so each connection holds at most that many.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, type Layer } from "effect"
import * as Pg from "pg"
import { connectionOptions } from "./connectionOptions.js"

export interface Limits {
  readonly maxStatements: number
  readonly maxParams: number
}

export const defaultLimits: Limits = { maxStatements: 256, maxParams: 64 }

/** A statement the planner plans. */
const planned = /^\s*(SELECT|WITH|INSERT|UPDATE|DELETE)\b/i

/**
 * The name a text runs under, `undefined` to run it unnamed. The same text has the same name on
 * every connection of the pool (node-postgres refuses a name reused for another text).
 */
export const statementNames = (limits: Limits) => {
  const names = new Map<string, string>()
  // texts without parameters run once so far, unnamed
  const seenOnce = new Set<string>()
  return (text: string, params: number): string | undefined => {
    if (params > limits.maxParams) return undefined
    const name = names.get(text)
    if (name !== undefined || names.size >= limits.maxStatements) return name
    if (params === 0) {
      if (!planned.test(text) || text.includes(";")) return undefined
      if (!seenOnce.has(text)) {
        if (seenOnce.size >= limits.maxStatements) seenOnce.clear()
        seenOnce.add(text)
        return undefined
      }
      seenOnce.delete(text)
    }
    const fresh = `toolgate_${names.size}`
    names.set(text, fresh)
    return fresh
  }
}

type NameOf = ReturnType<typeof statementNames>

/** node-postgres' `Client`, running a text under its name when it has one. */
const preparingClient = (nameOf: NameOf) =>
  class PreparingClient extends Pg.Client {
    override query(...args: Array<any>): any {
      const [text, values] = args
      if (typeof text === "string" && (values === undefined || Array.isArray(values))) {
        const name = nameOf(text, values?.length ?? 0)
        if (name !== undefined) return super.query({ name, text, values }, args[2])
      }
      return super.query(...(args as Parameters<Pg.Client["query"]>))
    }
  }

/** The pool `PgClient.make` builds from `config`, its connections preparing what they repeat. */
const poolOf = (config: PgClient.PgClientConfig, limits: Limits) =>
  new Pg.Pool({
    ...connectionOptions(config),
    idleTimeoutMillis: config.idleTimeout ? Duration.toMillis(config.idleTimeout) : undefined,
    max: config.maxConnections,
    min: config.minConnections,
    maxLifetimeSeconds: config.connectionTTL ? Duration.toSeconds(config.connectionTTL) : undefined,
    Client: preparingClient(statementNames(limits))
  })

/**
 * `PgClient.layer(config)` with the preparing pool: connected (`SELECT 1`) within `connectTimeout`
 * (5 seconds by default) when built, ended when released, as `PgClient.layer` does.
 */
export const layer = (
  config: PgClient.PgClientConfig,
  limits: Limits = defaultLimits
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError> =>
  PgClient.layerFromPool({
    acquire: Effect.acquireRelease(
      Effect.suspend(() => {
        const pool = poolOf(config, limits)
        // an idle connection's error is the pool's to handle (it drops the connection)
        pool.on("error", () => {})
        return Effect.tryPromise({
          try: () => pool.query("SELECT 1"),
          catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
        }).pipe(
          Effect.timeoutFail({
            duration: config.connectTimeout ?? Duration.seconds(5),
            onTimeout: () =>
              new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
          }),
          Effect.onError(() => Effect.promise(() => pool.end())),
          Effect.as(pool)
        )
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    ),
    applicationName: config.applicationName,
    spanAttributes: config.spanAttributes,
    transformResultNames: config.transformResultNames,
    transformQueryNames: config.transformQueryNames,
    transformJson: config.transformJson,
    types: config.types
  })
