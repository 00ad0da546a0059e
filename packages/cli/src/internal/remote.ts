/**
 * The `Backend` against a running server: a client derived from the server's `HttpApi` contract
 * (its schemas and typed errors), a bearer token on every request, and the audit stream read as
 * Server-Sent Events.
 */
import {
  FetchHttpClient,
  HttpApiClient,
  HttpApiError,
  HttpClient,
  HttpClientRequest,
  HttpClientResponse
} from "@effect/platform"
import type { ApprovalRequest, SessionApproval, ToolCall } from "@tool-gate/core"
import { Api, Auth } from "@tool-gate/server"
import { Effect, Layer, Option, type Redacted, Schedule, Schema, Stream } from "effect"
import {
  type AuditOptions,
  Backend,
  type BackendError,
  InvalidInput,
  type RemoteOptions,
  ServerRedirected,
  ServerUnavailable
} from "../Backend.js"
import { paged, pageSize, sseEvents } from "./audit.js"

// What a failed reply carries when the API declares it; anything else is the server's fault.
const ErrorReply = Schema.Union(Auth.Unauthorized, Auth.Forbidden, Api.SessionNotFound)

const withToken = (token: Option.Option<Redacted.Redacted>) => (request: HttpClientRequest.HttpClientRequest) =>
  Option.match(token, { onNone: () => request, onSome: (value) => HttpClientRequest.bearerToken(request, value) })

/**
 * Fetch with `redirect: "manual"` (the 3xx answer itself, nothing sent to where it leads), and a
 * 3xx answer as `ServerRedirected`: the CLI talks to the server it was given or to no one.
 */
const noRedirects = (url: string) =>
  HttpClient.transformResponse(<E, R>(effect: Effect.Effect<HttpClientResponse.HttpClientResponse, E, R>) =>
    effect.pipe(
      Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" }),
      Effect.filterOrFail(
        (response) => response.status < 300 || response.status >= 400,
        (response) =>
          new ServerRedirected({
            url,
            method: response.request.method,
            path: new URL(response.request.url).pathname,
            status: response.status,
            location: response.headers["location"]
          })
      )
    )
  )

/** The innermost cause's message: fetch says "fetch failed", its cause says why (ECONNREFUSED ...). */
const reasonOf = (error: unknown): string => {
  let reason = error
  while (reason instanceof Object && "cause" in reason && reason.cause !== undefined) reason = reason.cause
  return reason instanceof Error ? reason.message : String(reason)
}

/** `Backend.layerRemote`'s implementation. */
export const layer = (options: RemoteOptions): Layer.Layer<Backend> =>
  Layer.effect(
    Backend,
    Effect.gen(function*() {
      const url = options.url.replace(/\/+$/, "")
      const http = (yield* HttpClient.HttpClient).pipe(
        HttpClient.mapRequest(withToken(options.token)),
        noRedirects(url)
      )
      const client = yield* HttpApiClient.makeWith(Api.Api, { httpClient: http, baseUrl: url })
      const unavailable = (detail: string) => new ServerUnavailable({ url, detail })
      /** The API's own errors pass through; transport and protocol failures say what went wrong. */
      const call = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, BackendError> =>
        Effect.catchAll(effect, (error: unknown) => {
          if (error instanceof HttpApiError.HttpApiDecodeError) {
            return Effect.fail(new InvalidInput({ message: `The server refused the input: ${error.message}` }))
          }
          if (error !== null && typeof error === "object" && "_tag" in error) {
            switch (error._tag) {
              case "RequestNotFound":
              case "AlreadyResolved":
              case "RequestExpired":
              case "InvalidResponse":
              case "InvalidDuration":
              case "SessionApprovalNotFound":
              case "SessionNotFound":
              case "PersistenceError":
              case "Unauthorized":
              case "Forbidden":
              case "ServerRedirected":
                return Effect.fail(error as BackendError)
              case "RequestError":
                return Effect.fail(unavailable(`cannot connect (${reasonOf(error)})`))
              case "ResponseError":
                return Effect.fail(unavailable(`unexpected reply: ${(error as unknown as Error).message}`))
            }
          }
          return Effect.fail(unavailable(`unreadable reply: ${String(error)}`))
        })
      const stream = ({ afterSeq, sessionKey }: AuditOptions, onConnected: Effect.Effect<void>) =>
        Stream.unwrapScoped(Effect.gen(function*() {
          const request = HttpClientRequest.get(`${url}/audit/stream`).pipe(
            HttpClientRequest.setUrlParams({
              ...(afterSeq !== undefined ? { afterSeq: String(afterSeq) } : {}),
              ...(sessionKey !== undefined ? { sessionKey } : {})
            })
          )
          const response = yield* call(http.execute(request))
          if (response.status !== 200) {
            const refused = yield* call(HttpClientResponse.schemaBodyJson(ErrorReply)(response))
            return yield* Effect.fail(refused)
          }
          yield* onConnected
          return Stream.mapError(sseEvents(response.stream), (error) =>
            error._tag === "ParseError"
              ? unavailable(`unreadable event: ${error.message}`)
              : unavailable(`the event stream failed: ${error.message}`))
        }))
      /**
       * The stream, connected again after the last event seen whenever it drops once it was up (a
       * server restart): the server resumes exactly there, so nothing is missed or repeated. A
       * first connection that fails, a refused token, or a redirect (at any connection) ends the command.
       */
      const follow = (options: AuditOptions) =>
        Stream.suspend(() => {
          let afterSeq = options.afterSeq
          let connected = false
          const connectedOnce = Effect.sync(() => {
            connected = true
          })
          return Stream.suspend(() => stream({ ...options, afterSeq }, connectedOnce)).pipe(
            Stream.tap((event) =>
              Effect.sync(() => {
                afterSeq = event.seq
              })
            ),
            Stream.concat(Stream.fail(unavailable("the event stream ended"))),
            Stream.retry(
              Schedule.spaced("1 second").pipe(
                Schedule.whileInput((error: BackendError) => connected && error._tag === "ServerUnavailable")
              )
            )
          )
        })
      // The server checks ids and session keys against its schemas; these casts only name them.
      const request = (requestId: string) => ({ requestId: requestId as ApprovalRequest.RequestId })
      const session = (sessionKey: string) => sessionKey as ToolCall.SessionKey
      return Backend.of({
        target: url,
        pending: (sessionKey) =>
          call(
            client.approvals.pending({
              urlParams: { sessionKey: sessionKey === undefined ? undefined : session(sessionKey) }
            })
          ),
        respond: (requestId, answer) => call(client.approvals.respond({ path: request(requestId), payload: answer })),
        extend: (requestId, ttlMs) => call(client.approvals.extend({ path: request(requestId), payload: { ttlMs } })),
        sessionApprovals: (sessionKey) => call(client.sessions.list({ path: { sessionKey: session(sessionKey) } })),
        revoke: (sessionKey, sessionApprovalId) =>
          call(client.sessions.revoke({
            path: {
              sessionKey: session(sessionKey),
              sessionApprovalId: sessionApprovalId as SessionApproval.SessionApprovalId
            }
          })),
        clear: (sessionKey) =>
          Effect.map(call(client.sessions.clear({ path: { sessionKey: session(sessionKey) } })), (r) => r.cleared),
        audit: (options) =>
          options.follow
            ? follow(options)
            : paged(
              (after) =>
                call(client.audit.query({
                  urlParams: {
                    afterSeq: after,
                    sessionKey: options.sessionKey === undefined ? undefined : session(options.sessionKey),
                    limit: pageSize
                  }
                })),
              options.afterSeq ?? 0
            )
      })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
