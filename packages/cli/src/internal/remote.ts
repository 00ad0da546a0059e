/**
 * `Backend.layerRemote`'s service: against a running server: a client derived from the server's `HttpApi` contract
 * (its schemas and typed errors), a bearer token on every request, and the audit stream read as
 * Server-Sent Events.
 */
import {
  FetchHttpClient,
  HttpApiClient,
  HttpApiError,
  HttpClient,
  HttpClientError,
  HttpClientRequest,
  HttpClientResponse
} from "@effect/platform"
import { type ApprovalRequest, AuditEvent, type SessionApproval, type ToolCall, ToolGateError } from "@tool-gate/core"
import { Api, Auth } from "@tool-gate/server"
import { Duration, Effect, Option, type Redacted, Schedule, Schema, Stream } from "effect"
import { paged, pageSize, sseEvents } from "./audit.js"
import { InvalidInput, ServerRedirected, ServerUnavailable } from "./errors.js"

// The server's own errors a failed reply may carry (its body, or the client's decoding of it).
const ErrorReply = Schema.Union(Auth.Unauthorized, Auth.Forbidden, Api.SessionNotFound)
const isErrorReply = Schema.is(ErrorReply)

/** What a remote call fails with: the API's own errors, decoded, or what went wrong on the way. */
type RemoteError =
  | ToolGateError.ToolGateError
  | typeof ErrorReply.Type
  | ServerRedirected
  | ServerUnavailable
  | InvalidInput

/** The API's own errors arrive as instances of their classes: those pass through as they are. */
const isApiError = (error: unknown): error is RemoteError =>
  ToolGateError.isToolGateError(error) || isErrorReply(error) || error instanceof ServerRedirected

/** The server to talk to (`Backend.RemoteOptions`). */
interface Options {
  readonly url: string
  readonly token: Option.Option<Redacted.Redacted>
}

/** An answer as the command gives it (`Backend.Answer`). */
type Answer = Omit<ApprovalRequest.ApprovalResponse, "respondedBy">

/** What `audit` reads (`Backend.AuditOptions`). */
interface AuditOptions {
  readonly afterSeq?: number | undefined
  readonly sessionKey?: ToolCall.SessionKey | undefined
  readonly toolName?: string | undefined
  readonly outcome?: AuditEvent.Outcome | undefined
  readonly since?: number | undefined
  readonly until?: number | undefined
  readonly follow: boolean
}

/** The filters as query parameters (times as RFC 3339, as the server reads them too). */
const filterParams = (options: AuditOptions): Record<string, string> => ({
  ...(options.sessionKey !== undefined ? { sessionKey: options.sessionKey } : {}),
  ...(options.toolName !== undefined ? { toolName: options.toolName } : {}),
  ...(options.outcome !== undefined ? { outcome: options.outcome } : {}),
  ...(options.since !== undefined ? { since: AuditEvent.rfc3339(options.since) } : {}),
  ...(options.until !== undefined ? { until: AuditEvent.rfc3339(options.until) } : {})
})

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

/** `Backend.layerRemote`'s service. */
export const make = (options: Options) =>
  Effect.gen(function*() {
    const url = options.url.replace(/\/+$/, "")
    const http = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest(withToken(options.token)),
      noRedirects(url)
    )
    const client = yield* HttpApiClient.makeWith(Api.Api, { httpClient: http, baseUrl: url })
    const unavailable = (detail: string) => new ServerUnavailable({ url, detail })
    /** The API's own errors pass through; transport and protocol failures say what went wrong. */
    const call = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, RemoteError> =>
      Effect.catchAll(effect, (error: unknown) => {
        if (error instanceof HttpApiError.HttpApiDecodeError) {
          return Effect.fail(new InvalidInput({ message: `The server refused the input: ${error.message}` }))
        }
        if (isApiError(error)) return Effect.fail(error)
        if (HttpClientError.isHttpClientError(error)) {
          return Effect.fail(
            error._tag === "RequestError"
              ? unavailable(`cannot connect (${reasonOf(error)})`)
              : unavailable(`unexpected reply: ${error.message}`)
          )
        }
        return Effect.fail(unavailable(`unreadable reply: ${String(error)}`))
      })
    const stream = (options: AuditOptions, onConnected: Effect.Effect<void>, onRetry: (millis: number) => void) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const request = HttpClientRequest.get(`${url}/audit/stream`).pipe(
          HttpClientRequest.setUrlParams({
            ...(options.afterSeq !== undefined ? { afterSeq: String(options.afterSeq) } : {}),
            ...filterParams(options)
          })
        )
        const response = yield* call(http.execute(request))
        if (response.status !== 200) {
          const refused = yield* call(HttpClientResponse.schemaBodyJson(ErrorReply)(response))
          return yield* Effect.fail(refused)
        }
        yield* onConnected
        return Stream.mapError(sseEvents(response.stream, onRetry), (error) =>
          error._tag === "ParseError"
            ? unavailable(`unreadable event: ${error.message}`)
            : unavailable(`the event stream failed: ${error.message}`))
      }))
    /**
     * The stream, connected again after the last event seen whenever it drops once it was up (a
     * server restart): the server resumes exactly there, so nothing is missed or repeated, after
     * the server's last `retry:` hint (1 second without one). A first connection that fails, a
     * refused token, or a redirect (at any connection) ends the command.
     */
    const follow = (options: AuditOptions) =>
      Stream.suspend(() => {
        let afterSeq = options.afterSeq
        let connected = false
        let retryMs = 1000
        const connectedOnce = Effect.sync(() => {
          connected = true
        })
        const onRetry = (millis: number) => {
          retryMs = millis
        }
        return Stream.suspend(() => stream({ ...options, afterSeq }, connectedOnce, onRetry)).pipe(
          Stream.tap((event) =>
            Effect.sync(() => {
              afterSeq = event.seq
            })
          ),
          Stream.concat(Stream.fail(unavailable("the event stream ended"))),
          Stream.retry(
            Schedule.forever.pipe(
              Schedule.modifyDelay(() => Duration.millis(retryMs)),
              Schedule.whileInput((error: RemoteError) => connected && error instanceof ServerUnavailable)
            )
          )
        )
      })
    return {
      target: url,
      pending: (sessionKey: ToolCall.SessionKey | undefined) =>
        call(client.approvals.pending({ urlParams: { sessionKey } })),
      respond: (requestId: ApprovalRequest.RequestId, answer: Answer) =>
        call(client.approvals.respond({ path: { requestId }, payload: answer })),
      extend: (requestId: ApprovalRequest.RequestId, ttlMs: number, allowShorten: boolean) =>
        call(
          client.approvals.extend({ path: { requestId }, payload: allowShorten ? { ttlMs, allowShorten } : { ttlMs } })
        ),
      sessionApprovals: (sessionKey: ToolCall.SessionKey) => call(client.sessions.list({ path: { sessionKey } })),
      revoke: (sessionKey: ToolCall.SessionKey, sessionApprovalId: SessionApproval.SessionApprovalId) =>
        call(client.sessions.revoke({ path: { sessionKey, sessionApprovalId } })),
      clear: (sessionKey: ToolCall.SessionKey) =>
        Effect.map(call(client.sessions.clear({ path: { sessionKey } })), (r) => r.cleared),
      audit: (options: AuditOptions) =>
        options.follow
          ? follow(options)
          : paged(
            (after) =>
              call(client.audit.query({
                urlParams: {
                  afterSeq: after,
                  sessionKey: options.sessionKey,
                  toolName: options.toolName,
                  outcome: options.outcome,
                  since: options.since,
                  until: options.until,
                  limit: pageSize
                }
              })),
            options.afterSeq ?? 0
          )
    }
  }).pipe(Effect.provide(FetchHttpClient.layer))
