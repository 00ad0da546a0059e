/**
 * The policy a gate enforces, switched whole when a reload brings another version. The gate's
 * parts hold one `Policy` that reads the current version on every use: a judgement is one
 * `evaluate` (or `match`), so a call is judged wholly by one version, and its decision names that
 * version (`policyVersion`). A switch is audited (`policy.loaded`) before it takes effect; a
 * rejected file, or a switch whose event cannot be written, keeps the policy the gate has.
 */
import { Clock, Effect, Stream } from "effect"
import type * as Scope from "effect/Scope"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as AuditEvent from "../../AuditEvent.js"
import type { Policy, Reload } from "../../Policy.js"

export interface PolicySwitch {
  /** reads the version in force at each use */
  readonly policy: Policy
  /** follows `reload` in the background, for as long as the scope lasts */
  readonly follow: (reload: Stream.Stream<Reload>) => Effect.Effect<void, never, Scope.Scope>
}

export const make = (initial: Policy, store: ApprovalStore["Type"]): PolicySwitch => {
  let current = initial
  const policy: Policy = {
    get version() {
      return current.version
    },
    get default() {
      return current.default
    },
    get ttlMs() {
      return current.ttlMs
    },
    get rules() {
      return current.rules
    },
    get warnings() {
      return current.warnings
    },
    get input() {
      return current.input
    },
    evaluate: (call) => current.evaluate(call),
    match: (call) => current.match(call)
  }

  const switchTo = (next: Policy, source: string) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) => store.append([AuditEvent.policyLoaded(next.version, current.version, now, source)])
    ).pipe(
      Effect.zipRight(Effect.sync(() => {
        current = next
      })),
      Effect.zipRight(Effect.logInfo(`tool-gate: enforcing policy ${next.version} from ${source}`)),
      Effect.catchAll((error) =>
        Effect.logError(
          `tool-gate: the policy from ${source} is not enforced (its policy.loaded event could not be written); ` +
            `the gate keeps policy ${current.version}`,
          error
        )
      )
    )

  const apply = (reload: Reload) =>
    reload._tag === "Rejected"
      ? Effect.logWarning(
        `tool-gate: the policy file ${reload.source} was not loaded; the gate keeps policy ${current.version}: ${reload.error.message}`
      )
      : reload.policy.version === current.version
      ? Effect.void
      : switchTo(reload.policy, reload.source)

  const follow = (reload: Stream.Stream<Reload>) => Effect.asVoid(Effect.forkScoped(Stream.runForEach(reload, apply)))

  return { policy, follow }
}
