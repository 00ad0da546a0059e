/**
 * Who may use the approval API: bearer tokens, each with a name (recorded as the identity of
 * whoever answers with it), a role (`approver` may answer and also read; `auditor` may only read)
 * and optionally the session-key patterns it is limited to. Tokens come from a JSON file or the
 * `TOOLGATE_TOKENS` environment variable and are compared in constant time.
 *
 * The `Authentication` middleware provides the `CurrentPrincipal` to every handler behind it, so
 * a handler cannot reach the principal without the token having been checked; `approverFor` and
 * `readerFor` turn it into the narrower capability an action needs. What a token may not see is
 * answered as missing (404, naming nothing it did not send); an auditor answering is `Forbidden`.
 *
 * @example
 * import { Auth } from "@tool-gate/server"
 * import { Effect, Layer } from "effect"
 *
 * const tokens = Auth.fromJson(JSON.stringify([
 *   { token: "a-long-random-approver-token", name: "ana", role: "approver", sessions: ["team-a-*"] },
 *   { token: "a-long-random-auditor-token", name: "audit-bot", role: "auditor" }
 * ]))
 *
 * const AuthLive = Layer.unwrapEffect(Effect.map(tokens, Auth.layer))
 *
 * @since 0.1.0
 */
import { HttpApiMiddleware, HttpApiSchema, HttpApiSecurity } from "@effect/platform"
import * as FileSystem from "@effect/platform/FileSystem"
import { type ApprovalRequest, Glob, ToolGateError } from "@tool-gate/core"
import { Config, Context, Effect, Either, Layer, Redacted, Schema } from "effect"
import type { LazyArg } from "effect/Function"
import { createHash, timingSafeEqual } from "node:crypto"
import * as PlainAuth from "./internal/plainAuth.js"

/**
 * `approver` may answer requests and revoke session approvals, and read everything an auditor
 * reads; `auditor` may read pending requests, session approvals and the audit log.
 *
 * @since 0.1.0
 * @category models
 */
export const Role = Schema.Literal("approver", "auditor")
/**
 * @since 0.1.0
 * @category models
 */
export type Role = typeof Role.Type

const SessionPattern = Schema.String.pipe(
  Schema.filter((pattern) => Glob.problem(pattern) ?? true, { identifier: "SessionPattern" })
)

/**
 * One entry of the token file (or of `TOOLGATE_TOKENS`).
 *
 * @since 0.1.0
 * @category models
 */
export const TokenConfig = Schema.Struct({
  /** the bearer secret; at least 16 characters, so a guessable word is refused at start-up */
  token: Schema.String.pipe(Schema.minLength(16, { message: () => "a token must be at least 16 characters long" })),
  /** who uses it: recorded as `respondedBy` / `actor` on every answer given with it */
  name: Schema.NonEmptyTrimmedString,
  role: Role,
  /** session-key globs (`team-a-*`) the token is limited to; absent: every session */
  sessions: Schema.optional(Schema.Array(SessionPattern).pipe(Schema.minItems(1)))
})
/**
 * @since 0.1.0
 * @category models
 */
export type TokenConfig = typeof TokenConfig.Type

/**
 * The whole token list: at least one token (a server nobody may use is a mistake), each distinct.
 *
 * @since 0.1.0
 * @category models
 */
export const Tokens = Schema.Array(TokenConfig).pipe(
  Schema.minItems(1, { message: () => "at least one token is needed" }),
  Schema.filter((tokens) => {
    const seen = new Set<string>()
    const issues: Array<Schema.FilterIssue> = []
    tokens.forEach((entry, index) => {
      if (seen.has(entry.token)) issues.push({ path: [index, "token"], message: "the same token is listed twice" })
      seen.add(entry.token)
    })
    return issues
  })
)

/**
 * The token list could not be read or is invalid; every problem is listed with its path.
 *
 * @since 0.1.0
 * @category errors
 */
export class TokensInvalid extends Schema.TaggedError<TokensInvalid>()("TokensInvalid", {
  source: Schema.String,
  problems: Schema.Array(ToolGateError.Problem)
}) {
  override get message(): string {
    const problems = this.problems.map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`))
    return `Invalid API tokens (${this.source}): ${problems.join("; ")}`
  }
}

/**
 * No bearer token, or one nobody issued.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

/**
 * A valid token without the right: the auditor role answering. (A session outside the token's
 * patterns is not forbidden but invisible: the answer is the not-found one.)
 *
 * @since 0.1.0
 * @category errors
 */
export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

/**
 * The caller a valid token identifies.
 *
 * @since 0.1.0
 * @category models
 */
export interface Principal {
  readonly name: string
  readonly role: Role
  /** the session-key patterns the token is limited to; `undefined` for every session */
  readonly sessions: ReadonlyArray<string> | undefined
  /** whether a session's data is visible; events of no session (a global clear) need an unlimited token */
  readonly canSee: (sessionKey: string | undefined) => boolean
}

/**
 * A principal allowed to read one session's data.
 *
 * @since 0.1.0
 * @category models
 */
export interface Reader extends Principal {
  readonly sessionKey: string
}

/**
 * A principal allowed to answer for one session: only this type can be turned into an answer.
 *
 * @since 0.1.0
 * @category models
 */
export interface Approver extends Reader {
  readonly role: "approver"
}

/**
 * @since 0.1.0
 * @category tags
 */
export class CurrentPrincipal
  extends Context.Tag("@tool-gate/server/CurrentPrincipal")<CurrentPrincipal, Principal>()
{}

/**
 * Bearer authentication for the API groups behind it: provides `CurrentPrincipal` or fails with
 * `Unauthorized`.
 *
 * @since 0.1.0
 * @category tags
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("@tool-gate/server/Authentication", {
  failure: Unauthorized,
  provides: CurrentPrincipal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const principalOf = (entry: TokenConfig): Principal => {
  const globs = entry.sessions?.map(Glob.make)
  return {
    name: entry.name,
    role: entry.role,
    sessions: entry.sessions,
    canSee: globs === undefined
      ? () => true
      : (sessionKey) => sessionKey !== undefined && globs.some((glob) => glob.test(sessionKey))
  }
}

const digest = (token: string): Buffer => createHash("sha256").update(token, "utf8").digest()

/**
 * Checks a presented bearer token against the list. Both sides are SHA-256 digests of equal
 * length compared with `timingSafeEqual`, and every entry is compared (no early exit), so the
 * time taken says nothing about how much of a token was right or which entry matched.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeVerifier = (tokens: ReadonlyArray<TokenConfig>) => {
  const entries = tokens.map((entry) => ({ digest: digest(entry.token), principal: principalOf(entry) }))
  return (presented: Redacted.Redacted): Effect.Effect<Principal, Unauthorized> => {
    const token = Redacted.value(presented)
    if (token === "") {
      return Effect.fail(
        new Unauthorized({ message: "Missing bearer token: send the header Authorization: Bearer <token>" })
      )
    }
    const candidate = digest(token)
    let found: Principal | undefined
    for (const entry of entries) {
      if (timingSafeEqual(candidate, entry.digest)) found = entry.principal
    }
    return found === undefined
      ? Effect.fail(new Unauthorized({ message: "Unknown bearer token" }))
      : Effect.succeed(found)
  }
}

/**
 * The `Authentication` middleware over a token list.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (tokens: ReadonlyArray<TokenConfig>): Layer.Layer<Authentication> => {
  const verify = PlainAuth.mark(makeVerifier(tokens))
  return Layer.succeed(Authentication, Authentication.of({ bearer: verify }))
}

/**
 * The current principal, allowed to read `sessionKey`; otherwise `hidden()`. Callers make that the
 * error they give for something that does not exist (`RequestNotFound` for a request, ...), so a
 * token limited to some sessions learns nothing of the others: not their keys, not whether a
 * request id exists.
 *
 * @since 0.1.0
 * @category authorization
 */
export const readerFor = <E>(
  sessionKey: string,
  hidden: LazyArg<E>
): Effect.Effect<Reader, E, CurrentPrincipal> =>
  Effect.flatMap(CurrentPrincipal, (principal) =>
    principal.canSee(sessionKey)
      ? Effect.succeed({ ...principal, sessionKey })
      : Effect.fail(hidden()))

/**
 * The current principal, allowed to answer for `sessionKey`: `hidden()` when the session is outside
 * its patterns (as `readerFor`), `Forbidden` when it may read the session but has the auditor role.
 *
 * @since 0.1.0
 * @category authorization
 */
export const approverFor = <E>(
  sessionKey: string,
  hidden: LazyArg<E>
): Effect.Effect<Approver, E | Forbidden, CurrentPrincipal> =>
  Effect.flatMap(readerFor(sessionKey, hidden), (reader) =>
    reader.role === "approver"
      ? Effect.succeed({ ...reader, role: "approver" })
      : Effect.fail(
        new Forbidden({ message: `Token "${reader.name}" has the auditor role; answering needs the approver role` })
      ))

/**
 * A principal allowed to answer for every session: an approver token with no session patterns.
 *
 * @since 0.1.0
 * @category models
 */
export interface GlobalApprover extends Principal {
  readonly role: "approver"
  readonly sessions: undefined
}

/**
 * The principal as a `GlobalApprover` when it is one, so a handler can answer for it without first
 * reading which session a request belongs to; `undefined` otherwise (then `approverFor` decides).
 *
 * @since 0.1.0
 * @category authorization
 */
export const globalApprover = (principal: Principal): GlobalApprover | undefined =>
  principal.role === "approver" && principal.sessions === undefined ? principal as GlobalApprover : undefined

/**
 * The answer as given by `approver`: `respondedBy` is always the token's name, whatever the body
 * said, so nobody answers under another identity.
 *
 * @since 0.1.0
 * @category authorization
 */
export const answerOf = (
  approver: Approver | GlobalApprover,
  response: ApprovalRequest.ApprovalResponse
): ApprovalRequest.ApprovalResponse => ({ ...response, respondedBy: approver.name })

/**
 * The token list from JSON text: an array of `{ token, name, role, sessions? }`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromJson = (text: string, source = "JSON"): Effect.Effect<ReadonlyArray<TokenConfig>, TokensInvalid> =>
  Either.try(() => JSON.parse(text) as unknown).pipe(
    Either.mapLeft((error) => [{ path: "", message: `not valid JSON: ${(error as Error).message}` }]),
    Either.flatMap((json) =>
      Either.mapLeft(
        Schema.decodeUnknownEither(Tokens, { errors: "all", onExcessProperty: "error" })(json),
        ToolGateError.problemsOf
      )
    ),
    Either.match({
      onLeft: (problems) => Effect.fail(new TokensInvalid({ source, problems })),
      onRight: Effect.succeed
    })
  )

/**
 * The token list from a JSON file.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromFile = (
  path: string
): Effect.Effect<ReadonlyArray<TokenConfig>, TokensInvalid, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path)).pipe(
    Effect.mapError((error) => new TokensInvalid({ source: path, problems: [{ path: "", message: error.message }] })),
    Effect.flatMap((text) => fromJson(text, path))
  )

/**
 * The token list from the `TOOLGATE_TOKENS` environment variable (through Effect's `Config`, so
 * any `ConfigProvider` can supply it), holding the same JSON as a token file.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEnv: Effect.Effect<ReadonlyArray<TokenConfig>, TokensInvalid> = Effect.flatMap(
  Effect.mapError(
    Config.string("TOOLGATE_TOKENS"),
    () => new TokensInvalid({ source: "TOOLGATE_TOKENS", problems: [{ path: "", message: "is not set" }] })
  ),
  (text) => fromJson(text, "TOOLGATE_TOKENS")
)
