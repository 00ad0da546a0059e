/**
 * How a SQL store learns that other processes may have grown the log: `layerPollingFeed` for any
 * database, `layerNotifyFeed` for PostgreSQL LISTEN/NOTIFY (and `@tool-gate/sqlite`'s file watch).
 * The store hints its own commits to its subscribers at once; a feed brings the others'.
 *
 * @example
 * import { SqlApprovalStore, SqlChangeFeed } from "@tool-gate/core"
 * import { Layer } from "effect"
 *
 * const Store = SqlApprovalStore.layer().pipe(Layer.provide(SqlChangeFeed.layerPollingFeed("50 millis")))
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Effect, Layer, Stream } from "effect"
import type * as Duration from "effect/Duration"

/**
 * How a store learns that other processes may have grown the log.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChangeFeed {
  /** Runs inside each writing transaction after its events are inserted (PostgreSQL: `NOTIFY`). */
  readonly onCommit: (seq: number) => Effect.Effect<void, SqlError>
  /**
   * PostgreSQL's NOTIFY channel, when the feed is one: the store then notifies in the statement
   * that inserts the events, instead of calling `onCommit` (one round trip less per write).
   */
  readonly channel?: string | undefined
  /**
   * Signals that the log may have grown: with the last seq a commit reached when the signal
   * carries it (PostgreSQL's NOTIFY does), so that the store skips what it has read already.
   */
  readonly changes: Stream.Stream<number | undefined>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class SqlChangeFeed extends Context.Tag("@tool-gate/core/SqlChangeFeed")<SqlChangeFeed, ChangeFeed>() {}

const wallClock = Clock.make()

/**
 * Sleeps in wall-clock time. Other processes commit in real time, so the feeds' pace ignores the
 * `Clock` service: under a `TestClock` a poll would never fire, or fire thousands of times when a
 * test moves the clock by minutes.
 */
const pause = (duration: Duration.DurationInput) => Effect.withClock(Effect.sleep(duration), wallClock)

/** A signal every `interval` of wall-clock time. */
const ticks = (interval: Duration.DurationInput): Stream.Stream<undefined> =>
  Stream.repeatEffect(Effect.as(pause(interval), undefined))

/** The seq a notification carries (anything else: unknown, so the store reads). */
const seqOf = (payload: string): number | undefined => {
  const seq = Number(payload)
  return Number.isSafeInteger(seq) && seq > 0 ? seq : undefined
}

/**
 * A feed for any database: signals every `interval` (default 50 ms, wall-clock time). The store
 * polls only while someone is subscribed, and a poll is one indexed `max(seq)` read.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPollingFeed = (interval: Duration.DurationInput = "50 millis"): Layer.Layer<SqlChangeFeed> =>
  Layer.succeed(SqlChangeFeed, { onCommit: () => Effect.void, changes: ticks(interval) })

/**
 * What `makeNotifyFeed` needs of a PostgreSQL client: `PgClient` from `@effect/sql-pg` has it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Listener {
  readonly listen: (channel: string) => Stream.Stream<string, SqlError>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface NotifyFeedOptions {
  /** default `toolgate_changes`; give stores with other table prefixes their own channel */
  readonly channel?: string | undefined
  /**
   * A slow poll beside LISTEN (default 1 second): a notification is lost when the listening
   * connection drops or while LISTEN is being (re)established.
   */
  readonly fallbackInterval?: Duration.DurationInput | undefined
}

/**
 * A PostgreSQL LISTEN/NOTIFY feed: each writing transaction calls `pg_notify(channel, seq)` (which
 * PostgreSQL delivers at commit, and not at all on rollback), and `changes` listens on the channel
 * through `listener` (e.g. `PgClient`), so core needs no PostgreSQL driver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNotifyFeed = (
  listener: Listener,
  options: NotifyFeedOptions = {}
): Effect.Effect<ChangeFeed, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (client) => {
    const sql = client.withoutTransforms()
    const channel = options.channel ?? "toolgate_changes"
    return {
      onCommit: (seq) => Effect.asVoid(sql`SELECT pg_notify(${channel}, ${String(seq)})`),
      channel,
      // One fiber listens (again a second after LISTEN fails or ends), another polls; both push
      // into the stream. (`Stream.merge` races its two sides for every element: about 0.4 ms from
      // a notification to its reader, a third of the wake-up of a waiter in another process.)
      changes: Stream.asyncPush<number | undefined>((emit) => {
        const listening = listener.listen(channel).pipe(
          Stream.runForEach((payload) => Effect.sync(() => emit.single(seqOf(payload)))),
          Effect.ignore,
          Effect.zipRight(pause("1 second")),
          Effect.forever
        )
        const polling = Effect.forever(
          Effect.zipRight(pause(options.fallbackInterval ?? "1 second"), Effect.sync(() => emit.single(undefined)))
        )
        return Effect.all([Effect.forkScoped(listening), Effect.forkScoped(polling)], { discard: true })
      })
    }
  })

/**
 * `makeNotifyFeed` over the client found under `tag`, e.g.
 * `SqlChangeFeed.layerNotifyFeed(PgClient.PgClient)`. `PgClient.listen` does not notice that its
 * listening connection ended (a restart of the server): the feed then hears nothing but its slow
 * poll. `@tool-gate/pg`'s `layerStore` listens on a connection of its own instead, and again on a
 * new one when it ends.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNotifyFeed = <I, S extends Listener>(
  tag: Context.Tag<I, S>,
  options?: NotifyFeedOptions
): Layer.Layer<SqlChangeFeed, never, I | SqlClient.SqlClient> =>
  Layer.effect(SqlChangeFeed, Effect.flatMap(tag, (listener) => makeNotifyFeed(listener, options)))
