/**
 * Which failures of PostgreSQL statements are a lost connection (the store runs those again on
 * another connection) and which are not (run again, they would fail the same way): each made for
 * real, on a real server, through the pool the stores use.
 */
import { SqlClient } from "@effect/sql"
import { expect } from "bun:test"
import { Context, Effect, Layer } from "effect"
import { isLost } from "../../../../packages/core/src/internal/lostConnection.js"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient } from "../../../support/sqlStores.js"
import { tcpProxy } from "../../../support/tcpProxy.js"

const clientOf = (url: string) => Effect.map(Layer.build(pgClient(url)), Context.get(SqlClient.SqlClient))

describe("isLost", () => {
  it.effect("anything but a SqlError is not", () =>
    Effect.sync(() => {
      expect(isLost(new Error("Connection terminated unexpectedly"))).toBe(false)
      expect(isLost(undefined)).toBe(false)
    }))
})

describePostgres("lost connections", (url) =>
  describe("isLost (postgres)", () => {
    it.live("a statement's own failures are not: a syntax error, a division by zero, a statement its timeout cancelled", () =>
      Effect.gen(function*() {
        const sql = yield* clientOf(url)
        const failures = [
          yield* Effect.flip(sql.unsafe("SELEC 1")),
          yield* Effect.flip(sql.unsafe("SELECT x FROM (VALUES (1), (1)) AS t(x) GROUP BY x HAVING 1 / 0 = 1")),
          yield* Effect.flip(sql.unsafe("SET statement_timeout = 1; SELECT pg_sleep(1)"))
        ]
        expect(failures.map(isLost)).toEqual([false, false, false])
      }))

    it.live("a session the server ends (57P01) is", () =>
      Effect.gen(function*() {
        const sql = yield* clientOf(url)
        const failure = yield* Effect.flip(sql.unsafe("SELECT pg_terminate_backend(pg_backend_pid())"))
        expect(isLost(failure)).toBe(true)
      }))

    /** A pool through a proxy, whose one connection (idle) the proxy has forgotten. */
    const forgottenPool = Effect.gen(function*() {
      const proxy = yield* tcpProxy(url)
      const sql = yield* clientOf(proxy.url(url))
      expect(yield* proxy.forget).toBe(1)
      return { proxy, sql }
    })

    it.live("a connection a proxy forgot, found dead when used, is", () =>
      Effect.gen(function*() {
        const { sql } = yield* forgottenPool
        const failure = yield* Effect.flip(sql.unsafe("SELECT 1"))
        expect(isLost(failure)).toBe(true)
      }))

    it.live("a connection refused is not: no server is there to run it again on", () =>
      Effect.gen(function*() {
        const { proxy, sql } = yield* forgottenPool
        yield* proxy.refuse
        // the pool's one idle connection first (lost), then a new one (refused)
        const failures = [yield* Effect.flip(sql.unsafe("SELECT 1")), yield* Effect.flip(sql.unsafe("SELECT 1"))]
        expect(failures.map(isLost)).toEqual([true, false])
      }))
  }))
