import type { ParseResult } from "effect"
import { Either, Schema, SchemaAST } from "effect"
import { ApprovalRequest, RequestId, Resolution, Status } from "../../ApprovalRequest.js"
import { AuditEvent, UnsequencedEvent } from "../../AuditEvent.js"
import { Allow, Deny, Recorded, RuleRef, RuleSource, SessionScope } from "../../Decision.js"
import { maxCallLimits } from "../../Limits.js"
import { SessionApproval } from "../../SessionApproval.js"
import { SessionKey, ToolCall, ToolCallId } from "../../ToolCall.js"
import { BuiltEvent } from "../builtEvent.js"
import { isCleanText } from "../callText.js"
import { fitsPortable } from "../canonical.js"

/**
 * Entities <-> their encoded form, the rows every store driver keeps (the SQL driver as JSON
 * text, the memory driver as is). Decoding with the entity's Schema was most of a store call's
 * CPU. Two shortcuts, each proved by property tests (tests/unit/core/sql/rows.test.ts):
 *
 * - Encoding: every field of these entities is plain JSON whose Encoded form equals its Type form
 *   (brands exist only at compile time), so `Schema.encode` amounts to keeping the schema's fields
 *   in the schema's order. `encode` does that by hand, into a fresh frozen value (an event: see
 *   `makeEventCodec`; the rare value it cannot vouch for takes the Schema).
 * - Decoding: a value this codec encoded, or decoded before, is its own decoding (it is frozen, so
 *   nobody changed it since). Any other value is checked by hand: the check says yes only when the
 *   Schema would accept the value unchanged (right types, no unknown keys, nothing the Schema
 *   fills in or strips). Anything else (another version's rows, damage) takes the Schema, which
 *   decodes it or names the problem.
 */

const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key in value) deepFreeze((value as Record<string, unknown>)[key])
  }
  return value
}

type Pick = (value: any) => Record<string, unknown> | undefined

/** A fresh copy of a JSON value as JSON reads it back; `undefined` when JSON would change it otherwise. */
const copyJson = (value: unknown): unknown => {
  // -0 reads back from JSON as 0
  if (typeof value === "number") return Number.isFinite(value) ? value === 0 ? 0 : value : undefined
  if (typeof value !== "object" || value === null) return value
  if (Array.isArray(value)) {
    const out: Array<unknown> = new Array(value.length)
    for (let i = 0; i < value.length; i++) {
      // JSON writes a missing item as null: the Schema decides
      const item = copyJson(value[i])
      if (item === undefined) return undefined
      out[i] = item
    }
    return out
  }
  const out: Record<string, unknown> = {}
  for (const key in value) {
    // a key the copy would take for its prototype: the Schema decides
    if (key === "__proto__") return undefined
    const field = (value as Record<string, unknown>)[key]
    if (field === undefined) continue
    const copied = copyJson(field)
    if (copied === undefined) return undefined
    out[key] = copied
  }
  return out
}
const pickJson: Pick = (value) => copyJson(value) as Record<string, unknown> | undefined

/**
 * Copies the fields named by `keys` (a schema's, in its order), leaving out absent and
 * `undefined` ones (JSON would drop them too); `nested` picks struct-valued fields. `undefined`
 * when a number field is not finite: JSON would write `null`, which no longer decodes, so such a
 * value takes the Schema path (and is not seeded into the cache).
 */
const picker = (
  keys: ReadonlyArray<string>,
  nested: Record<string, Pick> = {}
): Pick => {
  return (value) => {
    const out: Record<string, unknown> = {}
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!
      const field = value[key]
      if (field === undefined) continue
      if (typeof field === "number" && !Number.isFinite(field)) return undefined
      const pick = nested[key]
      if (pick === undefined) {
        // -0 reads back from JSON as 0
        out[key] = field === 0 ? 0 : field
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
/** what `String.prototype.trim` removes: white space and line terminators */
const isTrimmed = (code: number) =>
  !(code <= 0x20 ? code === 0x20 || (code >= 0x09 && code <= 0x0d) : code >= 0xa0 && (
    code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 ||
    code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
  ))
/** `NonEmptyTrimmedString` (the branded ids) */
const isId = (u: unknown): u is string =>
  typeof u === "string" && u.length > 0 && isTrimmed(u.charCodeAt(0)) && isTrimmed(u.charCodeAt(u.length - 1))
// A call's ids and text, as its schema accepts them under the widest limits a gate may set
const isCallId = (u: unknown): u is string => isId(u) && isCleanText(u, maxCallLimits.maxIdLength)
const isCallText = (maxLength: number) => (u: unknown) => typeof u === "string" && isCleanText(u, maxLength)
/** absent (JSON has no `undefined`) or passing `check` */
const optional = (u: unknown, check: (u: unknown) => boolean) => u === undefined || check(u)
const oneOf = (literals: ReadonlyArray<unknown>) => {
  const set = new Set(literals)
  // the few literals of a field: comparing beats hashing
  return literals.length > 8 ? (u: unknown) => set.has(u) : (u: unknown) => {
    for (let i = 0; i < literals.length; i++) if (literals[i] === u) return true
    return false
  }
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

// Events are flat (every field a primitive): each type's checks are read off its schema, the
// common kinds of field judged inline (one switch, no call per field), ids as above, and any
// other refinement by the Schema.
const STRING = 0
const NUMBER = 1
const LITERALS = 2
const CALL_ID = 3
const ID = 4
const OTHER = 5

interface FieldCheck {
  readonly kind: number
  readonly literals: ReadonlyArray<unknown>
  readonly check: (u: unknown) => boolean
}
const never = () => false
const kindOf = (ast: SchemaAST.AST): FieldCheck => {
  if (ast === SessionKey.ast || ast === ToolCallId.ast) return { kind: CALL_ID, literals: [], check: isCallId }
  if (ast === RequestId.ast) return { kind: ID, literals: [], check: isId }
  switch (ast._tag) {
    case "Literal":
      return { kind: LITERALS, literals: [ast.literal], check: never }
    case "StringKeyword":
      return { kind: STRING, literals: [], check: isString }
    case "NumberKeyword":
      return { kind: NUMBER, literals: [], check: isNumber }
    case "Union": {
      // `undefined` is an absent field, judged by the caller
      const members = ast.types.filter((member) => !SchemaAST.isUndefinedKeyword(member))
      if (members.length === 1) return kindOf(members[0]!)
      if (members.every(SchemaAST.isLiteral)) {
        return { kind: LITERALS, literals: members.map((member) => member.literal), check: never }
      }
      const checks = members.map((member) => kindOf(member).check)
      return { kind: OTHER, literals: [], check: (u) => checks.some((check) => check(u)) }
    }
    case "Refinement":
      return { kind: OTHER, literals: [], check: Schema.is(Schema.make(ast)) }
    default:
      return { kind: OTHER, literals: [], check: never }
  }
}

/** What `scan` finds of a value against an event type. */
const INVALID = 0
const VALID = 1
/** valid, and already what the picker would make: its keys in the schema's order, numbers as JSON reads them back */
const ENCODED = 2

/** An event type: its fields in the schema's order and their checks, judged in one pass over a value. */
const eventShape = (signatures: ReadonlyArray<SchemaAST.PropertySignature>) => {
  const names = signatures.map((signature) => signature.name as string)
  const fields: Record<string, FieldCheck & { readonly index: number; readonly optional: boolean }> = Object
    .create(null)
  signatures.forEach((signature, index) => {
    fields[signature.name as string] = { ...kindOf(signature.type), index, optional: signature.isOptional }
  })
  const required = signatures.filter((signature) => !signature.isOptional).length
  /** `sequenced`: a row of the log, with its `seq` (and its hashes) besides */
  const scan = (u: Json, sequenced = false): typeof INVALID | typeof VALID | typeof ENCODED => {
    let found = sequenced ? -1 : 0
    let last = -1
    let encoded = true
    for (const key in u) {
      const field = fields[key]
      if (field === undefined) {
        if (!sequenced) return INVALID
        if (key === "seq") {
          if (typeof u.seq !== "number") return INVALID
          found++
          continue
        }
        // its links in the hash chain, optional
        if ((key === "prevHash" || key === "hash") && (u[key] === undefined || typeof u[key] === "string")) continue
        return INVALID
      }
      const value = u[key]
      if (value === undefined) {
        if (!field.optional) return INVALID
        encoded = false
        continue
      }
      switch (field.kind) {
        case STRING:
          if (typeof value !== "string") return INVALID
          break
        case NUMBER:
          if (typeof value !== "number") return INVALID
          // JSON writes a non-finite number as null and reads -0 back as 0
          if (!Number.isFinite(value) || Object.is(value, -0)) encoded = false
          break
        case LITERALS: {
          const literals = field.literals
          let i = 0
          while (i < literals.length && literals[i] !== value) i++
          if (i === literals.length) return INVALID
          break
        }
        case CALL_ID:
          if (!isCallId(value)) return INVALID
          break
        case ID:
          if (!isId(value)) return INVALID
          break
        default:
          if (!field.check(value)) return INVALID
      }
      if (!field.optional) found++
      if (field.index < last) encoded = false
      last = field.index
    }
    return found !== required ? INVALID : encoded ? ENCODED : VALID
  }
  return { scan, pick: picker(names) }
}
const eventShapes = new Map(
  (UnsequencedEvent.ast as SchemaAST.Union<SchemaAST.TypeLiteral>).types.map((member) => {
    const type = member.propertySignatures.find((signature) => signature.name === "type")!.type as SchemaAST.Literal
    return [type.literal as string, eventShape(member.propertySignatures)] as const
  })
)
const isEvent = (u: unknown) => isObject(u) && (eventShapes.get(u.type as string)?.scan(u) ?? INVALID) !== INVALID

/**
 * Events are flat and written on every decision: one already in its encoded form (the
 * constructors build them so) is kept as it is, any other valid one is copied into it; anything
 * else takes the Schema, which names the problem. Not frozen: freezing cost more than the rest of
 * the write (their types are read-only), so the SQL text cache does not keep them (the store's
 * ring of recent events serves what was just written).
 */
const makeEventCodec = (): Codec<UnsequencedEvent, UnsequencedEvent.Encoded> & {
  /** An event of the log as a driver read it (its encoded form with its `seq`). */
  readonly decodeRow: (row: unknown) => Either.Either<AuditEvent, ParseResult.ParseError>
} => {
  const encode = Schema.encodeEither(UnsequencedEvent)
  const decode = Schema.decodeUnknownEither(UnsequencedEvent)
  const decodeRow = Schema.decodeUnknownEither(AuditEvent)
  return {
    encode: (value) => {
      if (value instanceof BuiltEvent) return Either.right(value)
      const shape = eventShapes.get(value.type)
      if (shape !== undefined) {
        const found = shape.scan(value)
        if (found === ENCODED) return Either.right(value)
        // a valid value's copy is valid: the same fields, in order, without `undefined` ones
        const picked = found === VALID ? shape.pick(value) : undefined
        if (picked !== undefined) return Either.right(picked as UnsequencedEvent.Encoded)
      }
      return encode(value)
    },
    decode: (encoded) => isEvent(encoded) ? Either.right(encoded as UnsequencedEvent) : decode(encoded),
    decodeRow: (row) =>
      isObject(row) && (eventShapes.get(row.type as string)?.scan(row, true) ?? INVALID) !== INVALID
        ? Either.right(row as AuditEvent)
        : decodeRow(row)
  }
}

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

/** Whether the Schema decodes a parsed JSON value to itself, unchanged. */
export const checks = {
  request: isRequest,
  event: isEvent,
  approval: isApproval
}

/**
 * How one entity is encoded for a driver and decoded from what a driver returns.
 *
 * @internal
 */
export interface Codec<A, I> {
  /**
   * What `Schema.encode` gives, fields in the schema's order: a fresh, frozen value (events: the
   * value itself when it is already in that form).
   */
  readonly encode: (value: A) => Either.Either<I, ParseResult.ParseError>
  /** The entity in an encoded value (one this codec made or checked before: itself). */
  readonly decode: (encoded: unknown) => Either.Either<A, ParseResult.ParseError>
}

const makeCodec = <A, I>(
  schema: Schema.Schema<A, I>,
  pick: Pick | undefined,
  check: ((u: unknown) => boolean) | undefined,
  /**
   * `flat` (every field a primitive): frozen without recursion, and checked on every decode
   * instead of remembered (a weak set holding every event of a long log costs the garbage
   * collector more than the check costs)
   */
  flat = false
): Codec<A, I> => {
  const decode = Schema.decodeUnknownEither(schema)
  const encode = Schema.encodeEither(schema)
  // values known to decode to themselves (frozen, so they stay so)
  const vouched = new WeakSet<object>()
  const vouch = <V>(value: V): V => {
    if (flat) return Object.freeze(value)
    deepFreeze(value)
    if (typeof value === "object" && value !== null) vouched.add(value)
    return value
  }
  return {
    encode: (value) => {
      const picked = pick?.(value)
      return picked === undefined ? encode(value) : Either.right(vouch(picked as I))
    },
    decode: (encoded) => {
      if (!flat && typeof encoded === "object" && encoded !== null && vouched.has(encoded)) {
        return Either.right(encoded as A)
      }
      if (check?.(encoded)) return Either.right(flat ? encoded as A : vouch(encoded as A))
      return Either.map(decode(encoded), vouch)
    }
  }
}

const pickRule = picker(Object.keys(RuleRef.fields))
const pickRequest = picker(Object.keys(ApprovalRequest.fields), {
  toolCall: picker(Object.keys(ToolCall.fields), { args: pickJson }),
  rule: pickRule,
  resolution: picker(Object.keys(Resolution.fields), { editedArgs: pickJson })
})
const pickEvent: Pick = (value) => eventShapes.get(value.type)?.pick(value)
const pickApproval = picker(Object.keys(SessionApproval.fields))
const pickDecisionOf: Record<string, Pick> = {
  Allow: picker(Object.keys(Allow.fields), { rule: pickRule }),
  Deny: picker(Object.keys(Deny.fields), { rule: pickRule })
}
const pickRecorded = picker(Object.keys(Recorded.fields), {
  decision: (value) => pickDecisionOf[value._tag as string]?.(value)
})

/**
 * The codecs of one store.
 *
 * @internal
 */
export const makeCodecs = () => ({
  request: makeCodec(ApprovalRequest, pickRequest, isRequest),
  event: makeEventCodec(),
  approval: makeCodec(SessionApproval, pickApproval, isApproval, true),
  // written on every recorded decision (picked); read only when a call id is asked for again
  decision: makeCodec(Recorded, pickRecorded, undefined)
})

/** @internal */
export type Codecs = ReturnType<typeof makeCodecs>

/** Encoded forms, as drivers keep them. */
export type RequestEncoded = typeof ApprovalRequest.Encoded
export type EventEncoded = UnsequencedEvent.Encoded
export type EventRow = AuditEvent.Encoded
export type ApprovalEncoded = typeof SessionApproval.Encoded
export type DecisionEncoded = typeof Recorded.Encoded

/** The texts the pickers produce, for the property tests. */
export const encodedText = {
  request: (value: ApprovalRequest) => JSON.stringify(pickRequest(value)),
  event: (value: UnsequencedEvent) => JSON.stringify(pickEvent(value)),
  approval: (value: SessionApproval) => JSON.stringify(pickApproval(value)),
  decision: (value: Recorded) => JSON.stringify(pickRecorded(value))
}

export { deepFreeze }
