/**
 * What the `toolgate` commands need from tool-gate, written once and served two ways: `layerDirect`
 * opens the SQLite file itself (the `ToolGate` service of `@tool-gate/core` over
 * `@tool-gate/sqlite`), `layerRemote` talks to a running `toolgate serve` through a client derived
 * from the server's `HttpApi` contract, so both sides share one set of schemas and errors.
 *
 * @example
 * import { Backend } from "@tool-gate/cli"
 * import { Policy } from "@tool-gate/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.flatMap(Backend.Backend, (backend) => backend.pending(undefined))
 * const direct = Backend.layerDirect({ filename: ".toolgate/toolgate.db", policy: Policy.allowAll, actor: "ana" })
 * Effect.runPromise(program.pipe(Effect.provide(direct)))
 *
 * @since 0.1.0
 */
import {
  FetchHttpClient,
  HttpApiClient,
  HttpApiError,
  HttpClient,
  HttpClientRequest,
  HttpClientResponse
} from "@effect/platform"
import {
  type ApprovalRequest,
  ApprovalStore,
  AuditEvent,
  type Policy,
  type SessionApproval,
  type ToolCall,
  ToolGate,
  ToolGateError
} from "@tool-gate/core"
import { Api, Auth } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Chunk, Context, Effect, Layer, Option, type Redacted, Schema, Stream } from "effect"

/**
 * The server could not be reached, or answered something the API does not define.
 *
 * @since 0.1.0
 * @category errors
 */
export class ServerUnavailable extends Schema.TaggedError<ServerUnavailable>()("ServerUnavailable", {
  url: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `Server ${this.url}: ${this.detail}`
  }
}

/**
 * An input the command or the server refused before acting on it.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", { message: Schema.String }) {}

/**
 * Every failure a command can meet, whichever backend serves it.
 *
 * @since 0.1.0
 * @category errors
 */
export type BackendError =
  | ToolGateError.RequestNotFound
  | ToolGateError.AlreadyResolved
  | ToolGateError.RequestExpired
  | ToolGateError.InvalidResponse
  | ToolGateError.SessionApprovalNotFound
  | ToolGateError.PersistenceError
  | Auth.Unauthorized
  | Auth.Forbidden
  | ServerUnavailable
  | InvalidInput

/**
 * An answer as the command gives it; who answers is the backend's business (the `--actor` on the
 * file, the token's name on a server).
 *
 * @since 0.1.0
 * @category models
 */
export type Answer = Omit<ApprovalRequest.ApprovalResponse, "respondedBy">

/**
 * @since 0.1.0
 * @category models
 */
export interface AuditOptions {
  readonly afterSeq?: number | undefined
  readonly sessionKey?: string | undefined
  /** replay, then keep tailing new events until interrupted */
  readonly follow: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** what the commands act on, for messages: the file or the server URL */
  readonly target: string
  readonly pending: (
    sessionKey: string | undefined
  ) => Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, BackendError>
  readonly respond: (requestId: string, answer: Answer) => Effect.Effect<ApprovalRequest.ApprovalRequest, BackendError>
  readonly extend: (requestId: string, ttlMs: number) => Effect.Effect<ApprovalRequest.ApprovalRequest, BackendError>
  readonly sessionApprovals: (
    sessionKey: string
  ) => Effect.Effect<ReadonlyArray<SessionApproval.SessionApproval>, BackendError>
  readonly revoke: (sessionKey: string, id: string) => Effect.Effect<SessionApproval.SessionApproval, BackendError>
  /** revokes every session approval of the session; returns how many */
  readonly clear: (sessionKey: string) => Effect.Effect<number, BackendError>
  readonly audit: (options: AuditOptions) => Stream.Stream<AuditEvent.AuditEvent, BackendError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Backend extends Context.Tag("@tool-gate/cli/Backend")<Backend, Service>() {}

const pageSize = 1000

/** Pages of `limit` events after `afterSeq` until a short page: the log so far, in bounded memory. */
const paged = <E>(
  page: (afterSeq: number) => Effect.Effect<ReadonlyArray<AuditEvent.AuditEvent>, E>,
  afterSeq: number
): Stream.Stream<AuditEvent.AuditEvent, E> =>
  Stream.paginateChunkEffect(afterSeq, (after) =>
    Effect.map(page(after), (events) => {
      const last = events[events.length - 1]
      return [
        Chunk.fromIterable(events),
        events.length < pageSize || last === undefined ? Option.none() : Option.some(last.seq)
      ] as const
    }))

/**
 * @since 0.1.0
 * @category models
 */
export interface DirectOptions {
  readonly filename: string
  /** judges approvals with edited arguments again; nothing else a command does evaluates calls */
  readonly policy: Policy.Policy
  /** recorded as who answered, extended or revoked */
  readonly actor: string
}

/**
 * The commands on the SQLite file: the same gate an agent process uses, so answers are exactly
 * once across every process sharing the file.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerDirect = (options: DirectOptions): Layer.Layer<Backend, ToolGateError.PersistenceError> =>
  Layer.effect(
    Backend,
    Effect.gen(function*() {
      const gate = yield* ToolGate.ToolGate
      const store = yield* ApprovalStore.ApprovalStore
      const { actor } = options
      return Backend.of({
        target: options.filename,
        pending: (sessionKey) => gate.pending({ sessionKey }),
        respond: (requestId, answer) => gate.respond(requestId, { ...answer, respondedBy: actor }),
        extend: (requestId, ttlMs) => gate.extend(requestId, ttlMs, actor),
        sessionApprovals: (sessionKey) => gate.sessionApprovals(sessionKey),
        revoke: (sessionKey, id) =>
          Effect.gen(function*() {
            // Ids are global; naming the session guards against revoking another session's grant.
            const held = yield* gate.sessionApprovals(sessionKey)
            if (!held.some((approval) => approval.id === id)) {
              return yield* new ToolGateError.SessionApprovalNotFound({ sessionApprovalId: id })
            }
            return yield* gate.revokeApproval(id, actor)
          }),
        clear: (sessionKey) => gate.clearApprovals(sessionKey, actor),
        audit: ({ afterSeq = 0, follow, sessionKey }) =>
          follow
            ? gate.auditLog({ afterSeq, sessionKey })
            : paged((after) => store.events({ afterSeq: after, sessionKey, limit: pageSize }), afterSeq)
      })
    })
  ).pipe(Layer.provide(ToolGateSqlite.layer({ filename: options.filename, policy: options.policy })))

/**
 * @since 0.1.0
 * @category models
 */
export interface RemoteOptions {
  /** the server's base URL, e.g. `http://127.0.0.1:7070` */
  readonly url: string
  /** the bearer token; without one the server answers 401 */
  readonly token: Option.Option<Redacted.Redacted>
}

// What a failed reply carries when the API declares it; anything else is the server's fault.
const ErrorReply = Schema.Union(Auth.Unauthorized, Auth.Forbidden)

const withToken = (token: Option.Option<Redacted.Redacted>) => (request: HttpClientRequest.HttpClientRequest) =>
  Option.match(token, { onNone: () => request, onSome: (value) => HttpClientRequest.bearerToken(request, value) })

/** Server-Sent Events as audit events: `data:` lines up to a blank line make one event. */
const sseEvents = <E>(body: Stream.Stream<Uint8Array, E>) =>
  body.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.mapAccum("", (data, line) =>
      line === ""
        ? ["", data === "" ? Option.none<string>() : Option.some(data)]
        : [line.startsWith("data:") ? data + line.slice(5).trimStart() : data, Option.none<string>()]),
    Stream.filterMap((data) => data),
    Stream.mapEffect((data) => Schema.decode(Schema.parseJson(AuditEvent.AuditEvent))(data))
  )

/**
 * The commands against a running server, authenticated by a bearer token: the server decides
 * who answers (the token's name) and which sessions the token may see.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRemote = (options: RemoteOptions): Layer.Layer<Backend> =>
  Layer.effect(
    Backend,
    Effect.gen(function*() {
      const url = options.url.replace(/\/+$/, "")
      const http = (yield* HttpClient.HttpClient).pipe(HttpClient.mapRequest(withToken(options.token)))
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
              case "SessionApprovalNotFound":
              case "PersistenceError":
              case "Unauthorized":
              case "Forbidden":
                return Effect.fail(error as BackendError)
              case "RequestError":
                return Effect.fail(unavailable(`cannot connect (${String((error as { cause?: unknown }).cause ?? error)})`))
              case "ResponseError":
                return Effect.fail(unavailable(`unexpected reply: ${(error as unknown as Error).message}`))
            }
          }
          return Effect.fail(unavailable(`unreadable reply: ${String(error)}`))
        })
      const stream = ({ afterSeq, sessionKey }: AuditOptions) =>
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
          return Stream.mapError(sseEvents(response.stream), (error) =>
            error._tag === "ParseError"
              ? unavailable(`unreadable event: ${error.message}`)
              : unavailable(`the event stream failed: ${error.message}`))
        }))
      // The server checks ids and session keys against its schemas; these casts only name them.
      const request = (requestId: string) => ({ requestId: requestId as ApprovalRequest.RequestId })
      const session = (sessionKey: string) => sessionKey as ToolCall.SessionKey
      return Backend.of({
        target: url,
        pending: (sessionKey) =>
          call(client.approvals.pending({ urlParams: { sessionKey: sessionKey === undefined ? undefined : session(sessionKey) } })),
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
            ? stream(options)
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
