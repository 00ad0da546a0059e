import type { ParseResult } from "effect"
import { Either, Schema, SchemaAST } from "effect"
import { ApprovalRequest, RequestId, Resolution, Status } from "../../ApprovalRequest.js"
import { UnsequencedEvent } from "../../AuditEvent.js"
import { Recorded, RuleRef, RuleSource, SessionScope } from "../../Decision.js"
import { maxCallLimits } from "../../Limits.js"
import { SessionApproval } from "../../SessionApproval.js"
import { SessionKey, ToolCall, ToolCallId } from "../../ToolCall.js"
import { isCleanText } from "../callText.js"
import { fitsPortable } from "../canonical.js"

/**
 * Entities <-> their encoded form, the rows every store driver keeps (the SQL driver as JSON
 * text, the memory driver as is). Decoding with the entity's Schema was most of a store call's
 * CPU. Two shortcuts, each proved by property tests (tests/unit/core/sql/rows.test.ts):
 *
 * - Encoding: every field of these entities is plain JSON whose Encoded form equals its Type form
 *   (brands exist only at compile time), so `Schema.encode` amounts to keeping the schema's fields
 *   in the schema's order. `encode` does that by hand, into a fresh frozen value (the rare value
 *   it cannot vouch for takes the Schema).
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

// Events are flat (every field a primitive): each type's check is read off its schema, with the
// ids checked by hand as above and any other refinement by the Schema.
const knownChecks = new Map<SchemaAST.AST, (u: unknown) => boolean>([
  [SessionKey.ast, isCallId],
  [ToolCallId.ast, isCallId],
  [RequestId.ast, isId]
])
const fieldCheck = (ast: SchemaAST.AST): (u: unknown) => boolean => {
  const known = knownChecks.get(ast)
  if (known !== undefined) return known
  switch (ast._tag) {
    case "Literal":
      return (u) => u === ast.literal
    case "StringKeyword":
      return isString
    case "NumberKeyword":
      return isNumber
    case "Union": {
      // `undefined` is an absent field, judged by the caller
      const members = ast.types.filter((member) => !SchemaAST.isUndefinedKeyword(member)).map(fieldCheck)
      return (u) => members.some((check) => check(u))
    }
    case "Refinement":
      return Schema.is(Schema.make(ast))
    default:
      return () => false
  }
}
/** An event type: its fields in the schema's order and their checks. */
const eventShape = (signatures: ReadonlyArray<SchemaAST.PropertySignature>) => {
  const names = signatures.map((signature) => signature.name as string)
  const keys = onlyKeys(names)
  const fields = signatures.map((signature) => ({
    name: signature.name as string,
    optional: signature.isOptional,
    check: fieldCheck(signature.type)
  }))
  /** every field present is one of the type's, with a valid value, and every required one is there */
  const check = (u: Json) => {
    if (!keys(u)) return false
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i]!
      const value = u[field.name]
      if (value === undefined ? !field.optional : !field.check(value)) return false
    }
    return true
  }
  /** the keys in the schema's order, none `undefined`, numbers as JSON reads them back */
  const inOrder = (u: Json) => {
    let next = 0
    for (const key in u) {
      while (next < names.length && names[next] !== key) next++
      if (next === names.length) return false
      const value = u[key]
      if (value === undefined || (typeof value === "number" && (!Number.isFinite(value) || Object.is(value, -0)))) {
        return false
      }
      next++
    }
    return true
  }
  return { check, inOrder, pick: picker(names) }
}
const eventShapes = new Map(
  (UnsequencedEvent.ast as SchemaAST.Union<SchemaAST.TypeLiteral>).types.map((member) => {
    const type = member.propertySignatures.find((signature) => signature.name === "type")!.type as SchemaAST.Literal
    return [type.literal as string, eventShape(member.propertySignatures)] as const
  })
)
const isEvent = (u: unknown) => isObject(u) && eventShapes.get(u.type as string)?.check(u) === true

/**
 * Events are flat and written on every decision: one already in its encoded form (the
 * constructors build them so) is frozen and kept as it is, any other is copied into it; a value
 * whose copy does not pass its type's check takes the Schema, which names the problem.
 */
const makeEventCodec = (): Codec<UnsequencedEvent, UnsequencedEvent.Encoded> => {
  const encode = Schema.encodeEither(UnsequencedEvent)
  const decode = Schema.decodeUnknownEither(UnsequencedEvent)
  return {
    encode: (value) => {
      const shape = eventShapes.get(value.type)
      if (shape !== undefined) {
        if (shape.inOrder(value) && shape.check(value)) return Either.right(Object.freeze(value))
        const picked = shape.pick(value)
        if (picked !== undefined && shape.check(picked)) {
          return Either.right(Object.freeze(picked) as UnsequencedEvent.Encoded)
        }
      }
      return encode(value)
    },
    decode: (encoded) => isEvent(encoded) ? Either.right(encoded as UnsequencedEvent) : decode(encoded)
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
  /** A fresh, frozen encoded value: what `Schema.encode` gives, fields in the schema's order. */
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

const pickRequest = picker(Object.keys(ApprovalRequest.fields), {
  toolCall: picker(Object.keys(ToolCall.fields), { args: pickJson }),
  rule: picker(Object.keys(RuleRef.fields)),
  resolution: picker(Object.keys(Resolution.fields), { editedArgs: pickJson })
})
const pickEvent: Pick = (value) => eventShapes.get(value.type)?.pick(value)
const pickApproval = picker(Object.keys(SessionApproval.fields))

/**
 * The codecs of one store.
 *
 * @internal
 */
export const makeCodecs = () => ({
  request: makeCodec(ApprovalRequest, pickRequest, isRequest),
  event: makeEventCodec(),
  approval: makeCodec(SessionApproval, pickApproval, isApproval, true),
  // read only when a call id is asked for again: the Schema both ways
  decision: makeCodec(Recorded, undefined, undefined)
})

/** @internal */
export type Codecs = ReturnType<typeof makeCodecs>

/** Encoded forms, as drivers keep them. */
export type RequestEncoded = typeof ApprovalRequest.Encoded
export type EventEncoded = UnsequencedEvent.Encoded
export type ApprovalEncoded = typeof SessionApproval.Encoded
export type DecisionEncoded = typeof Recorded.Encoded

/** The texts the pickers produce, for the property tests. */
export const encodedText = {
  request: (value: ApprovalRequest) => JSON.stringify(pickRequest(value)),
  event: (value: UnsequencedEvent) => JSON.stringify(pickEvent(value)),
  approval: (value: SessionApproval) => JSON.stringify(pickApproval(value))
}

export { deepFreeze }
