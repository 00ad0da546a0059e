/**
 * The two routes a busy approval server serves most, answers and pending lists, taken before the
 * router: an HttpApi route costs a copy of the request's whole context, the router's lookup and
 * the endpoint's generic decoding on every request. The lean route does what the HttpApi route
 * does, in the same order, with the same schemas (read from the `Api` itself), the same bearer
 * decoding and `Authentication` service, and the same handler function; its failures go to the
 * same error encoding, since it runs inside the API's middleware. It takes only requests whose
 * method, path and query it can read without decoding (plain ids and session keys, no other
 * query parameter, a JSON body): anything else goes to the router as before.
 */
import {
  HttpApiBuilder,
  HttpApiError,
  HttpApiSecurity,
  type HttpApp,
  type HttpRouter,
  HttpServerRequest,
  type HttpServerResponse
} from "@effect/platform"
import type { ApprovalRequest, ToolCall } from "@tool-gate/core"
import { Effect, Option, ParseResult, type Redacted, Schema, Tracer } from "effect"
import { Api } from "../Api.js"
import * as Auth from "../Auth.js"

/** The handlers the lean routes call: the approvals group's own. */
export interface Handlers<E1, E2> {
  readonly respond: (
    requestId: ApprovalRequest.RequestId,
    payload: ApprovalRequest.ApprovalResponse
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E1, Auth.CurrentPrincipal>
  readonly pending: (
    sessionKey: ToolCall.SessionKey | undefined
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E2, Auth.CurrentPrincipal>
}

const endpoints = Api.groups.approvals.endpoints
/** A schema of an endpoint, as its type says it is. */
const decoderOf = <A>(schema: Option.Option<unknown>) =>
  Schema.decodeUnknown(Option.getOrThrow(schema) as Schema.Schema<A, unknown>)
const decodeRespondPath = decoderOf<{ readonly requestId: ApprovalRequest.RequestId }>(endpoints.respond.pathSchema)
const decodeRespondPayload = decoderOf<ApprovalRequest.ApprovalResponse>(endpoints.respond.payloadSchema)
const decodePendingParams = decoderOf<{ readonly sessionKey?: ToolCall.SessionKey | undefined }>(
  endpoints.pending.urlParamsSchema
)

// Characters the router hands on as they are (no percent-decoding, no path separators, no dots),
// at most as many as it takes in a path parameter (find-my-way's `maxParamLength`: a longer one
// matches no route).
const respondPath = /^\/approvals\/([A-Za-z0-9_-]{1,100})\/respond$/
const pendingPath = "/approvals/pending"
const pendingQuery = /^\/approvals\/pending\?sessionKey=([A-Za-z0-9_-]+)$/

/** The bearer token as the HttpApi security middleware reads it. */
const bearer = HttpApiBuilder.securityDecode(HttpApiSecurity.bearer)

/** A body the endpoint reads as JSON: its content type, as HttpApiBuilder reads it (none is JSON). */
const jsonBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const contentType = request.headers["content-type"]
  return contentType === undefined || contentType.toLowerCase().trim().includes("application/json")
}

/** The route's pattern on the server span, as the router sets it (when a tracer is installed). */
const routeAttribute = (route: string) =>
  Effect.map(Effect.serviceOption(Tracer.ParentSpan), (span) => {
    if (span._tag === "Some" && span.value._tag === "Span") span.value.attribute("http.route", route)
  })

/**
 * A middleware of the API that serves the lean routes and hands every other request to `app`.
 */
export const make = <E1, E2>(
  /** the `Authentication` service's bearer check */
  authenticate: (
    token: Redacted.Redacted
  ) => Effect.Effect<Auth.Principal, Auth.Unauthorized, HttpRouter.HttpRouter.Provided>,
  handlers: Handlers<E1, E2>
) => {
  /** The handler under the token's principal, as the `Authentication` middleware runs it: first. */
  const authenticated = <E>(
    handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E | ParseResult.ParseError, Auth.CurrentPrincipal>
  ) =>
    Effect.flatMap(
      Effect.flatMap(bearer, authenticate),
      (principal) =>
        Effect.provideService(
          Effect.catchAll(handler, (error): Effect.Effect<never, HttpApiError.HttpApiDecodeError | E> =>
            ParseResult.isParseError(error)
              ? HttpApiError.HttpApiDecodeError.refailParseError(error)
              : Effect.fail(error)),
          Auth.CurrentPrincipal,
          principal
        )
    )

  const respond = (request: HttpServerRequest.HttpServerRequest, requestId: string) =>
    Effect.zipRight(
      routeAttribute("/approvals/:requestId/respond"),
      authenticated(Effect.gen(function*() {
        const path = yield* decodeRespondPath({ requestId })
        const payload = yield* decodeRespondPayload(yield* Effect.orDie(request.json))
        return yield* handlers.respond(path.requestId, payload)
      }))
    )

  const pending = (sessionKey: string | undefined) =>
    Effect.zipRight(
      routeAttribute(pendingPath),
      authenticated(Effect.flatMap(
        decodePendingParams(sessionKey === undefined ? {} : { sessionKey }),
        (params) => handlers.pending(params.sessionKey)
      ))
    )

  return <E, R>(app: HttpApp.Default<E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request): HttpApp.Default<
      E | E1 | E2 | Auth.Unauthorized | HttpApiError.HttpApiDecodeError,
      R | HttpRouter.HttpRouter.Provided
    > => {
      const url = request.url
      if (request.method === "POST") {
        const match = respondPath.exec(url)
        if (match !== null && jsonBody(request)) return respond(request, match[1]!)
      } else if (request.method === "GET" && url.startsWith(pendingPath)) {
        if (url === pendingPath) return pending(undefined)
        const match = pendingQuery.exec(url)
        if (match !== null) return pending(match[1]!)
      }
      return app
    })
}
