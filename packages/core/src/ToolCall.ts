/**
 * A tool call an agent wants to make: the unit every decision is about.
 *
 * @example
 * import { ToolCall } from "@tool-gate/core"
 * import { Effect } from "effect"
 *
 * const call = ToolCall.decode({ id: "call-1", name: "bash", args: { command: "ls" }, sessionKey: "s-1" })
 * Effect.runSync(call).name // "bash"
 *
 * @since 0.1.0
 */
import { Array as Arr, Effect, Either, type FastCheck, ParseResult, Schema, type SchemaAST } from "effect"
import { isCleanText, printableKey, textProblem } from "./internal/callText.js"
import { canonicalJson, fitsPortable, sha256, walk } from "./internal/canonical.js"
import * as Limits from "./Limits.js"
import { InvalidToolCall, type Problem, problemsOf } from "./ToolGateError.js"

/** A refusal: its path inside the value, and a message that never quotes the value. */
interface Refusal {
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

/**
 * A schema whose every refusal is `check`'s own message. Effect's default messages quote the
 * value, and quoting a value nested 100,000 levels deep overflows the stack.
 */
const checked = <A, I>(
  check: (input: unknown) => Either.Either<A, Refusal>,
  annotations: Schema.Annotations.Schema<A>
) => {
  const parse = (input: unknown, ast: SchemaAST.AST) =>
    Either.match(check(input), {
      onLeft: ({ message, path }) => {
        const issue = new ParseResult.Type(ast, input, message)
        const at = path.map(printableKey)
        return ParseResult.fail(Arr.isNonEmptyReadonlyArray(at) ? new ParseResult.Pointer(at, input, issue) : issue)
      },
      onRight: ParseResult.succeed
    })
  return Schema.declare<A, I, []>([], {
    decode: () => (input, _, ast) => parse(input, ast),
    // what decodes is also its own encoding (A is I without `undefined` where I allows it)
    encode: () => (input, _, ast) => parse(input, ast) as Either.Either<A & I, ParseResult.ParseIssue>
  }, annotations)
}

const idProblem = (s: string, maxLength: number): string | undefined =>
  s.length === 0
    ? "must not be empty"
    : s.trim() !== s
    ? "must not begin or end with whitespace"
    : textProblem(s, maxLength)

/** A trimmed, non-empty id of at most `maxLength` units, without control characters or lone surrogates. */
const idOf = (maxLength: number) =>
  Schema.String.annotations({ message: () => "must be a string" }).pipe(
    Schema.filter((s) => idProblem(s, maxLength) ?? true, {
      jsonSchema: { minLength: 1, maxLength },
      arbitrary: () => (fc) =>
        fc.string({ minLength: 1, maxLength: Math.min(maxLength, 24) }).filter((s) =>
          idProblem(s, maxLength) === undefined
        )
    })
  )

/** Free text of at most `maxLength` units without control characters or lone surrogates, or `undefined` */
const optionalTextOf = (maxLength: number) =>
  checked<string | undefined, string | undefined>(
    (u) =>
      u === undefined
        ? Either.right(undefined)
        : typeof u !== "string"
        ? Either.left({ path: [], message: "must be a string" })
        : Either.fromNullable(textProblem(u, maxLength), () => u).pipe(
          Either.flip,
          Either.mapLeft((message) => ({ path: [], message }))
        ),
    {
      identifier: "Text",
      jsonSchema: { type: "string", maxLength },
      arbitrary: () => (fc) => fc.option(fc.string({ maxLength: 24 }), { nil: undefined })
    }
  )

/**
 * A tool call id: trimmed, not empty, no control characters (C0, DEL, C1) or lone surrogates,
 * at most `Limits.maxCallLimits.maxIdLength` units (a gate's `maxIdLength` may be lower).
 *
 * @since 0.1.0
 * @category models
 */
export const ToolCallId = idOf(Limits.maxCallLimits.maxIdLength).pipe(Schema.brand("@tool-gate/ToolCallId"))
/**
 * @since 0.1.0
 * @category models
 */
export type ToolCallId = typeof ToolCallId.Type

/**
 * A session key, with the same rules as `ToolCallId`.
 *
 * @since 0.1.0
 * @category models
 */
export const SessionKey = idOf(Limits.maxCallLimits.maxIdLength).pipe(Schema.brand("@tool-gate/SessionKey"))
/**
 * @since 0.1.0
 * @category models
 */
export type SessionKey = typeof SessionKey.Type

/** `{ readonly [x: string]: unknown }`: the type `ToolArgs` decodes to and encodes from */
type Args = { readonly [x: string]: unknown }

interface ArgsLimits {
  readonly maxDepth: number
  readonly maxArgsBytes: number
}

const checkArgs = (input: unknown, limits: ArgsLimits): Either.Either<Args, Refusal> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return Either.left({ path: [], message: "arguments must be a JSON object" })
  }
  if (fitsPortable(input, limits.maxDepth, limits.maxArgsBytes)) return Either.right(input as Args)
  const walked = walk(input, { portable: true, maxDepth: limits.maxDepth, maxBytes: limits.maxArgsBytes })
  if (walked._tag === "Refused") return Either.left(walked)
  // an undefined property was left out, or a -0 is 0 in JSON: what runs is the canonical value, as
  // judged and as a store keeps it
  return Either.right(walked.changed ? JSON.parse(walked.text) as Args : input as Args)
}

const argsAnnotations = {
  identifier: "ToolArgs",
  description: "a JSON object; undefined properties are absent, as in JSON",
  jsonSchema: { type: "object" },
  arbitrary: () => (fc: typeof FastCheck) =>
    fc.dictionary(
      fc.string().filter((key) => key !== "__proto__"),
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown),
      { maxKeys: 4 }
    ),
  pretty: () => (args: Args | undefined) => canonicalJson(args) ?? "{}"
}

const argsOf = (limits: ArgsLimits) => checked<Args, Args>((u) => checkArgs(u, limits), argsAnnotations)

/** Arguments of a call: `undefined` (or absent) is no arguments. */
const callArgsOf = (limits: ArgsLimits) =>
  checked<Args, Args | undefined>((u) => (u === undefined ? Either.right({}) : checkArgs(u, limits)), argsAnnotations)

/**
 * Tool arguments: a plain JSON object every store keeps alike, because approvals are bound to the
 * canonical JSON digest of the arguments. An `undefined` property is absent (dropped, as JSON
 * does); refused with the path of the problem: values JSON cannot carry (`undefined` inside an
 * array, functions, non-finite numbers, class instances, cycles), an own `__proto__` key, U+0000
 * or a lone surrogate in a string or key, and anything over `Limits.maxCallLimits` (a gate's
 * own, lower limits apply through `decode` and `decodeArgs`).
 *
 * @since 0.1.0
 * @category models
 */
export const ToolArgs = argsOf(Limits.maxCallLimits)
/**
 * @since 0.1.0
 * @category models
 */
export type ToolArgs = typeof ToolArgs.Type

/**
 * `ToolArgs` or `undefined`, for an optional field (`Schema.optionalWith(OptionalToolArgs, {
 * exact: true })`): unlike `Schema.optional(ToolArgs)`, whose refusals quote the value, it
 * refuses a deeply nested value with a message instead of a stack overflow.
 *
 * @since 0.1.0
 * @category models
 */
export const OptionalToolArgs = checked<ToolArgs | undefined, ToolArgs | undefined>(
  (u) => (u === undefined ? Either.right(undefined) : checkArgs(u, Limits.maxCallLimits)),
  { ...argsAnnotations, arbitrary: () => (fc) => fc.option(argsAnnotations.arbitrary()(fc), { nil: undefined }) }
)

const toolCallOf = (limits: Limits.CallLimits) =>
  Schema.Struct({
    id: idOf(limits.maxIdLength).pipe(Schema.brand("@tool-gate/ToolCallId")),
    name: idOf(limits.maxIdLength),
    args: Schema.optionalWith(callArgsOf(limits), { exact: true, default: () => ({}) }),
    sessionKey: idOf(limits.maxIdLength).pipe(Schema.brand("@tool-gate/SessionKey")),
    agentId: Schema.optionalWith(optionalTextOf(limits.maxIdLength), { exact: true }),
    intentId: Schema.optionalWith(optionalTextOf(limits.maxIdLength), { exact: true }),
    userId: Schema.optionalWith(optionalTextOf(limits.maxIdLength), { exact: true }),
    workingDirectory: Schema.optionalWith(optionalTextOf(limits.maxPathLength), { exact: true })
  }).annotations({
    // only for a value that is no object at all (the default message would quote it); the
    // problems of its fields keep their own messages
    message: (issue) =>
      issue._tag === "Transformation" && issue.issue._tag === "Type"
        ? { message: "a tool call must be an object", override: true }
        : { message: "", override: false }
  })

/**
 * A tool call as any gate may have stored it (within `Limits.maxCallLimits`); `schema(limits)`
 * is the same with a gate's limits, and what `decode` checks.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolCall = toolCallOf(Limits.maxCallLimits)

/**
 * @since 0.1.0
 * @category models
 */
export interface ToolCall extends Schema.Schema.Type<typeof ToolCall> {}

/**
 * What callers hand in: plain strings instead of branded ids, `args` optional.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolCallInput = Schema.Schema.Encoded<typeof ToolCall>

/**
 * Who makes a call and where: everything of a `ToolCallInput` but the call's id, name and
 * arguments. A conversation or a pipeline keeps one and adds each call to it (`GatedTool`'s
 * context, `@tool-gate/ai`'s sessions); the gate validates it with the rest of the call.
 *
 * @since 0.1.0
 * @category models
 */
export const CallContext = Schema.Struct({
  sessionKey: Schema.String,
  agentId: Schema.optional(Schema.String),
  intentId: Schema.optional(Schema.String),
  userId: Schema.optional(Schema.String),
  workingDirectory: Schema.optional(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export interface CallContext extends Schema.Schema.Type<typeof CallContext> {}

/**
 * The `ToolCall` schema under a gate's limits.
 *
 * @since 0.1.0
 * @category models
 */
export const schema = (limits: Limits.CallLimits): Schema.Schema<ToolCall, ToolCallInput> => toolCallOf(limits)

const isOptionalText = (u: unknown, maxLength: number) =>
  u === undefined || (typeof u === "string" && isCleanText(u, maxLength))
const isId = (u: unknown, maxLength: number): u is string =>
  typeof u === "string" && u.length > 0 && u.trim() === u && isCleanText(u, maxLength)

/**
 * The hot path's guard: when it says yes, the schema under the same limits would accept the value
 * unchanged (a property test holds it to that). When it says no, the schema decides and names
 * the problems.
 */
const isWellFormed = (u: unknown, limits: Limits.CallLimits): u is ToolCallInput => {
  if (typeof u !== "object" || u === null) return false
  const c = u as Record<string, unknown>
  const maxId = limits.maxIdLength
  return isId(c.id, maxId) && isId(c.name, maxId) && isId(c.sessionKey, maxId) &&
    (c.args === undefined ||
      (typeof c.args === "object" && c.args !== null && !Array.isArray(c.args) &&
        fitsPortable(c.args, limits.maxDepth, limits.maxArgsBytes))) &&
    isOptionalText(c.agentId, maxId) && isOptionalText(c.intentId, maxId) && isOptionalText(c.userId, maxId) &&
    isOptionalText(c.workingDirectory, limits.maxPathLength)
}

// `isWellFormed` checked the ids with the schemas' rules: the constructors brand them unvalidated.
const fromWellFormed = (c: ToolCallInput): ToolCall => ({
  id: ToolCallId.make(c.id, true),
  name: c.name,
  args: c.args ?? {},
  sessionKey: SessionKey.make(c.sessionKey, true),
  ...(c.agentId !== undefined ? { agentId: c.agentId } : {}),
  ...(c.intentId !== undefined ? { intentId: c.intentId } : {}),
  ...(c.userId !== undefined ? { userId: c.userId } : {}),
  ...(c.workingDirectory !== undefined ? { workingDirectory: c.workingDirectory } : {})
})

type Decoder = (input: unknown) => Effect.Effect<ToolCall, InvalidToolCall>

const decoderOf = (limits: Limits.CallLimits): Decoder => {
  const decodeEither = Schema.decodeUnknownEither(toolCallOf(limits), { errors: "all" })
  return (input) => {
    if (isWellFormed(input, limits)) return Effect.succeed(fromWellFormed(input))
    const result = decodeEither(input)
    return result._tag === "Right"
      ? Effect.succeed(result.right)
      : Effect.fail(new InvalidToolCall({ problems: problemsOf(result.left) }))
  }
}

const defaultDecoder = decoderOf(Limits.defaultCallLimits)
const decoders = new WeakMap<Limits.CallLimits, Decoder>()

const decoderFor = (limits: Limits.CallLimits): Decoder => {
  if (limits === Limits.defaultCallLimits) return defaultDecoder
  let decoder = decoders.get(limits)
  if (decoder === undefined) {
    decoder = decoderOf(limits)
    decoders.set(limits, decoder)
  }
  return decoder
}

/**
 * Validates an unknown value as a tool call under a gate's limits (default
 * `Limits.defaultCallLimits`), failing with `InvalidToolCall` that names every problem with its
 * path. An `undefined` argument property is dropped from the call, as JSON would.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decode = (
  input: unknown,
  limits: Limits.CallLimits = Limits.defaultCallLimits
): Effect.Effect<ToolCall, InvalidToolCall> => decoderFor(limits)(input)

/**
 * Validates arguments on their own (an approver's edited arguments) under a gate's limits: the
 * arguments, or every problem with its path under `path` (`editedArgs.command`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const decodeArgs = (
  input: unknown,
  options?: { readonly limits?: Limits.CallLimits | undefined; readonly path?: string | undefined }
): Either.Either<ToolArgs, ReadonlyArray<Problem>> => {
  const path = options?.path ?? "args"
  return Either.mapLeft(checkArgs(input, options?.limits ?? Limits.defaultCallLimits), (problem) => [{
    path: [path, ...problem.path.map(printableKey)].join("."),
    message: problem.message
  }])
}

/**
 * Validates a session key given on its own (to list, grant or revoke) under a gate's limits,
 * with the rules of a call's session key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decodeSessionKey = (
  input: unknown,
  limits: Limits.CallLimits = Limits.defaultCallLimits
): Either.Either<SessionKey, InvalidToolCall> =>
  isId(input, limits.maxIdLength)
    ? Either.right(SessionKey.make(input, true))
    : Either.left(
      new InvalidToolCall({
        problems: [{
          path: "sessionKey",
          message: typeof input === "string"
            ? textProblem(input, limits.maxIdLength) ?? "must be a non-empty string without surrounding whitespace"
            : "must be a string"
        }]
      })
    )

/**
 * Canonical JSON of the arguments (keys sorted at every depth).
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalArgs = (args: ToolArgs): string => canonicalJson(args) ?? "{}"

/**
 * SHA-256 of the canonical arguments: what `exact` session approvals and approvals are bound to.
 *
 * @since 0.1.0
 * @category utils
 */
export const argsDigest = (args: ToolArgs): string => sha256(canonicalArgs(args))

/**
 * Tool names compare case-insensitively everywhere.
 *
 * @since 0.1.0
 * @category utils
 */
export const normalizeName = (name: string): string => name.toLowerCase()
