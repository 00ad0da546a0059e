import type { ParseResult } from "effect"
import { Either, Schema } from "effect"
import type { ApprovalRequest } from "../ApprovalRequest.js"
import type { UnsequencedEvent } from "../AuditEvent.js"
import type { Recorded } from "../Decision.js"
import type { SessionApproval } from "../SessionApproval.js"
import * as EntityCodecs from "./store/codecs.js"

/**
 * SQL rows <-> encoded entities. Each row holds its entity encoded as JSON text; `internal/store/codecs.ts`
 * turns encoded values into entities. Reading, cache: a bounded LRU map keyed by the exact JSON text
 * (equal text decodes to an equal value), seeded with each text the store writes and the very
 * encoded value it was written from, so reading back what this process wrote costs neither parse
 * nor check. Cached values are shared, so they are frozen.
 */

/** BIGINT columns: SQLite returns numbers, PostgreSQL returns strings. */
const DbInt = Schema.Union(Schema.Number, Schema.NumberFromString)
const decodeDbInt = Schema.decodeUnknownEither(DbInt)
const parseJson = Schema.decodeUnknownEither(Schema.parseJson())
/** `JSON.parse`; the Schema's `parseJson` (a few µs more a call) only to name what is not JSON. */
const parseText = (text: string): Either.Either<unknown, ParseResult.ParseError> => {
  try {
    return Either.right(JSON.parse(text))
  } catch {
    return parseJson(text)
  }
}

/**
 * A bounded map from JSON text to its decoded, frozen value, least recently used out first (in
 * two generations: a hit in the old one moves to the young one; when the young one fills up, the
 * old one is dropped whole). O(1) per call, no per-entry bookkeeping.
 */
class TextCache<A> {
  private young = new Map<string, A>()
  private old = new Map<string, A>()
  private readonly generation: number
  constructor(capacity: number) {
    this.generation = Math.max(1, Math.ceil(capacity / 2))
  }
  get(text: string): A | undefined {
    const young = this.young.get(text)
    if (young !== undefined) return young
    const old = this.old.get(text)
    if (old !== undefined) {
      this.old.delete(text)
      this.set(text, old)
    }
    return old
  }
  set(text: string, value: A): void {
    this.young.set(text, value)
    if (this.young.size >= this.generation) {
      this.old = this.young
      this.young = new Map()
    }
  }
  get size(): number {
    return this.young.size + this.old.size
  }
}

/**
 * One JSON column: encoded values to text and back, through the cache.
 */
export interface Column<I> {
  /**
   * The text of an encoded value; the cache learns it when the value is what the text parses to:
   * frozen (made by the codec's own encoding), or `faithful` as the caller knows it.
   */
  readonly write: (encoded: I, faithful?: boolean) => string
  /** The encoded value in a column's text (`JSON.parse`, or the cache); the codec checks it. */
  readonly read: (text: unknown) => Either.Either<unknown, ParseResult.ParseError>
  /** entries held (tests) */
  readonly size: () => number
}

/**
 * A column with a cache of `capacity` texts (0: no cache). `learnReads`: text read from elsewhere
 * is cached too (parsed, then checked and frozen by the codec), so reading it again parses nothing.
 */
export const column = <I>(capacity = 4096, learnReads = false): Column<I> => {
  const cache = capacity > 0 ? new TextCache<unknown>(capacity) : undefined
  return {
    write: (encoded, faithful = Object.isFrozen(encoded)) => {
      const text = JSON.stringify(encoded)
      // not any value: one the codec left to the Schema may hold what JSON does not carry (NaN)
      if (cache !== undefined && faithful && cache.get(text) === undefined) cache.set(text, encoded)
      return text
    },
    read: (text) => {
      if (typeof text !== "string") return Either.right(text)
      const hit = cache?.get(text)
      if (hit !== undefined) return Either.right(hit)
      const parsed = parseText(text)
      if (learnReads && cache !== undefined && Either.isRight(parsed)) cache.set(text, parsed.right)
      return parsed
    },
    size: () => cache?.size ?? 0
  }
}

/**
 * How one entity is written to and read from its JSON column: its codec over a column.
 */
export interface Codec<A> {
  /** The JSON text `Schema.encode` + `JSON.stringify` would write; the cache learns it when frozen. */
  readonly json: (value: A) => Either.Either<string, ParseResult.ParseError>
  /** The entity in a column's text: from the cache, else decoded (and cached). */
  readonly read: (text: unknown) => Either.Either<A, ParseResult.ParseError>
  /** entries held (tests) */
  readonly size: () => number
}

const textCodec = <A, I>(codec: EntityCodecs.Codec<A, I>, capacity: number): Codec<A> => {
  const col = column<I>(capacity)
  const cache = capacity > 0 ? new TextCache<A>(capacity) : undefined
  return {
    json: (value) => Either.map(codec.encode(value), col.write),
    read: (text) => {
      const hit = typeof text === "string" ? cache?.get(text) : undefined
      if (hit !== undefined) return Either.right(hit)
      const encoded = col.read(text)
      if (Either.isLeft(encoded)) return Either.left(encoded.left)
      const decoded = codec.decode(encoded.right)
      // text from elsewhere: the decoded value, so the next read is a hit
      if (cache !== undefined && typeof text === "string" && Either.isRight(decoded)) cache.set(text, decoded.right)
      return decoded
    },
    size: () => col.size() + (cache?.size ?? 0)
  }
}

/**
 * Text codecs with their own caches, for the property tests and the W3 bench (the SQL driver
 * keeps a `column` per entity under the store's codecs). `capacity` bounds each cache; 0 turns
 * caching off.
 *
 * @internal
 */
export const makeCodecs = (capacity = 4096) => {
  const codecs = EntityCodecs.makeCodecs()
  return {
    request: textCodec(codecs.request, capacity),
    event: textCodec(codecs.event, capacity),
    approval: textCodec(codecs.approval, capacity),
    decision: textCodec(codecs.decision, 0)
  }
}

export type Codecs = ReturnType<typeof makeCodecs>

/** The parsed value when the check says the Schema would decode `text` to it; else `undefined`. */
const fastDecoder = (check: (u: unknown) => boolean) => (text: string): unknown => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  return check(parsed) ? parsed : undefined
}

/** The fast path alone, for the property tests. */
export const fastDecode = {
  request: fastDecoder(EntityCodecs.checks.request),
  event: fastDecoder(EntityCodecs.checks.event),
  approval: fastDecoder(EntityCodecs.checks.approval)
}

/** The texts the pickers produce, without the cache (for the property tests). */
export const encodedText: {
  readonly request: (value: ApprovalRequest) => string
  readonly event: (value: UnsequencedEvent) => string
  readonly approval: (value: SessionApproval) => string
  readonly decision: (value: Recorded) => string
} = EntityCodecs.encodedText

/** A BIGINT column's value. */
export const dbInt = (value: unknown): Either.Either<number, ParseResult.ParseError> =>
  typeof value === "number" ? Either.right(value) : decodeDbInt(value)
