/**
 * A gate on the memory store that a test session can drive through every audit event type: a
 * shadow policy (for `policy.shadow`) and a reload held back until the session releases it (for
 * `policy.loaded`).
 */
import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
import { Deferred, Effect, Layer, Stream } from "effect"

export const policy = Policy.unsafeMake({ requireApproval: ["bash", "rm"], ttlMs: 120_000 })
export const shadowPolicy = Policy.unsafeMake({ deny: ["ls", "rm"], requireApproval: ["bash"] })
/** the policy the held-back reload brings, from "policy.yaml" */
export const reloaded = Policy.unsafeMake({ requireApproval: ["bash"] })

/** A fresh gate layer (each holds its own reload) and the effect that releases its reload. */
export const makeEveryEventGate = () => {
  const release = Effect.runSync(Deferred.make<void>())
  const reload = Stream.fromEffect(
    Effect.as(Deferred.await(release), Policy.Reload.Loaded({ policy: reloaded, source: "policy.yaml" }))
  )
  const Gate = ToolGate.layer({ policy, shadowPolicy, sweepInterval: "1 second", reload }).pipe(
    Layer.provideMerge(ApprovalStore.layerMemory)
  )
  /** Releases the reload and waits until the gate enforces it. */
  const loadReloaded = Effect.zipRight(
    Deferred.succeed(release, undefined),
    Effect.flatMap(
      ToolGate.ToolGate,
      (gate) => Effect.yieldNow().pipe(Effect.repeat({ until: () => gate.policy.version === reloaded.version }))
    )
  )
  return { Gate, loadReloaded }
}
