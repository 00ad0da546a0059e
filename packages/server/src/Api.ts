/**
 * The HTTP approval API as an `HttpApi` contract: pending approvals, answers, TTL extensions,
 * session approvals, the audit log (query, its head and a resumable Server-Sent Events stream), the
 * caller's identity and health.
 * Bodies and responses are the domain schemas of `@tool-gate/core`; domain errors keep their HTTP
 * status and their body says what was wrong (`_tag`, the error's fields and `message`).
 *
 * Every group but `health` sits behind `Auth.Authentication` (bearer tokens).
 *
 * @example
 * import { OpenApi } from "@effect/platform"
 * import { Api } from "@tool-gate/server"
 *
 * const spec = OpenApi.fromApi(Api.Api)
 * console.log(Object.keys(spec.paths)) // ["/approvals/pending", "/approvals/{requestId}", ...]
 *
 * @since 0.1.0
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import {
  ApprovalRequest,
  AuditChain,
  AuditEvent,
  Limits,
  SessionApproval,
  ToolCall,
  ToolGateError
} from "@tool-gate/core"
import { Effect, Option, ParseResult, Schema, SchemaAST } from "effect"
import { Authentication, Forbidden, Role } from "./Auth.js"
import * as OpenApiSchemas from "./internal/openApiSchemas.js"

/**
 * The core's errors compute `message` from their fields instead of storing it, so their own
 * encoding drops it. This schema encodes the same error with its `message` added (and decodes it
 * back into the class), keeping the error's HTTP status.
 */
const withMessage = <A extends { readonly message: string }, I, R>(
  error: Schema.Schema<A, I, R>
): Schema.Schema<A, I & { readonly message: string }, R> => {
  const body = Schema.extend(
    Schema.encodedSchema(error) as unknown as Schema.Struct<{}>,
    Schema.Struct({ message: Schema.String })
  )
  const identifier = Option.getOrUndefined(SchemaAST.getIdentifierAnnotation(error.ast))
  return Schema.transformOrFail(body, Schema.typeSchema(error), {
    strict: false,
    decode: (encoded) => ParseResult.decodeUnknown(error)(encoded),
    encode: (value) =>
      Effect.map(ParseResult.encode(error)(value), (encoded) => ({ ...encoded, message: value.message }))
  }).annotations({
    ...(identifier !== undefined ? { identifier } : {}),
    ...HttpApiSchema.annotations({ status: HttpApiSchema.getStatusError(error) })
  }) as unknown as Schema.Schema<A, I & { readonly message: string }, R>
}

const RequestNotFound = withMessage(ToolGateError.RequestNotFound)
const AlreadyResolved = withMessage(ToolGateError.AlreadyResolved)
const RequestExpired = withMessage(ToolGateError.RequestExpired)
const InvalidResponse = withMessage(ToolGateError.InvalidResponse)
const SessionApprovalNotFound = withMessage(ToolGateError.SessionApprovalNotFound)
const PersistenceError = withMessage(ToolGateError.PersistenceError)

/**
 * A session outside the token's patterns, named in the path or the query. Its body names nothing:
 * to a token limited to some sessions, the others do not exist.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()(
  "SessionNotFound",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/**
 * `SessionNotFound` with its one message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionNotFound = (): SessionNotFound => new SessionNotFound({ message: "No such session" })

/**
 * A request body over the server's limit.
 *
 * @since 0.1.0
 * @category errors
 */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { limitBytes: Schema.Number, message: Schema.String },
  HttpApiSchema.annotations({ status: 413 })
) {}

/**
 * A request for a path the server does not serve.
 *
 * @since 0.1.0
 * @category errors
 */
export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()(
  "RouteNotFound",
  { method: Schema.String, path: Schema.String, message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/**
 * A request for a path the server serves, with a method it does not serve there; `allow` lists
 * the ones it does (the response's `Allow` header too).
 *
 * @since 0.1.0
 * @category errors
 */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()(
  "MethodNotAllowed",
  { method: Schema.String, path: Schema.String, allow: Schema.Array(Schema.String), message: Schema.String },
  HttpApiSchema.annotations({ status: 405 })
) {}

// Bodies are decoded strictly: every problem is reported, and an unknown key (a misspelt
// `editedArgs`, say) is an error rather than silently ignored.
const strict = { parseOptions: { errors: "all", onExcessProperty: "error" } } as const

const RequestIdPath = Schema.Struct({ requestId: ApprovalRequest.RequestId })
const SessionPath = Schema.Struct({ sessionKey: ToolCall.SessionKey })

/**
 * The body of `POST /approvals/:requestId/extend`: whole milliseconds from 1 to a year
 * (`Limits.TtlMillis`, as every duration the gate takes). The deadline moves to `ttlMs` from now
 * only if that is later, unless `allowShorten` is `true`.
 *
 * @since 0.1.0
 * @category models
 */
export const Extension = Schema.Struct({
  // the bounds the filter checks, said in the document too (the filter alone reads as any number)
  ttlMs: Limits.TtlMillis.annotations({
    jsonSchema: { type: "integer", minimum: 1, maximum: Limits.maxTtlMs }
  }),
  allowShorten: Schema.optional(Schema.Boolean).annotations({
    description: "`true` lets `ttlMs` bring the deadline forward; by default a deadline already later is kept"
  })
}).annotations({ identifier: "Extension", ...strict })

/**
 * What clearing a session's approvals did.
 *
 * @since 0.1.0
 * @category models
 */
export const Cleared = Schema.Struct({ sessionKey: Schema.String, cleared: Schema.Number }).annotations({
  identifier: "Cleared"
})

// Decimal digits only: NumberFromString would also read "1e3", "0x1", " 1" and "1.0".
const SeqParam = Schema.String.pipe(
  Schema.pattern(/^(0|[1-9][0-9]*)$/, { message: () => "expected a decimal integer (digits only, no leading zero)" }),
  Schema.compose(Schema.NumberFromString),
  Schema.lessThanOrEqualTo(Number.MAX_SAFE_INTEGER),
  Schema.annotations({ description: "an audit sequence number (`seq`): decimal digits, at most 2^53 - 1" })
)
const streamFilters = {
  afterSeq: Schema.optional(SeqParam),
  sessionKey: Schema.optional(ToolCall.SessionKey),
  toolName: Schema.optional(Schema.NonEmptyTrimmedString),
  outcome: Schema.optional(AuditEvent.Outcome),
  since: Schema.optional(AuditEvent.TimeFromString),
  until: Schema.optional(AuditEvent.TimeFromString)
}

/**
 * The filters of `GET /audit` (all optional; `limit` defaults to 100, at most 1000). `since` and
 * `until` (inclusive) take RFC 3339 (`2026-11-24T09:00:00Z`) or epoch milliseconds; the stream
 * takes the same filters but `limit`.
 *
 * @since 0.1.0
 * @category models
 */
export const AuditParams = Schema.Struct({
  ...streamFilters,
  // decimal digits only, as `afterSeq`: NumberFromString alone reads "1e3" and " 10"
  limit: Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^[1-9][0-9]{0,3}$/, { message: () => "expected a whole number from 1 to 1000 (digits only)" }),
      Schema.compose(Schema.NumberFromString),
      Schema.int(),
      Schema.between(1, 1000)
    )
  )
})

/**
 * The latest audit sequence number: `GET /audit/stream` with `Last-Event-ID` set to it carries
 * exactly the events committed after it was read.
 *
 * @since 0.1.0
 * @category models
 */
export const AuditHead = Schema.Struct({ lastSeq: Schema.Int.pipe(Schema.nonNegative()) }).annotations({
  identifier: "AuditHead"
})

/**
 * Who the presented token is (never the token itself): `sessions` is absent for a token that
 * sees every session.
 *
 * @since 0.1.0
 * @category models
 */
export const Identity = Schema.Struct({
  name: Schema.String,
  role: Role,
  sessions: Schema.optional(Schema.Array(Schema.String))
}).annotations({ identifier: "Identity" })

/**
 * `GET /health` when the store does not answer. The body says nothing more: the endpoint needs no
 * token, and the store's error text (paths, SQL, hosts) is for the server's log.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()(
  "Unavailable",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** An endpoint on one request named in the path: it answers the request, or `RequestNotFound`. */
const onRequest = <Name extends string, Method extends HttpMethod>(
  endpoint: HttpApiEndpoint.HttpApiEndpoint<Name, Method>
) => endpoint.setPath(RequestIdPath).addSuccess(ApprovalRequest.ApprovalRequest).addError(RequestNotFound)

/** An endpoint on one session named in the path: `SessionNotFound` for one outside the token's patterns. */
const onSession = <Name extends string, Method extends HttpMethod>(
  endpoint: HttpApiEndpoint.HttpApiEndpoint<Name, Method>
) => endpoint.setPath(SessionPath).addError(SessionNotFound)

/** A group behind a token: `Authentication`, and the errors any of its endpoints may answer. */
const behindToken = <Id extends string, Endpoints extends HttpApiEndpoint.HttpApiEndpoint.Any, E, R>(
  group: HttpApiGroup.HttpApiGroup<Id, Endpoints, E, R>
) => group.middleware(Authentication).addError(Forbidden).addError(PersistenceError)

/**
 * Pending requests, one request, its answer and its extension.
 *
 * @since 0.1.0
 * @category groups
 */
export class ApprovalsGroup extends behindToken(
  HttpApiGroup.make("approvals")
    .add(
      HttpApiEndpoint.get("pending", "/approvals/pending")
        .setUrlParams(Schema.Struct({ sessionKey: Schema.optional(ToolCall.SessionKey) }))
        .addSuccess(Schema.Array(ApprovalRequest.ApprovalRequest))
        .addError(SessionNotFound)
        .annotate(
          OpenApi.Description,
          "Pending requests, oldest first, of one session or of every session the token may see."
        )
    )
    .add(
      onRequest(HttpApiEndpoint.get("get", "/approvals/:requestId"))
    )
    .add(
      onRequest(HttpApiEndpoint.post("respond", "/approvals/:requestId/respond"))
        .setPayload(ApprovalRequest.ApprovalResponse.annotations({ identifier: "ApprovalResponse", ...strict }))
        .addError(AlreadyResolved)
        .addError(RequestExpired)
        .addError(InvalidResponse)
        .addError(ToolGateError.InvalidDuration)
        .annotate(
          OpenApi.Description,
          "Answers a request exactly once. The same answer again returns the first resolution; a different one is 409. " +
            "`respondedBy` is always the token's name."
        )
    )
    .add(
      onRequest(HttpApiEndpoint.post("extend", "/approvals/:requestId/extend"))
        .setPayload(Extension)
        .addError(AlreadyResolved)
        .addError(RequestExpired)
        .addError(ToolGateError.InvalidDuration)
        .annotate(
          OpenApi.Description,
          "Moves a pending request's deadline to `ttlMs` milliseconds from now if that is later (extending never " +
            "shortens: an earlier deadline keeps the request as it is). With `allowShorten: true` it may come forward."
        )
    )
) {}

/**
 * A session's approvals: list, revoke one, clear them all.
 *
 * @since 0.1.0
 * @category groups
 */
export class SessionsGroup extends behindToken(
  HttpApiGroup.make("sessions")
    .add(
      onSession(HttpApiEndpoint.get("list", "/sessions/:sessionKey/approvals"))
        .addSuccess(Schema.Array(SessionApproval.SessionApproval))
    )
    .add(
      HttpApiEndpoint.del("revoke", "/sessions/:sessionKey/approvals/:sessionApprovalId")
        .setPath(
          Schema.Struct({ sessionKey: ToolCall.SessionKey, sessionApprovalId: SessionApproval.SessionApprovalId })
        )
        .addSuccess(SessionApproval.SessionApproval)
        .addError(SessionApprovalNotFound)
    )
    .add(
      onSession(HttpApiEndpoint.del("clear", "/sessions/:sessionKey/approvals")).addSuccess(Cleared)
    )
    .add(
      onSession(HttpApiEndpoint.post("clearByPost", "/sessions/:sessionKey/clear"))
        .addSuccess(Cleared)
        .annotate(
          OpenApi.Description,
          "The same as DELETE /sessions/{sessionKey}/approvals, for clients that only POST."
        )
    )
) {}

/**
 * The stream's answer in the OpenAPI document: one event of the stream, its `data` the JSON of an
 * `AuditEvent` (the schema `GET /audit` answers with), where the generated entry says `string`.
 * The form OpenAPI 3.2 gives Server-Sent Events (`itemSchema`), under 3.1's `schema`.
 */
const streamResponse = (operation: Record<string, any>): Record<string, any> => ({
  ...operation,
  responses: {
    ...operation["responses"],
    200: {
      description: "A stream of Server-Sent Events, one per audit event; comment lines keep an idle stream open.",
      content: {
        "text/event-stream": {
          schema: {
            type: "object",
            description: "One event of the stream: its fields, each on its own line (`id: 7`, `data: {...}`).",
            required: ["id", "data"],
            properties: {
              id: { type: "string", pattern: "^[0-9]+$", description: "the event's `seq`: resume after it" },
              data: {
                type: "string",
                description: "the audit event's JSON, on one line",
                contentMediaType: "application/json",
                contentSchema: { $ref: "#/components/schemas/AuditEvent" }
              },
              retry: { type: "string", pattern: "^[0-9]+$", description: "the reconnection delay in milliseconds" }
            }
          }
        }
      }
    }
  }
})

/**
 * The audit log: a filtered query, its head, a resumable stream, and the check of its hash chain.
 *
 * @since 0.1.0
 * @category groups
 */
export class AuditGroup extends behindToken(
  HttpApiGroup.make("audit")
    .add(
      HttpApiEndpoint.get("query", "/audit")
        .setUrlParams(AuditParams)
        .addSuccess(Schema.Array(AuditEvent.Json))
        .addError(SessionNotFound)
        .annotate(OpenApi.Description, "Events in sequence order; page with `afterSeq` = the last `seq` received.")
    )
    .add(
      HttpApiEndpoint.get("head", "/audit/head")
        .addSuccess(AuditHead)
        .annotate(
          OpenApi.Description,
          "The latest sequence number in the log (0 when empty), for any token: a stream resumed from it " +
            "(`Last-Event-ID`) misses nothing that happens after this answer."
        )
    )
    .add(
      HttpApiEndpoint.get("stream", "/audit/stream")
        .setUrlParams(Schema.Struct(streamFilters))
        .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(SeqParam) }))
        .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
        .addError(SessionNotFound)
        .annotate(
          OpenApi.Description,
          "Server-Sent Events: replay after `Last-Event-ID` (or `afterSeq`), then live. Each event is " +
            "`id: <seq>` and `data: <AuditEvent JSON>`; reconnecting with the last id misses nothing and repeats nothing."
        )
        .annotate(OpenApi.Transform, streamResponse)
    )
    .add(
      HttpApiEndpoint.get("verify", "/audit/verify")
        .setUrlParams(Schema.Struct({ anchor: Schema.optional(AuditChain.AnchorFromString) }))
        .addSuccess(AuditChain.Report)
        .annotate(
          OpenApi.Description,
          "Checks the whole log's hash chain: no seq missing, every event matching its hash and linked to the one " +
            "before it; a broken chain is a 200 report naming the first bad event. `anchor=SEQ:HASH`, a head recorded " +
            "earlier, must still be in place (catches a deleted tail or a recomputed chain). Needs a token that may " +
            "see every session."
        )
    )
) {}

/**
 * Who the presented token is.
 *
 * @since 0.1.0
 * @category groups
 */
export class IdentityGroup extends HttpApiGroup.make("identity")
  .add(
    HttpApiEndpoint.get("me", "/me")
      .addSuccess(Identity)
      .annotate(OpenApi.Description, "The token's name, role and session patterns, for any valid token.")
  )
  .middleware(Authentication)
{}

/**
 * Unlike the groups behind a token, it never answers `PersistenceError`, whose message carries
 * the store's error.
 *
 * @since 0.1.0
 * @category groups
 */
export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .addError(Unavailable)
      .annotate(
        OpenApi.Description,
        "200 when the server and its store answer; 503 `Unavailable` (no detail) when the store does not. No token needed."
      )
  )
{}

/**
 * The API. Its OpenAPI document's schemas compile as JSON Schema 2020-12 in a strict validator.
 *
 * @since 0.1.0
 * @category api
 */
export class Api extends HttpApi.make("tool-gate")
  .add(ApprovalsGroup)
  .add(SessionsGroup)
  .add(AuditGroup)
  .add(IdentityGroup)
  .add(HealthGroup)
  .addError(PayloadTooLarge)
  .annotate(OpenApi.Title, "tool-gate approval API")
  .annotate(OpenApi.Version, "0.1.0")
  .annotate(OpenApi.Transform, OpenApiSchemas.typedRefs)
{}
