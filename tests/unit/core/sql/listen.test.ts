/**
 * The connection a PostgreSQL store LISTENs on (`@tool-gate/pg`): when the server ends it (a
 * restart), or a load balancer forgets it while it idles, the store listens again on a new one and
 * hears the next notification, with the slow poll turned off; and a stream that ends closes it.
 */
import { SqlClient } from "@effect/sql"
import { ApprovalStore, SqlChangeFeed } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { expect } from "bun:test"
import { Context, Duration, Effect, Layer, Option, Queue, Redacted, Stream } from "effect"
import { connectionOptions } from "../../../../packages/pg/src/internal/connectionOptions.js"
import * as Listener from "../../../../packages/pg/src/internal/listener.js"
import { describe, it } from "../../../support/effectTest.js"
import { describePostgres } from "../../../support/postgresSuite.js"
import { pgClient, pgSchema } from "../../../support/sqlStores.js"
import { tcpProxy } from "../../../support/tcpProxy.js"
import { decision } from "./fixtures.js"

/** no slow poll: only LISTEN can bring a signal */
const noFallback = "1 hour"

let names = 0

describePostgres("LISTEN connections", (url) =>
  describe("the connection a PostgreSQL store listens on", () => {
    /** A notify feed on `listenUrl`, its LISTEN connection (its only one) named `name` and checked every `check`, its signals in a queue. */
    const feedOn = (listenUrl: string, name: string, check = Duration.millis(100)) =>
      Effect.gen(function*() {
        const admin = Context.get(yield* Layer.build(pgClient(url)), SqlClient.SqlClient)
        const channel = `toolgate_listen_${names}`
        const listener = Listener.make(
          connectionOptions({ url: Redacted.make(listenUrl), applicationName: name }),
          check
        )
        const feed = yield* SqlChangeFeed.makeNotifyFeed(listener, { channel, fallbackInterval: noFallback }).pipe(
          Effect.provideService(SqlClient.SqlClient, admin)
        )
        const signals = yield* Queue.unbounded<number | undefined>()
        yield* feed.changes.pipe(Stream.runForEach((seq) => Queue.offer(signals, seq)), Effect.forkScoped)
        /** Notifies `seq` until the feed signals it (LISTEN may be being set up again meanwhile). */
        const heard = (seq: number) =>
          Effect.gen(function*() {
            for (let attempt = 0; attempt < 100; attempt++) {
              yield* admin`SELECT pg_notify(${channel}, ${String(seq)})`
              const signal = yield* Queue.take(signals).pipe(Effect.timeout("100 millis"), Effect.option)
              if (Option.isSome(signal) && signal.value === seq) return true
            }
            return false
          })
        /** The backends LISTENing for this feed. */
        const listening = Effect.map(
          admin<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE application_name = ${name}`,
          (rows) => rows.map((row) => row.pid)
        )
        return { admin, heard, listening }
      })

    it.live("ended by the server: it listens again on a new connection and hears the next notification", () =>
      Effect.gen(function*() {
        const name = `toolgate-listen-${names++}`
        // no check in the test's time: the connection's end alone tells it
        const { admin, heard, listening } = yield* feedOn(url, name, Duration.hours(1))
        expect(yield* heard(1)).toBe(true)
        const [before] = yield* listening
        yield* admin`SELECT pg_terminate_backend(${before!})`
        expect(yield* heard(2)).toBe(true)
        const after = yield* listening
        expect(after).toHaveLength(1)
        expect(after[0]).not.toBe(before)
      }), 30_000)

    it.live("forgotten by a load balancer while idle: the check finds it, and it listens again", () =>
      Effect.gen(function*() {
        const proxy = yield* tcpProxy(url)
        const { heard } = yield* feedOn(proxy.url(url), `toolgate-listen-${names++}`)
        expect(yield* heard(1)).toBe(true)
        expect(yield* proxy.forget).toBe(1)
        expect(yield* heard(2)).toBe(true)
      }), 30_000)

    it.live("a stream that ends closes its connection", () =>
      Effect.gen(function*() {
        const name = `toolgate-listen-${names++}`
        const admin = Context.get(yield* Layer.build(pgClient(url)), SqlClient.SqlClient)
        const listening = Effect.map(
          admin<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE application_name = ${name}`,
          (rows) =>
            rows.length
        )
        yield* Effect.scoped(Effect.gen(function*() {
          expect(yield* (yield* feedOn(url, name)).heard(1)).toBe(true)
          expect(yield* listening).toBe(1)
        }))
        let left = yield* listening
        for (let i = 0; i < 100 && left > 0; i++) {
          yield* Effect.sleep("20 millis")
          left = yield* listening
        }
        expect(left).toBe(0)
      }), 30_000)

    it.live(
      "ToolGatePg's store: another store's commit wakes it again after the server ended its LISTEN connection",
      () =>
        Effect.gen(function*() {
          const schemaUrl = yield* pgSchema(url)
          const name = `toolgate-listen-${names++}`
          const storeOf = (applicationName: string) =>
            Effect.map(
              Layer.build(ToolGatePg.layerStore({
                url: Redacted.make(schemaUrl),
                client: { applicationName },
                fallbackInterval: noFallback,
                listenCheckInterval: "100 millis"
              })),
              (context) =>
                Context.get(context, ApprovalStore.ApprovalStore)
            )
          const reader: ApprovalStore.Service = yield* storeOf(name)
          const writer = yield* storeOf(`${name}-writer`)
          const hints = yield* reader.subscribe
          const admin = Context.get(yield* Layer.build(pgClient(url)), SqlClient.SqlClient)
          let n = 0
          const woken = Effect.gen(function*() {
            for (let attempt = 0; attempt < 60; attempt++) {
              yield* writer.append([decision(++n)])
              if (Option.isSome(yield* Queue.take(hints).pipe(Effect.timeout("200 millis"), Effect.option))) {
                return true
              }
            }
            return false
          })
          expect(yield* woken).toBe(true)
          // the store names its LISTEN connection after its pool's
          const ended = yield* admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = ${`${name}/listen`}`
          expect(ended).toHaveLength(1)
          yield* Queue.takeAll(hints)
          expect(yield* woken).toBe(true)
        }),
      30_000
    )
  }))
