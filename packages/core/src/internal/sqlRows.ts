import { Effect, Either, ParseResult, Schema } from "effect"
import { ApprovalRequest, Resolution } from "../ApprovalRequest.js"
import { type AuditEvent, UnsequencedEvent } from "../AuditEvent.js"
import { RuleRef } from "../Decision.js"
import { SessionApproval } from "../SessionApproval.js"
import { ToolCall } from "../ToolCall.js"

/**
 * Rows <-> entities. Each row holds its entity as JSON text; reading decodes it with the entity's
 * Schema, which is most of a store call's CPU. Two shortcuts, both proved by property tests
 * (tests/unit/core/sql/rows.test.ts):
 *
 * - Writing: every field of these entities is plain JSON whose Encoded form equals its Type form
 *   (brands exist only at compile time), so `Schema.encode` amounts to keeping the schema's fields
 *   in the schema's order. `json` does that by hand and yields the very text `Schema.encode` +
 *   `JSON.stringify` would.
 * - Reading: a bounded LRU cache keyed by the exact JSON text. Equal text decodes to an equal
 *   value, so a hit returns the value decoded earlier (frozen: it is shared). The store seeds it
 *   with each text it writes (the value being `JSON.parse` of that text, which is what the Schema
 *   decodes it to), so reading back what this process wrote costs no decode; text written by other
 *   processes goes through the Schema.
 */

/** BIGINT columns: SQLite returns numbers, PostgreSQL returns strings. */
const DbInt = Schema.Union(Schema.Number, Schema.NumberFromString)
const decodeDbInt = Schema.decodeUnknownEither(DbInt)

const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key in value) deepFreeze((value as Record<string, unknown>)[key])
  }
  return value
}

type Pick = (value: any) => Record<string, unknown> | undefined

/**
 * Copies the fields of a `Schema.Struct`, in the schema's order, leaving out absent and
 * `undefined` ones (JSON would drop them too); `nested` picks struct-valued fields. `undefined`
 * when a number field is not finite: JSON would write `null`, which no longer decodes, so such a
 * value takes the Schema path (and is not seeded into the cache).
 */
const picker = (
  fields: Schema.Struct.Fields,
  nested: Record<string, Pick> = {}
): Pick => {
  const keys = Object.keys(fields)
  return (value) => {
    const out: Record<string, unknown> = {}
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!
      const field = value[key]
      if (field === undefined) continue
      if (typeof field === "number" && !Number.isFinite(field)) return undefined
      const pick = nested[key]
      if (pick === undefined) {
        out[key] = field
      } else {
        const picked = pick(field)
        if (picked === undefined) return undefined
        out[key] = picked
      }
    }
    return out
  }
}

/** A bounded LRU map from JSON text to its decoded, frozen value. */
class TextCache<A> {
  private readonly map = new Map<string, A>()
  constructor(readonly capacity: number) {}
  get(text: string): A | undefined {
    const value = this.map.get(text)
    if (value !== undefined) {
      this.map.delete(text)
      this.map.set(text, value)
    }
    return value
  }
  set(text: string, value: A): void {
    this.map.delete(text)
    this.map.set(text, value)
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!)
  }
  get size(): number {
    return this.map.size
  }
}

/**
 * How one entity is written to and read from its JSON column.
 */
export interface Codec<A> {
  /** The JSON text `Schema.encode` + `JSON.stringify` would write; the cache learns it. */
  readonly json: (value: A) => Either.Either<string, ParseResult.ParseError>
  /** The entity in a column's text: from the cache, else decoded with the Schema (and cached). */
  readonly read: (text: unknown) => Either.Either<A, ParseResult.ParseError>
  /** entries held (tests) */
  readonly size: () => number
}

const makeCodec = <A, I>(schema: Schema.Schema<A, I>, pick: Pick, capacity: number): Codec<A> => {
  const decode = Schema.decodeUnknownEither(Schema.parseJson(schema))
  const encode = Schema.encodeEither(Schema.parseJson(schema))
  const cache = new TextCache<A>(capacity)
  return {
    json: (value) => {
      const picked = pick(value)
      if (picked === undefined) return encode(value)
      const text = JSON.stringify(picked)
      if (capacity > 0 && cache.get(text) === undefined) cache.set(text, deepFreeze(JSON.parse(text)))
      return Either.right(text)
    },
    read: (text) => {
      if (typeof text === "string") {
        const hit = cache.get(text)
        if (hit !== undefined) return Either.right(hit)
      }
      const decoded = decode(text)
      if (Either.isRight(decoded) && typeof text === "string" && capacity > 0) {
        cache.set(text, deepFreeze(decoded.right))
      }
      return decoded
    },
    size: () => cache.size
  }
}

const pickToolCall = picker(ToolCall.fields)
const pickRequest = picker(ApprovalRequest.fields, {
  toolCall: pickToolCall,
  rule: picker(RuleRef.fields),
  resolution: picker(Resolution.fields)
})
const pickEvent = picker(UnsequencedEvent.fields)
const pickApproval = picker(SessionApproval.fields)

/**
 * Codecs with their own caches (a store holds one set). `capacity` bounds each cache; 0 turns
 * caching off.
 *
 * @internal
 */
export const makeCodecs = (capacity = 4096) => ({
  request: makeCodec(ApprovalRequest, pickRequest, capacity),
  event: makeCodec(UnsequencedEvent, pickEvent, capacity),
  approval: makeCodec(SessionApproval, pickApproval, capacity)
})

export type Codecs = ReturnType<typeof makeCodecs>

/** The texts the pickers produce, without the cache (for the property tests). */
export const encodedText = {
  request: (value: ApprovalRequest) => JSON.stringify(pickRequest(value)),
  event: (value: UnsequencedEvent) => JSON.stringify(pickEvent(value)),
  approval: (value: SessionApproval) => JSON.stringify(pickApproval(value))
}

/** Reads one column of every row with `codec`; the first failure fails them all. */
const readAll = <A>(
  rows: ReadonlyArray<Record<string, unknown>>,
  column: string,
  codec: Codec<A>
): Effect.Effect<Array<A>, ParseResult.ParseError> => {
  const out: Array<A> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const decoded = codec.read(rows[i]![column])
    if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
    out[i] = decoded.right
  }
  return Effect.succeed(out)
}

const dbInt = (value: unknown): Either.Either<number, ParseResult.ParseError> =>
  typeof value === "number" ? Either.right(value) : decodeDbInt(value)

export const requests = (codecs: Codecs) => (rows: ReadonlyArray<Record<string, unknown>>) =>
  readAll(rows, "request", codecs.request)

export const approvals = (codecs: Codecs) => (rows: ReadonlyArray<Record<string, unknown>>) =>
  readAll(rows, "approval", codecs.approval)

export const events = (codecs: Codecs) =>
(rows: ReadonlyArray<Record<string, unknown>>): Effect.Effect<Array<AuditEvent>, ParseResult.ParseError> => {
  const out: Array<AuditEvent> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    const seq = dbInt(row.seq)
    if (Either.isLeft(seq)) return Effect.fail(seq.left)
    const event = codecs.event.read(row.event)
    if (Either.isLeft(event)) return Effect.fail(event.left)
    out[i] = { seq: seq.right, ...event.right }
  }
  return Effect.succeed(out)
}

/** `seq` of each row, ascending; a `NULL` (the `MAX` of an empty log) reads as 0. */
export const seqs = (rows: ReadonlyArray<Record<string, unknown>>): Effect.Effect<Array<number>, ParseResult.ParseError> => {
  const out: Array<number> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const value = rows[i]!.seq
    if (value === null) {
      out[i] = 0
      continue
    }
    const seq = dbInt(value)
    if (Either.isLeft(seq)) return Effect.fail(seq.left)
    out[i] = seq.right
  }
  return Effect.succeed(out.sort((a, b) => a - b))
}
