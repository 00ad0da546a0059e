/**
 * The two routes a busy approval server serves most, answers and pending lists, taken before the
 * router: an HttpApi route costs a copy of the request's whole context, the router's lookup and
 * the endpoint's generic decoding on every request. The lean route does what the HttpApi route
 * does, in the same order, with the same schemas (read from the `Api` itself), the same bearer
 * decoding and `Authentication` service, and the same handler function; its failures go to the
 * same error encoding, since it runs inside the API's middleware. It takes only requests whose
 * method, path and query it can read without decoding (plain ids and session keys, no other
 * query parameter, a JSON body): anything else goes to the router as before.
 *
 * On Node's server (`makeNode`) the event stream of the whole log is taken too (`afterSeq` and
 * `Last-Event-ID` at most, checked by the endpoint's own schemas, and a known token): its bytes go
 * to the socket's response itself, with no body stream between and none of the platform's work
 * per request, which every reconnecting client pays again.
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
import {
  type Cause,
  Context,
  Effect,
  Either,
  Exit,
  FiberId,
  Option,
  ParseResult,
  Redacted,
  Runtime,
  Schema,
  Tracer
} from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
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
/**
 * A schema of an endpoint, as its type says it is, decoding without an Effect: an `Either`, which
 * the platform middleware's routes run as an effect and Node's fast path reads in the listener's step.
 */
const decoderOf = <A>(schema: Option.Option<unknown>) =>
  Schema.decodeUnknownEither(Option.getOrThrow(schema) as Schema.Schema<A, unknown>)
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
const streamPath = "/audit/stream"
const streamQuery = /^\/audit\/stream(?:\?afterSeq=([0-9]+))?$/

const streamEndpoint = Api.groups.audit.endpoints.stream
// the event stream's own checks of `afterSeq` and `Last-Event-ID`
const decodeStreamParams = decoderOf<{ readonly afterSeq?: number | undefined }>(streamEndpoint.urlParamsSchema)
const decodeStreamHeaders = decoderOf<{ readonly "last-event-id"?: number | undefined }>(
  streamEndpoint.headersSchema
)

/** The bearer token as the HttpApi security middleware reads it. */
const bearer = HttpApiBuilder.securityDecode(HttpApiSecurity.bearer)
// what that middleware cuts off the header (`securityDecode`)
const bearerLength = "Bearer ".length

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

const encoder = new TextEncoder()

/** A response as the platform's Node server writes it (`handleResponse`), for the bodies these routes answer with. */
const writeResponse = (response: ServerResponse, answer: HttpServerResponse.HttpServerResponse) => {
  if (response.writableEnded) return
  const body = answer.body
  response.writeHead(answer.status, answer.headers)
  if (body._tag === "Uint8Array") response.end(body.body)
  else response.end()
}

/**
 * The lean routes on Node's server, before the platform (`internal/nodeFastPath.ts`): a request
 * the lean routes would take, with a JSON body of a declared length within the limit (or none for
 * a list), is read here. When every check passes (the body nests within the limit and parses, the
 * token is known, the path and payload decode), the handler runs under the token's principal and
 * its answer (or its failure, through the API's own error encoding) is written as the platform
 * would; when any check fails, the request goes through the same middleware the platform runs
 * (`fallback`, on a request rebuilt from what was read), so every refusal is the platform's own,
 * in its order. A request this path does not take is left to the platform untouched.
 */
export const makeNode = <E1, E2, R>(options: {
  readonly limitBytes: number
  /** the body limit's nesting check */
  readonly nestsTooDeep: (text: string) => boolean
  /** the `Authentication` service's bearer check; reads nothing of the request */
  readonly authenticate: (token: Redacted.Redacted) => Effect.Effect<Auth.Principal, Auth.Unauthorized>
  readonly handlers: Handlers<E1, E2>
  /** a handler's failure (or defect) as the API answers it */
  readonly encodeFailure: (
    cause: Cause.Cause<E1 | E2>
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>
  /** the request through the platform's middleware (body limit, lean routes, error encoding) */
  readonly fallback: (
    request: HttpServerRequest.HttpServerRequest
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>
  /** the headers every response gets before it is written */
  readonly finish: (
    url: string,
    response: HttpServerResponse.HttpServerResponse
  ) => HttpServerResponse.HttpServerResponse
  /**
   * The whole audit log as the token's principal may see it, as an event stream from after
   * `afterSeq`, written to `response` (its status and headers, `streamHead`, written already).
   */
  readonly stream: (
    response: ServerResponse,
    afterSeq: number | undefined,
    principal: Auth.Principal
  ) => Effect.Effect<void>
  /** the event stream's status and headers, as its endpoint answers (before `finish`) */
  readonly streamHead: HttpServerResponse.HttpServerResponse
  readonly runtime: Runtime.Runtime<R>
}) => {
  const runFork = Runtime.runFork(options.runtime)

  /** The request rebuilt from what was read, for the platform's middleware. */
  const rebuilt = (request: IncomingMessage, text: string | undefined) => {
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) {
      if (Array.isArray(value)) { for (const one of value) headers.append(name, one) }
      else if (value !== undefined) headers.set(name, value)
    }
    return HttpServerRequest.fromWeb(
      // the path only: what the Host header says plays no part in the routes
      new Request(`http://localhost${request.url ?? "/"}`, {
        method: request.method ?? "GET",
        headers,
        // as bytes: a string body would bring a text/plain content type of its own
        ...(text === undefined ? {} : { body: encoder.encode(text) })
      })
    )
  }

  /**
   * A runtime whose fibers start under `principal`, where the handlers read it: a request's fiber
   * gets it from the start, with no provide around the handler (about 25 Effect steps).
   */
  const under = (principal: Auth.Principal) =>
    Runtime.make({
      context: Context.add(options.runtime.context, Auth.CurrentPrincipal, principal),
      runtimeFlags: options.runtime.runtimeFlags,
      fiberRefs: options.runtime.fiberRefs
    })

  const handle = (
    request: IncomingMessage,
    response: ServerResponse,
    url: string,
    text: string | undefined,
    run: (body: unknown) => Option.Option<
      Effect.Effect<HttpServerResponse.HttpServerResponse, E1 | E2, Auth.CurrentPrincipal>
    >
  ) => {
    let body: unknown = undefined
    let plain = true
    if (text !== undefined) {
      if (options.nestsTooDeep(text)) plain = false
      else {
        try {
          body = JSON.parse(text)
        } catch {
          plain = false
        }
      }
    }
    // The token first, as the `Authentication` middleware checks it, then the path and payload: in
    // this step (the check reads nothing but the token and completes at once; the schemas are the
    // endpoint's own). Anything refused goes to the platform, to be refused as it refuses it.
    const principal = plain
      ? Effect.runSyncExit(
        options.authenticate(Redacted.make((request.headers.authorization ?? "").slice(bearerLength)))
      )
      : undefined
    const accepted = principal !== undefined && Exit.isSuccess(principal)
      ? Option.map(run(body), (handler) => ({ handler, principal: principal.value }))
      : Option.none()
    const written = <RA>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E1 | E2, RA>) =>
      Effect.map(
        // a defect anywhere here (a request that cannot be rebuilt) is the platform's 500, not silence
        Effect.catchAllCause(effect, options.encodeFailure),
        (answer) => writeResponse(response, options.finish(url, answer))
      )
    const fiber = Option.isSome(accepted)
      ? Runtime.runFork(under(accepted.value.principal))(written(accepted.value.handler))
      : runFork(written(Effect.suspend(() => options.fallback(rebuilt(request, text)))))
    // as the platform does: a client gone before its answer interrupts the work for it
    response.on("close", () => {
      if (!response.writableEnded) fiber.unsafeInterruptAsFork(FiberId.none)
    })
  }

  /**
   * An event stream of the whole log for a known token: its head, then what `stream` writes.
   * The token is checked in the listener's step (the check reads nothing but the token, and
   * completes at once): a request it refuses is left to the platform, to be refused as the platform
   * refuses it. Nothing is interrupted when the client goes: the stream's part ends with the
   * response's close.
   */
  const follow = (request: IncomingMessage, response: ServerResponse, url: string, afterSeq: number | undefined) => {
    const principal = Effect.runSyncExit(
      options.authenticate(Redacted.make((request.headers.authorization ?? "").slice(bearerLength)))
    )
    if (Exit.isFailure(principal)) return false
    runFork(Effect.suspend(() => {
      if (response.writableEnded || response.destroyed) return Effect.void
      const head = options.finish(url, options.streamHead)
      response.writeHead(head.status, head.headers)
      return options.stream(response, afterSeq, principal.value)
    }))
    return true
  }

  return (request: IncomingMessage, response: ServerResponse): boolean => {
    const url = request.url ?? ""
    const headers = request.headers
    if (headers["transfer-encoding"] !== undefined) return false
    const length = headers["content-length"]
    if (request.method === "GET" && url.startsWith(streamPath)) {
      if (length !== undefined && length !== "0") return false
      const match = streamQuery.exec(url)
      if (match === null) return false
      // what the endpoint would refuse is left to it, to be refused as it refuses it
      const params = decodeStreamParams(match[1] === undefined ? {} : { afterSeq: match[1] })
      const lastEventId = headers["last-event-id"]
      const head = decodeStreamHeaders(lastEventId === undefined ? {} : { "last-event-id": lastEventId })
      if (Either.isLeft(params) || Either.isLeft(head)) return false
      // a reconnecting EventSource sends the last id it saw; it wins over the URL it reuses
      return follow(request, response, url, head.right["last-event-id"] ?? params.right.afterSeq)
    }
    if (request.method === "POST") {
      const match = respondPath.exec(url)
      if (match === null) return false
      const contentType = headers["content-type"]
      if (contentType !== undefined && !contentType.toLowerCase().trim().includes("application/json")) return false
      // an empty body is left to the platform too: its reader and a rebuilt request's read it differently
      if (length === undefined || !/^[1-9][0-9]{0,8}$/.test(length) || Number(length) > options.limitBytes) return false
      const requestId = match[1]!
      const run = (body: unknown) => {
        const path = decodeRespondPath({ requestId })
        if (Either.isLeft(path)) return Option.none()
        const payload = decodeRespondPayload(body)
        return Either.isLeft(payload)
          ? Option.none()
          : Option.some(options.handlers.respond(path.right.requestId, payload.right))
      }
      let text = ""
      request.setEncoding("utf8")
      request.on("data", (chunk: string) => {
        text += chunk
      })
      request.once("end", () => handle(request, response, url, text, run))
      // a body that cannot be read leaves no client to answer
      request.once("error", () => response.destroy())
      return true
    }
    if (request.method !== "GET" || !url.startsWith(pendingPath)) return false
    if (length !== undefined && length !== "0") return false
    let sessionKey: string | undefined
    if (url !== pendingPath) {
      const match = pendingQuery.exec(url)
      if (match === null) return false
      sessionKey = match[1]!
    }
    const run = () =>
      Option.map(
        Option.getRight(decodePendingParams(sessionKey === undefined ? {} : { sessionKey })),
        (params) => options.handlers.pending(params.sessionKey)
      )
    handle(request, response, url, undefined, run)
    return true
  }
}
