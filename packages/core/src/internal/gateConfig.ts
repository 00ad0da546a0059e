/**
 * The gate's settings read from Effect `Config`: the policy file (and whether to follow its
 * changes) and the durations. A value that is present but unusable is a `ConfigError` naming its
 * key; the policy file's own problems are the `PolicyInvalid` that loading it gives.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Config, ConfigError, Duration, Effect, Either, Option, Stream } from "effect"
import * as Limits from "../Limits.js"
import * as Policy from "../Policy.js"
import type { PolicyInvalid } from "../ToolGateError.js"
import type { Options } from "./gate/contract.js"

/**
 * What configuration gives a gate.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConfigInput {
  /** the policy file (`.json`, `.yaml`, `.yml`) */
  readonly policy: string
  /** follow the file: enforce each valid version saved while the gate runs (default `false`) */
  readonly watchPolicy?: boolean | undefined
  /** the time a human has to answer when a rule gives none: replaces the file's `ttlMs` */
  readonly ttl?: Duration.Duration | undefined
  /** how long before expiry the `approval.expiring` warning comes (default 1 minute) */
  readonly warnBefore?: Duration.Duration | undefined
  /** how often overdue requests are expired (default 1 second) */
  readonly sweepInterval?: Duration.Duration | undefined
}

const durationFields = ["ttl", "warnBefore", "sweepInterval"] as const

/** A duration from 1 ms to a year, or why not (the gate refuses others). */
const checkDuration = (duration: Duration.Duration): Either.Either<Duration.Duration, string> =>
  Either.match(Limits.ttlMillis("duration", duration), {
    onLeft: (error) => Either.left(error.message),
    onRight: () => Either.right(duration)
  })

/** An optional duration under `name`; a value that is not one from 1 ms to a year names the key. */
const durationAt = (name: string): Config.Config<Duration.Duration | undefined> =>
  Config.nested(
    Config.mapOrFail(Config.duration(), (duration) =>
      Either.mapLeft(checkDuration(duration), (message) => ConfigError.InvalidData([], message))),
    name
  ).pipe(Config.option, Config.map(Option.getOrUndefined))

/**
 * The settings under their default keys: `TOOLGATE_POLICY` (required), `TOOLGATE_POLICY_WATCH`,
 * `TOOLGATE_TTL`, `TOOLGATE_WARN_BEFORE`, `TOOLGATE_SWEEP_INTERVAL` (durations such as
 * `10 minutes`).
 */
export const config: Config.Config<ConfigInput> = Config.all({
  policy: Config.string("TOOLGATE_POLICY"),
  watchPolicy: Config.withDefault(Config.boolean("TOOLGATE_POLICY_WATCH"), false),
  ttl: durationAt("TOOLGATE_TTL"),
  warnBefore: durationAt("TOOLGATE_WARN_BEFORE"),
  sweepInterval: durationAt("TOOLGATE_SWEEP_INTERVAL")
})

/**
 * Reads a wrapped configuration, checking the durations of one a caller assembled (their errors
 * then name the field, since the caller's keys are not known here).
 */
export const read = <A extends ConfigInput>(wrapped: Config.Config.Wrap<A>): Config.Config<A> =>
  Config.unwrap(wrapped).pipe(
    Config.mapOrFail((input) => {
      for (const field of durationFields) {
        const duration = input[field]
        const checked = duration === undefined ? undefined : checkDuration(duration)
        if (checked !== undefined && Either.isLeft(checked)) {
          return Either.left(ConfigError.InvalidData([field], checked.left))
        }
      }
      return Either.right(input)
    })
  )

/** The policy as configured: the file's, with `ttl` as its default approval TTL when given. */
const withTtl = (ttl: Duration.Duration | undefined) => (policy: Policy.Policy) =>
  ttl === undefined ? Effect.succeed(policy) : Policy.make({ ...policy.input, ttlMs: Duration.toMillis(ttl) })

/**
 * The gate's options from configuration: the policy loaded from its file (and followed, with
 * `watchPolicy`), the durations, over `rest` (hooks, limits, ...).
 */
export const options = (
  input: ConfigInput,
  rest: Omit<Options, "policy" | "reload"> = {}
): Effect.Effect<Options, PolicyInvalid, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const configured = withTtl(input.ttl)
    const policy = yield* Effect.flatMap(Policy.load(input.policy), configured)
    const fs = yield* FileSystem.FileSystem
    const reload = input.watchPolicy === true
      ? Policy.watch(input.policy).pipe(
        Stream.provideService(FileSystem.FileSystem, fs),
        Stream.mapEffect((reload) =>
          reload._tag === "Rejected"
            ? Effect.succeed(reload)
            : Effect.match(configured(reload.policy), {
              onFailure: (error): Policy.Reload => Policy.Reload.Rejected({ error, source: reload.source }),
              onSuccess: (policy): Policy.Reload => Policy.Reload.Loaded({ policy, source: reload.source })
            })
        )
      )
      : undefined
    return {
      ...rest,
      policy,
      ...(reload !== undefined ? { reload } : {}),
      ...(input.warnBefore !== undefined ? { warnBefore: input.warnBefore } : {}),
      ...(input.sweepInterval !== undefined ? { sweepInterval: input.sweepInterval } : {})
    }
  })
