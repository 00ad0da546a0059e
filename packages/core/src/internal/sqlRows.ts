import type { ParseResult } from "effect"
import { Effect, Either, Schema } from "effect"
import { ApprovalRequest, Resolution, Status } from "../ApprovalRequest.js"
import { type AuditEvent, EventType, Outcome, UnsequencedEvent } from "../AuditEvent.js"
import { Recorded, RuleRef, RuleSource, SessionScope } from "../Decision.js"
import { maxCallLimits } from "../Limits.js"
import { SessionApproval } from "../SessionApproval.js"
import { ToolCall } from "../ToolCall.js"
import { isCleanText } from "./callText.js"
import { fitsPortable } from "./canonical.js"

/**
 * Rows <-> entities. Each row holds its entity as JSON text; decoding it with the entity's
 * Schema was most of a store call's CPU. Three shortcuts, each proved by property tests
 * (tests/unit/core/sql/rows.test.ts):
 *
 * - Writing: every field of these entities is plain JSON whose Encoded form equals its Type form
 *   (brands exist only at compile time), so `Schema.encode` amounts to keeping the schema's fields
 *   in the schema's order. `json` does that by hand and yields the very text `Schema.encode` +
 *   `JSON.stringify` would (the rare value it cannot vouch for takes the Schema).
 * - Reading, fast path: `JSON.parse`, then a hand-written check that says yes only when the
 *   Schema would accept the value unchanged (right types, no unknown keys, nothing the Schema
 *   fills in or strips). Then the parsed value is the decoded one. Anything else (another
 *   version's rows, damage) takes the Schema, which decodes it or names the problem.
 * - Reading, cache: a bounded LRU map keyed by the exact JSON text (equal text decodes to an
 *   equal value), seeded with each text the store writes, so reading back what this process wrote
 *   costs neither parse nor check. Cached values are shared, so they are frozen.
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

// --- the fast path's checks --------------------------------------------------------------------

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const isString = (u: unknown): u is string => typeof u === "string"
const isNumber = (u: unknown): u is number => typeof u === "number"
/** `NonEmptyTrimmedString` (the branded ids) */
const isId = (u: unknown): u is string => typeof u === "string" && u.length > 0 && u.trim() === u
// A call's ids and text, as its schema accepts them under the widest limits a gate may set
const isCallId = (u: unknown): u is string => isId(u) && isCleanText(u, maxCallLimits.maxIdLength)
const isCallText = (maxLength: number) => (u: unknown) => typeof u === "string" && isCleanText(u, maxLength)
/** absent (JSON has no `undefined`) or passing `check` */
const optional = (u: unknown, check: (u: unknown) => boolean) => u === undefined || check(u)
const oneOf = (literals: ReadonlyArray<unknown>) => {
  const set = new Set(literals)
  return (u: unknown) => set.has(u)
}
/** no key outside `keys` (the Schema would strip it, so the parsed value would differ) */
const onlyKeys = (keys: ReadonlyArray<string>) => {
  const set = new Set(keys)
  return (value: Json) => {
    for (const key in value) if (!set.has(key)) return false
    return true
  }
}
/** `ToolArgs` of parsed JSON: any object (JSON values are plain); `__proto__` is left to the Schema */
const isArgs = (u: unknown) =>
  isObject(u) && fitsPortable(u as object, maxCallLimits.maxDepth, maxCallLimits.maxArgsBytes)

const isRuleSource = oneOf(RuleSource.literals)
const isScope = oneOf(SessionScope.literals)
const isStatus = oneOf(Status.literals)
const isResolutionStatus = oneOf(["approved", "denied", "expired"])
const isDecision = oneOf(["approve_once", "approve_session", "deny"])
const isEventType = oneOf(EventType.literals)
const isOutcome = oneOf(Outcome.literals)
const isVia = oneOf(["policy", "sessionApproval", "default"])

const toolCallKeys = onlyKeys(["id", "name", "args", "sessionKey", "agentId", "intentId", "userId", "workingDirectory"])
const isToolCall = (u: unknown) =>
  isObject(u) && toolCallKeys(u) && isCallId(u.id) && isCallId(u.name) &&
  // absent args decode to {}, which the parsed value lacks: the Schema fills them in
  isArgs(u.args) && isCallId(u.sessionKey) &&
  optional(u.agentId, isCallText(maxCallLimits.maxIdLength)) &&
  optional(u.intentId, isCallText(maxCallLimits.maxIdLength)) &&
  optional(u.userId, isCallText(maxCallLimits.maxIdLength)) &&
  optional(u.workingDirectory, isCallText(maxCallLimits.maxPathLength))

const ruleKeys = onlyKeys(["id", "source"])
const isRule = (u: unknown) => isObject(u) && ruleKeys(u) && isString(u.id) && isRuleSource(u.source)

const resolutionKeys = onlyKeys([
  "status",
  "decision",
  "reason",
  "respondedBy",
  "editedArgs",
  "deniedBy",
  "scope",
  "sessionTtlMs",
  "sessionApprovalId",
  "resolvedAt"
])
const isResolution = (u: unknown) =>
  isObject(u) && resolutionKeys(u) && isResolutionStatus(u.status) && optional(u.decision, isDecision) &&
  optional(u.reason, isString) && optional(u.respondedBy, isString) && optional(u.editedArgs, isArgs) &&
  optional(u.deniedBy, (v) => v === "policy") && optional(u.scope, isScope) && optional(u.sessionTtlMs, isNumber) &&
  optional(u.sessionApprovalId, isString) && isNumber(u.resolvedAt)

const requestKeys = onlyKeys([
  "requestId",
  "toolCall",
  "argsDigest",
  "rule",
  "policyVersion",
  "sessionScope",
  "reason",
  "prompt",
  "createdAt",
  "expiresAt",
  "status",
  "resolution",
  "consumedAt",
  "warnedAt"
])
const isRequest = (u: unknown) =>
  isObject(u) && requestKeys(u) && isId(u.requestId) && isToolCall(u.toolCall) && isString(u.argsDigest) &&
  isRule(u.rule) && isString(u.policyVersion) && isScope(u.sessionScope) && isString(u.reason) &&
  isString(u.prompt) && isNumber(u.createdAt) && isNumber(u.expiresAt) && isStatus(u.status) &&
  optional(u.resolution, isResolution) && optional(u.consumedAt, isNumber) && optional(u.warnedAt, isNumber)

const eventKeys = onlyKeys([
  "at",
  "type",
  "outcome",
  "sessionKey",
  "toolCallId",
  "toolName",
  "requestId",
  "rule",
  "ruleSource",
  "policyVersion",
  "reason",
  "actor",
  "via",
  "sessionApprovalId",
  "args",
  "editedArgs",
  "elapsedMs",
  "expiresAt",
  "enforced"
])
const isEvent = (u: unknown) =>
  isObject(u) && eventKeys(u) && isNumber(u.at) && isEventType(u.type) && isOutcome(u.outcome) &&
  optional(u.sessionKey, isString) && optional(u.toolCallId, isString) && optional(u.toolName, isString) &&
  optional(u.requestId, isString) && optional(u.rule, isString) && optional(u.ruleSource, isRuleSource) &&
  optional(u.policyVersion, isString) && optional(u.reason, isString) && optional(u.actor, isString) &&
  optional(u.via, isVia) && optional(u.sessionApprovalId, isString) && optional(u.args, isString) &&
  optional(u.editedArgs, isString) && optional(u.elapsedMs, isNumber) && optional(u.expiresAt, isNumber) &&
  optional(u.enforced, isOutcome)

const approvalKeys = onlyKeys([
  "id",
  "sessionKey",
  "toolName",
  "scope",
  "argsDigest",
  "args",
  "workingDirectory",
  "grantedBy",
  "requestId",
  "createdAt",
  "expiresAt",
  "revokedAt",
  "seq"
])
const isApproval = (u: unknown) =>
  isObject(u) && approvalKeys(u) && isId(u.id) && isCallId(u.sessionKey) && isString(u.toolName) &&
  isScope(u.scope) && optional(u.argsDigest, isString) && optional(u.args, isString) &&
  optional(u.workingDirectory, isString) && optional(u.grantedBy, isString) && optional(u.requestId, isString) &&
  isNumber(u.createdAt) && optional(u.expiresAt, isNumber) && optional(u.revokedAt, isNumber) && isNumber(u.seq)

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
  request: fastDecoder(isRequest),
  event: fastDecoder(isEvent),
  approval: fastDecoder(isApproval)
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

const makeCodec = <A, I>(
  schema: Schema.Schema<A, I>,
  pick: Pick,
  fast: (text: string) => unknown,
  capacity: number
): Codec<A> => {
  const decode = Schema.decodeUnknownEither(Schema.parseJson(schema))
  const encode = Schema.encodeEither(Schema.parseJson(schema))
  const cache = capacity > 0 ? new TextCache<A>(capacity) : undefined
  return {
    json: (value) => {
      const picked = pick(value)
      if (picked === undefined) return encode(value)
      const text = JSON.stringify(picked)
      if (cache !== undefined && cache.get(text) === undefined) cache.set(text, deepFreeze(JSON.parse(text)))
      return Either.right(text)
    },
    read: (text) => {
      if (typeof text !== "string") return decode(text)
      const hit = cache?.get(text)
      if (hit !== undefined) return Either.right(hit)
      const parsed = fast(text)
      const decoded = parsed !== undefined ? Either.right(parsed as A) : decode(text)
      if (cache !== undefined && Either.isRight(decoded)) cache.set(text, deepFreeze(decoded.right))
      return decoded
    },
    size: () => cache?.size ?? 0
  }
}

const pickRequest = picker(ApprovalRequest.fields, {
  toolCall: picker(ToolCall.fields),
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
  request: makeCodec(ApprovalRequest, pickRequest, fastDecode.request, capacity),
  event: makeCodec(UnsequencedEvent, pickEvent, fastDecode.event, capacity),
  approval: makeCodec(SessionApproval, pickApproval, fastDecode.approval, capacity),
  // read only when a call id is asked for again: the Schema both ways, no cache
  decision: makeCodec(Recorded, () => undefined, () => undefined, 0)
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

export const decisions = (codecs: Codecs) => (rows: ReadonlyArray<Record<string, unknown>>) =>
  readAll(rows, "decision", codecs.decision)

export const approvals = (codecs: Codecs) => (rows: ReadonlyArray<Record<string, unknown>>) =>
  readAll(rows, "approval", codecs.approval)

export const events =
  (codecs: Codecs) =>
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
export const seqs = (
  rows: ReadonlyArray<Record<string, unknown>>
): Effect.Effect<Array<number>, ParseResult.ParseError> => {
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
