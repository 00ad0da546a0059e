/**
 * The meaning of `@effect/vitest` (`it.effect`, `it.scoped`, `it.live`, `it.layer`) over `bun:test`,
 * which `@effect/vitest` cannot run under.
 *
 * - `it.effect`: runs an Effect with `TestContext` (TestClock, TestRandom...), so TTLs are driven
 *   by `TestClock.adjust`, never by sleeping.
 * - `it.scoped`: the same, plus a `Scope` closed when the test ends.
 * - `it.live`: the real clock (for tests against other processes).
 * - `layer(L)(name, (it) => ...)`: builds `L` once for the whole describe block and provides it
 *   to every test in it; released after the block.
 */
import { afterAll, beforeAll, describe, test } from "bun:test"
import { Cause, Effect, Exit, Layer, Scope, TestContext } from "effect"
import type { Context, TestServices } from "effect"

type TestBody<R> = () => Effect.Effect<unknown, unknown, R>

const toPromise = <E>(effect: Effect.Effect<unknown, E>): Promise<void> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isFailure(exit)) {
      const error = new Error(Cause.pretty(exit.cause))
      error.name = "EffectTestFailure"
      throw error
    }
  })

export interface Methods<R> {
  readonly effect: (name: string, body: TestBody<R | TestServices.TestServices>, timeout?: number) => void
  readonly scoped: (
    name: string,
    body: TestBody<R | Scope.Scope | TestServices.TestServices>,
    timeout?: number
  ) => void
  readonly live: (name: string, body: TestBody<R | Scope.Scope>, timeout?: number) => void
}

/**
 * What each method hands `bun:test`: the body run to a promise that settles when the test ends
 * (its scope, if any, closed by then). Exported so the support's own tests can check that.
 */
export const run = {
  effect: (body: TestBody<TestServices.TestServices>): Promise<void> =>
    toPromise(Effect.suspend(body).pipe(Effect.provide(TestContext.TestContext))),
  scoped: (body: TestBody<Scope.Scope | TestServices.TestServices>): Promise<void> =>
    toPromise(Effect.suspend(body).pipe(Effect.scoped, Effect.provide(TestContext.TestContext))),
  live: (body: TestBody<Scope.Scope>): Promise<void> => toPromise(Effect.suspend(body).pipe(Effect.scoped))
}

const makeMethods = <R>(provide: <A, E>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E>): Methods<R> => ({
  effect: (name, body, timeout) => test(name, () => run.effect(() => provide(body() as never)), timeout),
  scoped: (name, body, timeout) => test(name, () => run.scoped(() => provide(body() as never)), timeout),
  live: (name, body, timeout) => test(name, () => run.live(() => provide(body() as never)), timeout)
})

export const it: Methods<never> = makeMethods((effect) => effect)

/**
 * Builds `self` once for the describe block; every test in it gets the same services.
 */
export const layer =
  <ROut, E>(self: Layer.Layer<ROut, E>) => (name: string, body: (it: Methods<ROut>) => void): void => {
    describe(name, () => {
      let context: Context.Context<ROut> | undefined
      let scope: Scope.CloseableScope | undefined
      beforeAll(async () => {
        scope = Effect.runSync(Scope.make())
        context = await Effect.runPromise(Layer.buildWithScope(self, scope))
      })
      afterAll(async () => {
        if (scope) await Effect.runPromise(Scope.close(scope, Exit.void))
      })
      body(makeMethods<ROut>((effect) => Effect.suspend(() => Effect.provide(effect, context!))))
    })
  }

export { describe }
