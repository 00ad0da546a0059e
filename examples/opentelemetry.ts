// The gate's spans and metrics exported with @effect/opentelemetry (docs/observability.md):
// `bun examples/opentelemetry.ts`. In-memory exporters here, so the example can print what came
// out; a service uses the OTLP (or console) exporters in their place.
import { NodeSdk } from "@effect/opentelemetry"
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader
} from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { Effect, Fiber } from "effect"

const policy = Policy.unsafeMake({
  allow: [{ id: "reads", tool: "read_file" }],
  deny: [{ id: "no-rm", tool: "bash", args: { command: "rm *" }, reason: "no deletions" }],
  requireApproval: [{ id: "deploys", tool: "deploy" }]
})

const spans = new InMemorySpanExporter()
const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
const metricReader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 60_000 })

const Observability = NodeSdk.layer(() => ({
  resource: { serviceName: "release-agent" },
  spanProcessor: new SimpleSpanProcessor(spans),
  metricReader
}))

const agentStep = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  yield* gate.gate(
    { id: "c1", name: "read_file", sessionKey: "s-1", args: { path: "CHANGELOG.md" } },
    () => Effect.void
  )
  yield* Effect.either(gate.authorize({ id: "c2", name: "bash", sessionKey: "s-1", args: { command: "rm -rf /" } }))
  // a deploy waits for a human; here the same program answers it
  const deploying = yield* Effect.fork(gate.gate({ id: "c3", name: "deploy", sessionKey: "s-1" }, () => Effect.void))
  const [request] = yield* Effect.repeat(gate.pending(), { until: (pending) => pending.length > 0 })
  yield* gate.respond(request!.requestId, { decision: "approve_once", respondedBy: "ana" })
  yield* Fiber.join(deploying)
  const asked = yield* gate.authorize({ id: "c4", name: "deploy", sessionKey: "s-1" })
  if (!PauseSignal.isPauseSignal(asked)) throw new Error("expected the deploy to wait")
}).pipe(Effect.withSpan("agent step"))

// The spans, as a tree, with the attributes a trace viewer shows beside each.
const printSpans = () => {
  const finished = spans.getFinishedSpans()
  const print = (parent: string | undefined, depth: number): void => {
    for (const span of finished.filter((span) => span.parentSpanContext?.spanId === parent)) {
      const shown = ["toolgate.tool", "toolgate.outcome", "toolgate.rule"].flatMap((key) =>
        span.attributes[key] === undefined ? [] : [String(span.attributes[key])]
      )
      console.log(`${"  ".repeat(depth)}${span.name}${shown.length > 0 ? `  ${shown.join(" ")}` : ""}`)
      print(span.spanContext().spanId, depth + 1)
    }
  }
  print(undefined, 0)
}

// The gate's metrics, as the reader exported them.
const printMetrics = () => {
  const exported = metrics.getMetrics().at(-1)?.scopeMetrics.flatMap((scope) => scope.metrics) ?? []
  for (const metric of exported.filter((metric) => metric.descriptor.name.startsWith("toolgate."))) {
    for (const point of metric.dataPoints) {
      const tags = Object.entries(point.attributes).map(([key, value]) => `${key}=${String(value)}`).join(",")
      const value = typeof point.value === "number" ? point.value : `count ${point.value.count}`
      console.log(`${metric.descriptor.name}${tags === "" ? "" : `{${tags}}`} ${value}`)
    }
  }
}

const program = Effect.gen(function*() {
  yield* agentStep
  // export the metrics now rather than at the next interval, while the gate is open
  yield* Effect.promise(() => metricReader.forceFlush())
  printSpans()
  printMetrics()
})

Effect.runPromise(
  program.pipe(Effect.provide(ToolGate.layerMemory({ policy, storeMetrics: true })), Effect.provide(Observability))
)
