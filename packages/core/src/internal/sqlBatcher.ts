import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Exit, Queue, Scope } from "effect"
import { CALLS_BEFORE_TURN, eventLoopTurn } from "./eventLoopTurn.js"
import * as KeptConnection from "./keptConnection.js"
import * as LostConnection from "./lostConnection.js"

/**
 * Group commit for one store's statements. A call that finds the store idle runs at once, on its
 * own fiber (no hand-off, so a lone caller pays nothing for batching). Calls that arrive while
 * one runs queue up, and a worker fiber then runs them in batches on one reserved connection:
 * first the batch's reads (each alone), then all its writes in ONE transaction, committed once.
 *
 * With a synchronous driver (bun:sqlite, better-sqlite3) a call never waits for I/O, so calls
 * would never overlap and nothing would batch. So a write that finds the store idle but comes
 * from another fiber than the write before it, or right after a batch of several callers' writes
 * (signs of many callers in flight), first yields: the other runnable fibers reach their own
 * calls, which queue behind it and commit with it. With a synchronous driver it yields on while
 * its yields bring more calls (up to a full batch): callers started one after another, as a
 * stream's `mapEffect` starts them, queue behind it too. (Without the second sign, the caller that
 * led a batch, being the last writer, would commit its next call alone on every round.)
 *
 * What callers see is what one transaction per call gives them:
 * - each write body runs whole, after the bodies queued before it, so its conditional updates
 *   see their effects (exactly-once holds), and its result is released only after COMMIT;
 * - a failed COMMIT fails every write of the batch (none of them was applied);
 * - when one body fails, the batch is rolled back and each of its writes runs again in a
 *   transaction of its own, so one caller's failure never fails (or leaks into) another's;
 * - sequence numbers are assigned in run order and committed together: seq order = commit order.
 *
 * Calls of one kind can join a `Group`: the calls of a batch that joined it run as ONE body with
 * all their inputs (a multi-row statement instead of one statement each), at the place of the
 * first of them. That is the order one transaction per call would give had those calls run one
 * after another, which they could have: they were all in flight together. When the merged body
 * fails, each of its calls runs again alone, as above. A group may settle some of a batch's calls
 * before its transaction (`Group.ahead`: PostgreSQL's claims, written in one statement of their
 * own); the transaction then runs the rest.
 *
 * A fiber calling a store on a synchronous driver in a loop lets the rest of the process run:
 * Effect's runtime yields a busy fiber after 2,048 steps, but counts them from the fiber's last
 * resumption, and each call's `reserve` (the SQLite clients' semaphore) is one, resumed at once.
 * So a fiber making lone calls one after another would never yield: the log tailer, the waiters it
 * wakes, the audit stream's readers, timers and every request of a server in the process would
 * wait for the loop to end. Here, after `CALLS_BEFORE_TURN` lone calls in a row, the next one first
 * lets the event loop turn (`eventLoopTurn.ts`), as each call of an asynchronous driver does.
 *
 * Bodies find their connection as `SqlClient.TransactionConnection`. A call made inside a
 * transaction of the caller's own (`SqlClient.TransactionConnection` in its context) joins no batch:
 * with `inTransaction` given, it runs in the caller's transaction (a write through `inTransaction`).
 */
export interface Batcher {
  readonly read: <A, E>(body: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>
  /**
   * `single`: the body is one statement, atomic alone, so run by itself it needs no BEGIN/COMMIT;
   * and run again after it took effect it changes nothing more (it may run twice on a kept
   * connection: see `keep`).
   */
  readonly write: <A, E>(body: Effect.Effect<A, E>, single?: boolean) => Effect.Effect<A, E | SqlError>
  /**
   * A call that runs with the other calls of its group in the batch (a read or a write).
   * `single`: alone, its body is one statement (as for `write`); merged with other `single` calls of
   * a `single` group, too.
   */
  readonly join: <I, A, E>(group: Group<I, A, E>, input: I, single?: boolean) => Effect.Effect<A, E | SqlError>
}

/**
 * Calls whose bodies merge: `run` takes the inputs of several calls, in order, and gives each its
 * result, in the same order.
 */
export interface Group<I, A, E> {
  readonly write: boolean
  readonly run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<A>, E>
  /**
   * Its calls made `single` run merged as one statement too: a batch of nothing but such calls
   * needs no `BEGIN`/`COMMIT` (nor the writers' lock a `begin` takes).
   */
  readonly single?: boolean | undefined
  /**
   * Some of a batch's calls settled before its transaction, when all its writes are of this group:
   * each one's exit, or `undefined` to run it in the transaction as usual (after them: its calls
   * are independent but for one id, whose later calls it leaves to the transaction). A call it
   * settled is never run again, even when its exit is a lost connection (a statement whose answer
   * was lost may have committed).
   */
  readonly ahead?: ((inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E> | undefined>>) | undefined
}

/** A group's body for one call. */
export const alone = <I, A, E>(group: Group<I, A, E>, input: I): Effect.Effect<A, E> =>
  Effect.map(group.run([input]), (results) => results[0]!)

export interface Options {
  readonly reserve: Effect.Effect<Connection, SqlError, Scope.Scope>
  /** statements that open a writing transaction (`BEGIN IMMEDIATE`; `BEGIN` + a lock) */
  readonly begin: ReadonlyArray<string>
  /**
   * Run `begin`, `COMMIT` and `ROLLBACK` as prepared statements, kept in the connection's cache
   * (SQLite: else each is compiled again on every transaction). Off for a `begin` of several
   * statements in one text, which only PostgreSQL's simple protocol runs.
   */
  readonly prepared?: boolean | undefined
  /**
   * Keep the reserved connection from one batch to the next (PostgreSQL: taking one from the pool
   * costs the client about as much as a short statement). After a batch in which anything failed it
   * is given back; a `BEGIN` that fails on it, or a lone `single` statement, runs again on a fresh
   * one, and again while it loses that one too (`lostConnection.ts`).
   */
  readonly keep?: boolean | undefined
  /** most calls per batch (bounds how long the write lock is held) */
  readonly maxBatch?: number | undefined
  /**
   * The driver runs each statement to its end before it returns (bun:sqlite, better-sqlite3): the
   * first call of a batch yields on while its yields bring calls. (With a driver that waits for
   * I/O, calls that arrive meanwhile queue anyway: it yields once.)
   */
  readonly synchronous?: boolean | undefined
  /**
   * How a write runs inside the caller's own transaction (a savepoint of it, say); given, calls
   * made there run there, reads as they are. (Decided in the step that queues a call.)
   */
  readonly inTransaction?: (<A, E>(body: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>) | undefined
}

interface Job {
  readonly write: boolean
  readonly single: boolean
  /** the body run alone (a group's call: built when it runs alone) */
  readonly body: Effect.Effect<any, any> | undefined
  readonly group: Group<any, any, any> | undefined
  readonly input: unknown
  exit: Exit.Exit<any, any> | undefined
  /** settled by its group's `ahead`: never run again */
  ahead: boolean
  /** the waiting caller's resumption, once it waits (a queued call) */
  resume: ((exit: Exit.Exit<any, any>) => void) | undefined
  cancelled: boolean
}

/** The body of a job run alone. */
const bodyOf = (job: Job): Effect.Effect<any, any> => job.body ?? alone(job.group!, job.input)

/** Writes that run as one statement with no transaction: one `single` call, or `single` calls of a `single` group. */
const statementAlone = (writes: ReadonlyArray<Job>): boolean =>
  writes.every((job) => job.single) &&
  (writes.length === 1 || (writes[0]!.group?.single === true && writes.every((job) => job.group === writes[0]!.group)))

/** Sets a job's exit and hands it to its caller if it waits (a plain call: no effect per job). */
const settle = (job: Job, exit: Exit.Exit<any, any>): void => {
  job.exit = exit
  job.resume?.(exit)
}

export const make = (options: Options): Effect.Effect<Batcher, never, Scope.Scope> =>
  Effect.gen(function*() {
    const maxBatch = options.maxBatch ?? 256
    const inTransaction = options.inTransaction
    const pending: Array<Job> = []
    let busy = false
    let closed = false
    let lastWriter: unknown = undefined
    // the last batch held writes of several callers: they are likely to write again together
    let crowded = false
    // lone calls run one after another with no yield between them (synchronous drivers)
    let lone = 0
    const signal = yield* Queue.sliding<void>(1)

    const statement = options.prepared
      ? (conn: Connection, text: string) => conn.execute(text, [], undefined)
      : (conn: Connection, text: string) => conn.executeUnprepared(text, [], undefined)

    // one statement (as the store's transactions open) runs as it is: a loop over one costs steps
    const beginOn = (conn: Connection): Effect.Effect<unknown, SqlError> =>
      options.begin.length === 1
        ? statement(conn, options.begin[0]!)
        : Effect.forEach(options.begin, (text) => statement(conn, text), { discard: true })

    /**
     * Runs `jobs` in order, each group's calls merged at the place of its first call; sets each
     * job's exit. `stopOnFailure` (writes, in one transaction): stops at the first failure. Says
     * whether every job succeeded.
     */
    const runMerged = (jobs: ReadonlyArray<Job>, stopOnFailure: boolean): Effect.Effect<boolean> => {
      // the jobs from `start` on, each continuing the chain when its own has run
      const from = (start: number, succeeded: boolean): Effect.Effect<boolean> => {
        let i = start
        while (i < jobs.length && jobs[i]!.exit !== undefined) i++
        if (i === jobs.length) return Effect.succeed(succeeded)
        const job = jobs[i]!
        const next = (): Effect.Effect<boolean> => {
          if (Exit.isSuccess(job.exit!)) return from(i + 1, succeeded)
          return stopOnFailure ? Effect.succeed(false) : from(i + 1, false)
        }
        const members = job.group === undefined ? [] : jobs.filter((other, j) => j >= i && other.group === job.group)
        if (members.length < 2) {
          return Effect.matchCauseEffect(bodyOf(job), {
            onFailure: (cause) => {
              job.exit = Exit.failCause(cause)
              return next()
            },
            onSuccess: (value) => {
              job.exit = Exit.succeed(value)
              return next()
            }
          })
        }
        return Effect.matchCauseEffect(job.group!.run(members.map((member) => member.input)), {
          onFailure: (cause) => {
            if (stopOnFailure) {
              job.exit = Exit.failCause(cause)
              return next()
            }
            // a read: each call again alone, so one call's failure stays its own
            return Effect.flatMap(runEachAlone(members), next)
          },
          onSuccess: (values) => {
            members.forEach((member, k) => member.exit = Exit.succeed(values[k]))
            return next()
          }
        })
      }
      return Effect.suspend(() => from(0, true))
    }

    /** Runs each job's body on its own, one after another; sets each job's exit. */
    const runEachAlone = (jobs: ReadonlyArray<Job>): Effect.Effect<void> =>
      Effect.forEach(jobs, (job) =>
        Effect.map(Effect.exit(bodyOf(job)), (exit) => {
          job.exit = exit
        }), { discard: true })

    /** The writes `ahead` does not settle, the others' exits set (all, when their group has none). */
    const settledAhead = (writes: ReadonlyArray<Job>): Effect.Effect<ReadonlyArray<Job>> => {
      const ahead = writes[0]!.group?.ahead
      if (ahead === undefined || writes.some((job) => job.group !== writes[0]!.group)) return Effect.succeed(writes)
      return Effect.map(ahead(writes.map((job) => job.input)), (exits) => {
        for (let i = 0; i < writes.length; i++) {
          const exit = exits[i]
          if (exit !== undefined) {
            writes[i]!.exit = exit
            writes[i]!.ahead = true
          }
        }
        return writes.filter((job) => !job.ahead)
      })
    }

    /**
     * Runs `writes` in one transaction, after what their group settles `ahead`; sets each job's
     * exit. `false`: the transaction's `BEGIN` failed, so none of the others ran.
     */
    const runWrites = (conn: Connection, all: ReadonlyArray<Job>, tryAhead = true): Effect.Effect<boolean> => {
      if (statementAlone(all)) {
        // one statement is all-or-nothing: when a merged one fails, each call runs alone
        return Effect.flatMap(
          runMerged(all, true),
          (ran) => ran || all.length === 1 ? Effect.succeed(true) : Effect.as(runEachAlone(all), true)
        )
      }
      const transacted = (writes: ReadonlyArray<Job>) =>
        writes.length === 0 ? Effect.succeed(true) : transact(conn, writes)
      return tryAhead ? Effect.flatMap(settledAhead(all), transacted) : transacted(all)
    }

    /** Runs `writes` in one transaction; sets each job's exit. `false`: its `BEGIN` failed. */
    const transact = (conn: Connection, writes: ReadonlyArray<Job>): Effect.Effect<boolean> => {
      const rollback = Effect.ignore(statement(conn, "ROLLBACK"))
      return Effect.flatMap(Effect.exit(beginOn(conn)), (begun) => {
        if (Exit.isFailure(begun)) {
          return Effect.map(rollback, () => {
            for (const job of writes) job.exit = begun
            return false
          })
        }
        return Effect.flatMap(runMerged(writes, true), (ran) => {
          if (!ran) {
            if (writes.length === 1) return Effect.as(rollback, true)
            return Effect.zipRight(
              rollback,
              Effect.as(
                Effect.forEach(writes, (job) =>
                  Effect.suspend(() => {
                    job.exit = undefined
                    return runWrites(conn, [job], false)
                  }), { discard: true }),
                true
              )
            )
          }
          return Effect.flatMap(Effect.exit(statement(conn, "COMMIT")), (committed) =>
            Exit.isSuccess(committed) ? Effect.succeed(true) : Effect.map(rollback, () => {
              for (const job of writes) {
                job.exit = committed
              }
              return true
            }))
        })
      })
    }

    /**
     * Runs a batch on `conn` (reads first, then writes in one transaction); sets every job's exit.
     * `false`: the writes' `BEGIN` failed, so none of them ran.
     */
    const runOn = (conn: Connection, jobs: ReadonlyArray<Job>): Effect.Effect<boolean> => {
      if (jobs.length === 1) {
        const job = jobs[0]!
        return job.write
          ? runWrites(conn, jobs)
          : Effect.map(Effect.exit(bodyOf(job)), (exit) => {
            job.exit = exit
            return true
          })
      }
      return Effect.flatMap(
        runMerged(
          jobs.filter((job) =>
            !job.write
          ),
          false
        ),
        () => {
          const writes = jobs.filter((job) => job.write)
          return writes.length === 0 ? Effect.succeed(true) : runWrites(conn, writes)
        }
      )
    }

    const failAll = (jobs: ReadonlyArray<Job>, exit: Exit.Exit<unknown, SqlError>) => {
      for (const job of jobs) job.exit = exit
    }

    /**
     * Runs a batch on a connection of its own; sets every job's exit. The reservation's scope and
     * the connection the bodies find are provided together, in one step: the connection's slot is
     * filled once it is reserved. `false`: the writes' `BEGIN` failed, so none of them ran.
     */
    const runOnReserved = (jobs: ReadonlyArray<Job>): Effect.Effect<boolean> =>
      Effect.flatMap(Scope.make(), (scope) => {
        const slot: [Connection, number] = [undefined as unknown as Connection, 0]
        const context = Context.make(Scope.Scope, scope).pipe(Context.add(SqlClient.TransactionConnection, slot))
        const run = Effect.flatMap(Effect.exit(options.reserve), (reserved): Effect.Effect<boolean> => {
          if (Exit.isFailure(reserved)) {
            return Effect.sync(() => {
              failAll(jobs, reserved)
              return true
            })
          }
          slot[0] = reserved.value
          return runOn(reserved.value, jobs)
        })
        return Effect.onExit(Effect.provide(run, context), (exit) => Scope.close(scope, exit))
      })

    /** Something failed, and everything that failed lost its connection. */
    const lostOnly = (jobs: ReadonlyArray<Job>) =>
      jobs.some((job) => LostConnection.failedLost(job.exit!)) &&
      jobs.every((job) => Exit.isSuccess(job.exit!) || LostConnection.failedLost(job.exit!))

    /**
     * What of a batch that ran runs again on another connection, its exits cleared; `undefined`:
     * nothing. All of it when nothing ran (its `BEGIN` failed); when statements that ran alone
     * failed, those (a failed statement changed nothing; one that took effect before its answer was
     * lost changes nothing more).
     */
    const runAgain = (running: ReadonlyArray<Job>, begun: boolean): ReadonlyArray<Job> | undefined => {
      const failed = running.filter((job) => Exit.isFailure(job.exit!) && !job.ahead)
      if (failed.length === 0 || (begun && !(running.every((job) => job.write) && statementAlone(running)))) {
        return undefined
      }
      const again = begun ? failed : running.filter((job) => !job.ahead)
      for (const job of again) job.exit = undefined
      return again
    }

    /**
     * Runs a batch on a connection of its own, and again on another while what failed lost its
     * connection (a pool hands out idle connections the server or something between has ended).
     * A synchronous driver's connection is a file, never lost.
     */
    const runReserved = (jobs: ReadonlyArray<Job>, attempt = 1): Effect.Effect<unknown> =>
      options.synchronous ? runOnReserved(jobs) : Effect.flatMap(runOnReserved(jobs), (begun) => {
        if (attempt > LostConnection.LOST_CONNECTION_RETRIES || !lostOnly(jobs)) return Effect.void
        const again = runAgain(jobs, begun)
        return again === undefined ? Effect.void : runReserved(again, attempt + 1)
      })

    const kept = options.keep ? yield* KeptConnection.make(options.reserve) : undefined

    /** Runs a batch on the kept connection (see `keep`); sets every job's exit. */
    const runKept = (kept: KeptConnection.KeptConnection, jobs: ReadonlyArray<Job>): Effect.Effect<void> =>
      Effect.gen(function*() {
        let running = jobs
        for (let attempt = 1;; attempt++) {
          const conn = yield* Effect.exit(kept.get)
          if (Exit.isFailure(conn)) return failAll(running, conn)
          const begun = yield* Effect.provideService(
            runOn(conn.value, running),
            SqlClient.TransactionConnection,
            [conn.value, 0] as const
          )
          if (running.some((job) => Exit.isFailure(job.exit!))) yield* kept.drop
          // Once more, on a fresh connection (the server may have ended the kept one); then again
          // while what failed lost its connection: the pool's idle ones may be gone too.
          if (attempt > 1 && !(attempt <= LostConnection.LOST_CONNECTION_RETRIES && lostOnly(running))) return
          const again = runAgain(running, begun)
          if (again === undefined) return
          running = again
        }
      })

    /** Runs a batch (reads first, then writes in one transaction); sets every job's exit. */
    const runBatch = (jobs: ReadonlyArray<Job>): Effect.Effect<unknown> => {
      crowded = jobs.length > 1 && jobs.filter((job) => job.write).length > 1
      return kept === undefined ? runReserved(jobs) : runKept(kept, jobs)
    }

    /** The next batch (none when nothing is queued). */
    const nextBatch = Effect.sync(() => {
      const batch: Array<Job> = []
      while (pending.length > 0 && batch.length < maxBatch) {
        const job = pending.shift()!
        if (!job.cancelled) batch.push(job)
      }
      return batch
    })

    /**
     * After a batch: calls queued meanwhile go to the worker; else the store is idle (decided in
     * one step with the check, so no call is left behind).
     */
    const handOff = Effect.sync(() => {
      if (pending.length > 0) signal.unsafeOffer(undefined)
      else busy = false
    })

    /** The worker's batches, one after another, until none is queued. */
    const drain: Effect.Effect<void> = Effect.flatMap(nextBatch, (batch) =>
      batch.length === 0 ? handOff : Effect.zipRight(
        Effect.uninterruptible(runBatch(batch)),
        Effect.suspend(() => {
          for (const job of batch) {
            settle(job, job.exit!)
          }
          return drain
        })
      ))
    yield* Effect.forever(Effect.zipRight(Queue.take(signal), drain)).pipe(Effect.forkScoped, Effect.interruptible)

    yield* Effect.addFinalizer(() =>
      Effect.fiberIdWith((id) =>
        Effect.sync(() => {
          closed = true
          for (const job of pending.splice(0)) {
            settle(job, Exit.interrupt(id))
          }
        })
      )
    )

    /** Runs `job` at once on the caller's fiber, then hands the queue (if any) to the worker. */
    const runAlone = (job: Job) =>
      Effect.uninterruptible(Effect.zipRight(runBatch([job]), handOff)).pipe(
        Effect.zipRight(Effect.suspend(() =>
          job.exit!
        ))
      )

    /**
     * The leader's yields with a synchronous driver, until two in a row bring no call or the batch
     * is full (a fiber another one forks takes a yield of its own before it runs: one idle yield
     * does not show that nobody is starting callers); else one.
     */
    const gatherFrom = (idle: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const queued = pending.length
        return Effect.flatMap(Effect.yieldNow(), () => {
          if (pending.length >= maxBatch) {
            return Effect.void
          }
          if (pending.length > queued) {
            return gatherFrom(0)
          }
          return idle === 0 ? gatherFrom(1) : Effect.void
        })
      })
    const gather = options.synchronous ? gatherFrom(0) : Effect.yieldNow()

    /** The leader after its yields: runs the first batch (its own job first) on its own fiber. */
    const runQueued = Effect.uninterruptible(Effect.flatMap(nextBatch, (batch) =>
      Effect.zipRight(
        runBatch(batch),
        Effect.map(handOff, () => {
          for (let i = 1; i < batch.length; i++) {
            settle(batch[i]!, batch[i]!.exit!)
          }
          return batch[0]!
        })
      ))).pipe(Effect.flatMap((leader) =>
        leader.exit!
      ))

    const submit = <A, E>(
      write: boolean,
      single: boolean,
      body: Effect.Effect<A, E> | undefined,
      group?: Group<any, A, E>,
      input?: unknown
    ): Effect.Effect<A, E | SqlError> =>
      Effect.withFiberRuntime<A, E | SqlError>((fiber) => {
        if (
          inTransaction !== undefined &&
          Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)._tag === "Some"
        ) {
          const own = body ?? alone(group!, input)
          return write ? inTransaction(own) : own
        }
        if (closed) return Effect.interrupt
        if (!busy && lone >= CALLS_BEFORE_TURN) {
          // decided again after the yield: other fibers' calls may have come meanwhile
          lone = 0
          return Effect.zipRight(eventLoopTurn, submit(write, single, body, group, input))
        }
        const job: Job = {
          write,
          single,
          body,
          group,
          input,
          exit: undefined,
          ahead: false,
          resume: undefined,
          cancelled: false
        }
        if (!busy) {
          busy = true
          // the fiber itself, not its id: comparing ids hashes them
          const alternating = write && (crowded || (lastWriter !== undefined && lastWriter !== fiber))
          if (write) lastWriter = fiber
          if (!alternating) {
            if (options.synchronous) lone++
            return runAlone(job)
          }
          // Writes from alternating fibers, or the first after a batch of several writers: many
          // callers are likely in flight. This one lets the other runnable fibers go first, so the
          // calls they make queue behind it and commit with it. (A lone caller waits a yield or
          // two, never for company.)
          pending.push(job)
          lone = 0
          return Effect.uninterruptible(Effect.zipRight(gather, runQueued))
        }
        pending.push(job)
        lone = 0
        // Resumed by the batch's runner with the job's exit (the caller's fiber may have yielded
        // before it waits, so the exit may be there already). Interrupted while still queued, the
        // call is dropped: it never runs.
        return Effect.async<A, E | SqlError>((resume) => {
          if (job.exit !== undefined) return resume(job.exit)
          job.resume = resume
          return Effect.sync(() => {
            job.cancelled = true
          })
        })
      })

    return {
      read: (body) => submit(false, false, body),
      write: (body, single = false) => submit(true, single, body),
      join: (group, input, single = false) => submit(group.write, single, undefined, group, input)
    }
  })
