/**
 * LISTEN for the change feed, on a connection of its own for each stream. The stream fails when
 * that connection ends, errs or leaves a query unanswered (one runs every `check`), so the feed
 * listens again on a new connection; the connection is closed when the stream ends.
 *
 * `PgClient.listen` shares one listening connection and ignores its errors: once the server had
 * restarted, or a load balancer had forgotten the idle connection, its stream stayed open and heard
 * nothing, and every wake-up from another process waited for the feed's slow poll for as long as
 * the process ran. The query every `check` also keeps an idle connection's flow alive through such
 * a load balancer.
 */
import { SqlError } from "@effect/sql/SqlError"
import type { SqlChangeFeed } from "@tool-gate/core"
import { Clock, type Duration, Effect, Stream } from "effect"
import * as Pg from "pg"

/** `text` run on `client`, its failure a `SqlError` saying `message`. */
const query = (client: Pg.Client, text: string, message: string) =>
  Effect.tryPromise({ try: () => client.query(text), catch: (cause) => new SqlError({ cause, message }) })

/** A connected client; until the stream takes over, its errors are the connect's to report. */
const connect = (options: Pg.ClientConfig) =>
  Effect.suspend(() => {
    const client = new Pg.Client(options)
    client.on("error", () => {})
    return Effect.as(
      Effect.tryPromise({
        try: () => client.connect(),
        catch: (cause) => new SqlError({ cause, message: "Failed to connect for LISTEN" })
      }),
      client
    ).pipe(Effect.tapError(() => close(client)))
  })

// The connection lives in real time, whatever clock a caller (a test) runs on.
const wallClock = Clock.make()

/** Ends the connection: politely within a second, else its socket is destroyed. */
const close = (client: Pg.Client) =>
  Effect.tryPromise(() => client.end()).pipe(
    Effect.ignore,
    Effect.timeoutOption(1000),
    Effect.zipRight(Effect.sync(() =>
      (client as unknown as { connection: { stream: { destroy(): void } } })
        .connection.stream.destroy()
    )),
    Effect.withClock(wallClock)
  )

export const make = (options: Pg.ClientConfig, check: Duration.Duration): SqlChangeFeed.Listener => ({
  listen: (channel) =>
    Stream.asyncPush<string, SqlError>((emit) =>
      Effect.gen(function*() {
        const client = yield* Effect.acquireRelease(connect(options), close)
        const lost = (cause: unknown) => emit.fail(new SqlError({ cause, message: "LISTEN connection lost" }))
        client.on("error", lost)
        client.on("end", () => lost(new Error("Connection ended")))
        client.on("notification", (notification) => {
          if (notification.channel === channel && notification.payload !== undefined) emit.single(notification.payload)
        })
        yield* query(client, `LISTEN ${Pg.escapeIdentifier(channel)}`, "Failed to listen")
        const checking = Effect.zipRight(
          Effect.sleep(check),
          query(client, "SELECT 1", "LISTEN connection check failed").pipe(
            Effect.timeoutFail({
              duration: check,
              onTimeout: () =>
                new SqlError({ cause: new Error("no answer"), message: "LISTEN connection check failed" })
            })
          )
        )
        yield* Effect.forkScoped(
          Effect.withClock(Effect.forever(checking), wallClock).pipe(
            Effect.catchAll((error) => Effect.sync(() => lost(error)))
          )
        )
      })
    )
})
