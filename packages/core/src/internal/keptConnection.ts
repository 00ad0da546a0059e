import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, ExecutionStrategy, Exit, Scope } from "effect"
import * as LostConnection from "./lostConnection.js"

/**
 * One connection of a pool, reserved on first need and kept, for a user of one statement or one
 * transaction at a time. On PostgreSQL, taking a connection from the pool and giving it back (a
 * queued callback, listeners, an idle timer) costs about as much of the client's CPU as a short
 * statement itself, and a round trip of the store runs several.
 *
 * The pool drops a connection the server ends while it sits idle there; a kept one is out of the
 * pool, so it is only found broken when used. Its user gives it back (`drop`) after anything
 * failed on it, and runs again on a fresh one what can run twice safely (a read; a `BEGIN`; a
 * statement that changes nothing the second time).
 */
export interface KeptConnection {
  /** The kept connection, reserved now if none is kept. */
  readonly get: Effect.Effect<Connection, SqlError>
  /** Gives the kept connection back to the pool: the next `get` reserves another. */
  readonly drop: Effect.Effect<void>
}

/**
 * Keeps connections from `reserve`. The one kept when the current scope closes is given back then
 * (after what this scope closes later, such as a fiber forked into it afterwards, which may use it).
 */
export const make = (
  reserve: Effect.Effect<Connection, SqlError, Scope.Scope>
): Effect.Effect<KeptConnection, never, Scope.Scope> =>
  Effect.gen(function*() {
    let kept: { readonly conn: Connection; readonly scope: Scope.CloseableScope } | undefined
    const get = Effect.suspend(() => {
      if (kept !== undefined) return Effect.succeed(kept.conn)
      return Effect.uninterruptible(
        Effect.flatMap(Scope.make(ExecutionStrategy.sequential), (scope) =>
          Effect.onExit(Scope.extend(reserve, scope), (exit) => {
            if (Exit.isFailure(exit)) {
              return Scope.close(scope, exit)
            }
            kept = { conn: exit.value, scope }
            return Effect.void
          }))
      )
    })
    const drop = Effect.suspend(() => {
      if (kept === undefined) {
        return Effect.void
      }
      const { scope } = kept
      kept = undefined
      return Scope.close(scope, Exit.void)
    })
    yield* Effect.addFinalizer(() =>
      drop
    )
    return { get, drop }
  })

/** A kept connection shared by statements outside a transaction. */
export interface Shared {
  /** Runs `use` on the kept connection while it is free, else `pool`. */
  <A>(
    use: (conn: Connection) => Effect.Effect<A, SqlError>,
    pool: Effect.Effect<A, SqlError>
  ): Effect.Effect<A, SqlError>
  /**
   * The kept connection while it is free, held until the scope closes, else one from `pool`. What
   * fails on it should run again through the call form (reads only): that gives back a kept
   * connection the server has ended.
   */
  readonly borrow: (
    pool: Effect.Effect<Connection, SqlError, Scope.Scope>
  ) => Effect.Effect<Connection, SqlError, Scope.Scope>
}

/**
 * Runs statements outside a transaction on a kept connection while it is free, else on `pool` (so
 * concurrent statements still spread over the pool's connections). A statement that fails on the
 * kept connection gives it back and runs again on the pool; one that loses its connection there runs
 * again on another (`retryWhileLost`: the pool's idle connections may have ended with the kept one).
 * Only for statements that may run twice (reads; one that changes nothing the second time).
 */
export const makeShared = (
  reserve: Effect.Effect<Connection, SqlError, Scope.Scope>
): Effect.Effect<Shared, never, Scope.Scope> =>
  Effect.map(make(reserve), (kept) => {
    let busy = false
    const free = Effect.sync(() => {
      busy = false
    })
    const run = <A>(use: (conn: Connection) => Effect.Effect<A, SqlError>, pool: Effect.Effect<A, SqlError>) =>
      Effect.suspend(() => {
        const onPool = LostConnection.retryWhileLost(pool)
        if (busy) return onPool
        busy = true
        // given back while still ours, so no other statement is running on it then
        return Effect.flatMap(kept.get, use).pipe(
          Effect.tapError(() => kept.drop),
          Effect.ensuring(free),
          Effect.catchAll(() => onPool)
        )
      })
    const borrow = (pool: Effect.Effect<Connection, SqlError, Scope.Scope>) =>
      Effect.suspend(() => {
        if (busy) return pool
        busy = true
        return Effect.zipRight(
          Effect.addFinalizer(() => free),
          Effect.catchAll(kept.get, () => pool)
        )
      })
    return Object.assign(run, { borrow })
  })
