/**
 * Observability of the gate: a span for each operation (`toolgate.*`, see docs/observability.md)
 * and the metrics of `ToolGateMetrics`. Attributes name the call (tool, session, call id, agent),
 * what the gate answered (decision, outcome, rule, policy version, request), never the arguments
 * unless the gate's options ask for them (`traceArgs`).
 *
 * Spans are made only when a tracer other than Effect's built-in one is installed: the built-in
 * one records nothing, and making its span (a fiber-runtime step, the span object, the parent
 * in the context, the end) on every decision was work nobody could see. Attributes are computed
 * once the operation ended, from what it returned.
 */
import {
  Cause,
  Clock,
  Context,
  Effect,
  Exit,
  type Fiber,
  FiberRef,
  Metric,
  type MetricLabel,
  Option,
  Tracer
} from "effect"
import type * as ApprovalRequest from "../../ApprovalRequest.js"
import type { ApprovalStore } from "../../ApprovalStore.js"
import * as Decision from "../../Decision.js"
import * as PauseSignal from "../../PauseSignal.js"
import * as ToolCall from "../../ToolCall.js"
import * as ToolGateMetrics from "../../ToolGateMetrics.js"
import type { Allowed } from "./contract.js"

/** The tracer a program has when none is installed: its spans go nowhere. */
const builtInTracer = Effect.runSync(Effect.tracer)

/** Whether the fiber has a tracer that records spans. */
const tracing = (fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
  Context.get(fiber.currentDefaultServices, Tracer.Tracer) !== builtInTracer

const spanOptions = { kind: "internal", captureStackTrace: false } as const
const rootSpanOptions = { ...spanOptions, root: true } as const

/** `body(span)` in the span `name`, a child of the current span (or a root one). */
const inSpan = <A, E, R>(
  name: string,
  body: (span: Tracer.Span) => Effect.Effect<A, E, R>,
  options?: { readonly root?: boolean }
): Effect.Effect<A, E, R> =>
  Effect.useSpan(
    name,
    options?.root === true ? rootSpanOptions : spanOptions,
    (span) => Effect.withParentSpan(body(span), span)
  )

/**
 * `body` in the span `name` when a tracer that records spans is installed; otherwise
 * `body(undefined)`, as it is.
 */
const span = <A, E, R>(
  name: string,
  body: (span: Tracer.Span | undefined) => Effect.Effect<A, E, R>,
  options?: { readonly root?: boolean }
): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) => tracing(fiber) ? inSpan(name, body, options) : body(undefined))

/** `self` in the span `name`, whose attributes `annotate` sets from the exit. */
const spanned = <A, E, R>(
  name: string,
  self: Effect.Effect<A, E, R>,
  annotate: (span: Tracer.Span, exit: Exit.Exit<A, E>) => void,
  options?: { readonly root?: boolean }
): Effect.Effect<A, E, R> =>
  span(
    name,
    (current) =>
      current === undefined ? self : Effect.onExit(self, (exit) => Effect.sync(() => annotate(current, exit))),
    options
  )

/** Sets the attributes whose value is defined. */
const annotateWith = (span: Tracer.Span, attributes: Record<string, string | number | boolean | undefined>) => {
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) span.attribute(key, value)
  }
}

/**
 * What the gate's spans need of the gate: its policy's version now (for outcomes that name none:
 * a pause, a denial), and whether arguments are shown.
 */
export interface Observed {
  readonly policyVersion: () => string
  readonly traceArgs: boolean
}

type CallAttributes = Pick<ToolCall.ToolCallInput, "id" | "name" | "sessionKey" | "agentId" | "args">

const annotateCall = (span: Tracer.Span, context: Observed, call: CallAttributes) => {
  annotateWith(span, {
    "toolgate.tool": call.name,
    "toolgate.session": call.sessionKey,
    "toolgate.call_id": call.id,
    "toolgate.agent": call.agentId
  })
  if (context.traceArgs) span.attribute("toolgate.args", ToolCall.canonicalArgs((call.args ?? {}) as ToolCall.ToolArgs))
}

const annotateDecision = (span: Tracer.Span, decision: Decision.Decision) =>
  annotateWith(span, {
    "toolgate.decision": decision._tag === "Allow" ? "allow" : decision._tag === "Deny" ? "deny" : "requireApproval",
    "toolgate.via": decision._tag === "Allow" ? decision.via : undefined,
    "toolgate.rule": decision.rule?.id,
    "toolgate.policy_version": decision.policyVersion,
    "toolgate.session_approval_id": decision._tag === "Allow" ? decision.sessionApprovalId : undefined
  })

const annotateRequest = (span: Tracer.Span, context: Observed, request: ApprovalRequest.ApprovalRequest) => {
  annotateCall(span, context, request.toolCall)
  annotateWith(span, {
    "toolgate.request_id": request.requestId,
    "toolgate.outcome": request.status,
    "toolgate.rule": request.rule.id,
    "toolgate.policy_version": request.policyVersion,
    "toolgate.response": request.resolution?.decision
  })
}

/** The answer `authorize` (or `gate`) gave, as the outcome `toolgate.decisions` counts. */
const authorizeOutcome = <E>(
  exit: Exit.Exit<Allowed | PauseSignal.PauseSignal, E>
): ToolGateMetrics.Outcome | undefined => {
  if (Exit.isSuccess(exit)) {
    const result = exit.value
    return PauseSignal.isPauseSignal(result) ? "pending" : result.request !== undefined ? "approved" : "allow"
  }
  const error = Cause.failureOption(exit.cause)
  if (Option.isNone(error)) return undefined
  const denied = error.value as { readonly _tag?: string; readonly outcome?: string }
  if (denied._tag !== "ToolDenied") return undefined
  return denied.outcome === "policy" ? "deny" : denied.outcome === "expired" ? "expired" : "denied"
}

/** The attributes of an `authorize` or `gate` span, from what the call came to. */
const annotateAuthorized = <E>(
  span: Tracer.Span,
  context: Observed,
  input: ToolCall.ToolCallInput,
  exit: Exit.Exit<Allowed | PauseSignal.PauseSignal, E>
) => {
  const outcome = authorizeOutcome(exit)
  if (outcome === undefined) return
  span.attribute("toolgate.outcome", outcome)
  if (Exit.isSuccess(exit)) {
    const result = exit.value
    if (PauseSignal.isPauseSignal(result)) {
      annotateCall(span, context, input)
      annotateWith(span, {
        "toolgate.decision": "requireApproval",
        "toolgate.rule": result.metadata.rule,
        "toolgate.policy_version": context.policyVersion(),
        "toolgate.request_id": result.requestId
      })
      return
    }
    // what runs: the approver's edit, when there was one
    annotateCall(span, context, result.call)
    if (result.decision !== undefined) annotateDecision(span, result.decision)
    if (result.request !== undefined) {
      annotateWith(span, {
        "toolgate.decision": "requireApproval",
        "toolgate.rule": result.request.rule.id,
        "toolgate.policy_version": result.request.policyVersion,
        "toolgate.request_id": result.request.requestId
      })
    }
    return
  }
  const denied = Option.getOrThrow(Cause.failureOption(exit.cause)) as unknown as {
    readonly rule?: string
    readonly requestId?: string
  }
  annotateCall(span, context, input)
  annotateWith(span, {
    "toolgate.decision": denied.requestId === undefined ? "deny" : "requireApproval",
    "toolgate.rule": denied.rule,
    "toolgate.policy_version": context.policyVersion(),
    "toolgate.request_id": denied.requestId
  })
}

/** Counts what `authorize` came to, with the fiber's metric labels (as `Metric.increment` would). */
const countAuthorized = <E>(
  exit: Exit.Exit<Allowed | PauseSignal.PauseSignal, E>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>
) => {
  const outcome = authorizeOutcome(exit)
  if (outcome !== undefined) ToolGateMetrics.decisionsOf("authorize", outcome).unsafeUpdate(1, labels)
}

/** `self` counted when it ends, by what it came to: one continuation. */
const countedAtEnd = <E, R>(
  self: Effect.Effect<Allowed | PauseSignal.PauseSignal, E, R>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>
): Effect.Effect<Allowed | PauseSignal.PauseSignal, E, R> =>
  Effect.matchCauseEffect(self, {
    onFailure: (cause) => {
      countAuthorized(Exit.failCause(cause), labels)
      return Effect.failCause(cause)
    },
    onSuccess: (result) => {
      countAuthorized(Exit.succeed(result), labels)
      return Effect.succeed(result)
    }
  })

/**
 * Who counts an `authorize`'s answer in `toolgate.decisions`: the body itself, with the fiber's
 * metric labels (`countNow` where its answer is known without a further step, `countAtEnd` around
 * the rest), or nobody inside it (`undefined`: its span counts it where it ends). Either way the
 * answer counts once.
 */
export type Tally = ReadonlyArray<MetricLabel.MetricLabel> | undefined

/** Counts the answer `authorize` gives now: an allow, or a policy's deny (a `ToolDenied` of outcome `policy`). */
export const countNow = (tally: Tally, outcome: "allow" | "deny"): void => {
  if (tally !== undefined) ToolGateMetrics.decisionsOf("authorize", outcome).unsafeUpdate(1, tally)
}

/** `self`, whose answer is counted when it ends (unless its span counts it). */
export const countAtEnd = <E, R>(
  tally: Tally,
  self: Effect.Effect<Allowed | PauseSignal.PauseSignal, E, R>
): Effect.Effect<Allowed | PauseSignal.PauseSignal, E, R> => tally === undefined ? self : countedAtEnd(self, tally)

/** `evaluate`, in `toolgate.evaluate` and counted: as `authorize`, one step and one continuation. */
export const evaluate = <E, R>(
  context: Observed,
  input: ToolCall.ToolCallInput,
  self: Effect.Effect<Decision.Decision, E, R>
): Effect.Effect<Decision.Decision, E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    const counted = Effect.map(self, (decision) => {
      ToolGateMetrics.decisionsOf("evaluate", Decision.outcome(decision)).unsafeUpdate(1, labels)
      return decision
    })
    if (!tracing(fiber)) return counted
    return inSpan("toolgate.evaluate", (span) =>
      Effect.onExit(counted, (exit) =>
        Effect.sync(() => {
          if (Exit.isFailure(exit)) return
          annotateCall(span, context, input)
          annotateDecision(span, exit.value)
          span.attribute("toolgate.outcome", Decision.outcome(exit.value))
        })))
  })

/**
 * `authorize`, in `toolgate.authorize` and counted. This is the path of every call, so it takes one
 * step: the fiber is read once for the time `body` judges at (the fiber's clock, as
 * `Clock.currentTimeMillis` would read it), the metric labels and whether a tracer records spans.
 * Untraced, `body` counts its answer itself (an allowed call without a further step); traced, the
 * span counts it where it ends.
 */
export const authorize = <E, R>(
  context: Observed,
  input: ToolCall.ToolCallInput,
  body: (now: number, tally: Tally) => Effect.Effect<Allowed | PauseSignal.PauseSignal, E, R>
): Effect.Effect<Allowed | PauseSignal.PauseSignal, E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const now = Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis()
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    if (!tracing(fiber)) return body(now, labels)
    return inSpan("toolgate.authorize", (span) =>
      Effect.onExit(
        countedAtEnd(body(now, undefined), labels),
        (exit) => Effect.sync(() => annotateAuthorized(span, context, input, exit))
      ))
  })

/**
 * `gate`: `decided` (the authorizations and waits until the call may run or is refused), then
 * `run`, in `toolgate.gate`, whose attributes say what the call came to.
 */
export const gate = <A, E, R, E2>(
  context: Observed,
  input: ToolCall.ToolCallInput,
  decided: Effect.Effect<Allowed, E2>,
  run: (allowed: Allowed) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | E2, R> =>
  span("toolgate.gate", (current) =>
    Effect.flatMap(
      current === undefined
        ? decided
        : Effect.onExit(decided, (exit) => Effect.sync(() => annotateAuthorized(current, context, input, exit))),
      run
    ))

/** An operation on one request (`respond`, `awaitDecision`, `resume`), in its span. */
export const request = <E, R>(
  name: string,
  context: Observed,
  requestId: ApprovalRequest.RequestId,
  self: Effect.Effect<ApprovalRequest.ApprovalRequest, E, R>
): Effect.Effect<ApprovalRequest.ApprovalRequest, E, R> =>
  spanned(name, self, (span, exit) => {
    span.attribute("toolgate.request_id", requestId)
    if (Exit.isSuccess(exit)) annotateRequest(span, context, exit.value)
  })

/** `traced()` when a tracer records the gate's spans, else `untraced()`, which then need not feed them. */
export const whenTraced = <A, E, R>(
  traced: () => Effect.Effect<A, E, R>,
  untraced: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.withFiberRuntime((fiber) => tracing(fiber) ? traced() : untraced())

/** `awaitDecision`, in `toolgate.awaitDecision`. */
export const awaitDecision = <E, R>(
  context: Observed,
  self: (requestId: ApprovalRequest.RequestId) => Effect.Effect<ApprovalRequest.ApprovalRequest, E, R>
) =>
(requestId: ApprovalRequest.RequestId): Effect.Effect<ApprovalRequest.ApprovalRequest, E, R> =>
  request("toolgate.awaitDecision", context, requestId, self(requestId))

/** One sweep, in `toolgate.sweep` (a root span for the background sweeper's). */
export const sweep = <E, R>(
  self: Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, E, R>,
  options?: { readonly root?: boolean }
): Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, E, R> =>
  spanned("toolgate.sweep", self, (span, exit) => {
    if (Exit.isSuccess(exit)) span.attribute("toolgate.expired", exit.value.length)
  }, options)

/** A human's answer this process committed: `toolgate.requests.time_to_answer`. */
export const answered = (request: ApprovalRequest.ApprovalRequest): Effect.Effect<void> =>
  request.resolution === undefined || request.status === "pending" || request.status === "expired"
    ? Effect.void
    : Metric.update(
      ToolGateMetrics.timeToAnswerOf(request.status),
      request.resolution.resolvedAt - request.createdAt
    )

/** An expiry this process committed: `toolgate.requests.expired`. */
export const expired: Effect.Effect<void> = Metric.increment(ToolGateMetrics.expiredRequests)

/**
 * The store with each call timed into `toolgate.store.duration`, by method (`subscribe`, which
 * lives as long as its scope, is not timed).
 */
export const timedStore = (store: ApprovalStore["Type"]): ApprovalStore["Type"] => {
  // as cheap as a measure can be: one step to read the clock and labels, one continuation
  const timed = <A, E, R>(metric: Metric.Metric.Histogram<number>, self: Effect.Effect<A, E, R>) =>
    Effect.withFiberRuntime<A, E, R>((fiber) => {
      const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
      const start = performance.now()
      const done = () => metric.unsafeUpdate(performance.now() - start, labels)
      return Effect.matchCauseEffect(self, {
        onFailure: (cause) => {
          done()
          return Effect.failCause(cause)
        },
        onSuccess: (value) => {
          done()
          return Effect.succeed(value)
        }
      })
    })
  const metrics = Object.fromEntries(
    [...operations, ...readings].map((name) => [name, ToolGateMetrics.storeDurationOf(name)])
  ) as Record<typeof operations[number] | typeof readings[number], Metric.Metric.Histogram<number>>
  // spelled out, so the store keeps one shape (and the compiler checks that none is missed)
  return {
    append: (...args) => timed(metrics.append, store.append(...args)),
    createRequest: (...args) => timed(metrics.createRequest, store.createRequest(...args)),
    resolve: (...args) => timed(metrics.resolve, store.resolve(...args)),
    answer: (...args) => timed(metrics.answer, store.answer(...args)),
    extend: (...args) => timed(metrics.extend, store.extend(...args)),
    markWarned: (...args) => timed(metrics.markWarned, store.markWarned(...args)),
    consume: (...args) => timed(metrics.consume, store.consume(...args)),
    getRequest: (...args) => timed(metrics.getRequest, store.getRequest(...args)),
    findByToolCall: (...args) => timed(metrics.findByToolCall, store.findByToolCall(...args)),
    findRecorded: (...args) => timed(metrics.findRecorded, store.findRecorded(...args)),
    recordDecision: (...args) => timed(metrics.recordDecision, store.recordDecision(...args)),
    listPending: (...args) => timed(metrics.listPending, store.listPending(...args)),
    countPending: timed(metrics.countPending, store.countPending),
    listDue: (...args) => timed(metrics.listDue, store.listDue(...args)),
    listToWarn: (...args) => timed(metrics.listToWarn, store.listToWarn(...args)),
    grant: (...args) => timed(metrics.grant, store.grant(...args)),
    revoke: (...args) => timed(metrics.revoke, store.revoke(...args)),
    revokeWhere: (...args) => timed(metrics.revokeWhere, store.revokeWhere(...args)),
    sessionApprovals: (...args) => timed(metrics.sessionApprovals, store.sessionApprovals(...args)),
    events: (...args) => timed(metrics.events, store.events(...args)),
    tail: (...args) => timed(metrics.tail, store.tail(...args)),
    lastSeq: timed(metrics.lastSeq, store.lastSeq),
    chainLinks: (...args) => timed(metrics.chainLinks, store.chainLinks(...args)),
    subscribe: store.subscribe
  }
}

/** The store's reads that are effects, not functions of arguments. */
const readings = ["countPending", "lastSeq"] as const

const operations = [
  "append",
  "createRequest",
  "resolve",
  "answer",
  "extend",
  "markWarned",
  "consume",
  "getRequest",
  "findByToolCall",
  "findRecorded",
  "recordDecision",
  "listPending",
  "listDue",
  "listToWarn",
  "grant",
  "revoke",
  "revokeWhere",
  "sessionApprovals",
  "events",
  "tail",
  "chainLinks"
] as const
