/**
 * A tracer that records every span it makes (Effect's own span objects, kept in order of start),
 * for tests that check which spans an operation makes, with which attributes and parents.
 */
import { Effect, Option, Tracer } from "effect"

export interface Recording {
  readonly tracer: Tracer.Tracer
  readonly spans: Array<Tracer.Span>
}

const builtIn = Effect.runSync(Effect.tracer)

export const make = (): Recording => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) => {
      const span = builtIn.span(name, parent, context, links, startTime, kind, options)
      spans.push(span)
      return span
    },
    context: (f, fiber) => builtIn.context(f, fiber)
  })
  return { tracer, spans }
}

/** The spans named `name`, in order of start. */
export const named = (recording: Recording, name: string) => recording.spans.filter((span) => span.name === name)

/** A span's attributes as a plain object. */
export const attributes = (span: Tracer.Span): Record<string, unknown> =>
  Object.fromEntries((span as unknown as { attributes: Map<string, unknown> }).attributes)

/** The name of a span's parent, when it has one. */
export const parentName = (span: Tracer.Span): string | undefined =>
  Option.match(span.parent, {
    onNone: () => undefined,
    onSome: (parent) => parent._tag === "Span" ? parent.name : `external:${parent.spanId}`
  })

/** Whether a span's parent is `parent` itself. */
export const isChildOf = (span: Tracer.Span, parent: Tracer.Span) =>
  Option.isSome(span.parent) && span.parent.value.spanId === parent.spanId

/** Whether the span ended, successfully or not. */
export const ended = (span: Tracer.Span) => span.status._tag === "Ended"
