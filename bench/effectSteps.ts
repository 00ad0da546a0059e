/**
 * Effect steps: the operations the Effect runtime runs for some work, counted on every fiber the
 * work starts (its layers' background fibers too, when they are built inside it), through the
 * runtime's own hook (`RuntimeFlags.OpSupervision`, a `Supervisor`'s `onEffect`). Unlike time or
 * CPU, a count does not move with the machine's load: work a change saves shows as fewer steps in
 * every run. Steps of calls made one after another are exact; of calls in flight together they
 * depend a little on how the calls meet in batches.
 */
import { Effect, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"

/** Counts the steps of every fiber run under it (see `counted`). */
export class StepCounter extends Supervisor.AbstractSupervisor<number> {
  private steps = 0
  get value(): Effect.Effect<number> {
    return Effect.sync(() => this.steps)
  }
  /** the steps counted so far */
  get count(): number {
    return this.steps
  }
  override onEffect(): void {
    this.steps++
  }
}

/** `effect`, with the steps of its fibers and of every fiber they start counted by `counter`. */
export const counted = <A, E, R>(effect: Effect.Effect<A, E, R>, counter: StepCounter): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.supervised(counter),
    Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
  )

/** The steps per call of `call`, made `times` times by `run` (one after another, or in flight), rounded. */
export const stepsPer = <E, R>(
  counter: StepCounter,
  times: number,
  run: Effect.Effect<void, E, R>
): Effect.Effect<number, E, R> =>
  Effect.suspend(() => {
    const before = counter.count
    return Effect.map(run, () => Math.round((counter.count - before) / times))
  })
