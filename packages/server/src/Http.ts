/**
 * The handlers of the approval API, one layer per group, over the `ToolGate` (and, for the audit
 * query, its head and health, the `ApprovalStore`) in context. Handlers are thin: they check what
 * the current principal may do (`Auth.readerFor` / `Auth.approverFor`), call the gate and let
 * domain errors flow out with their status. What a token may not see is answered with the error
 * for a missing one (`RequestNotFound`, `SessionApprovalNotFound`, `SessionNotFound`).
 *
 * @example
 * import { HttpApiBuilder, HttpServer } from "@effect/platform"
 * import { ApprovalStore, Policy, ToolGate } from "@tool-gate/core"
 * import { Auth, Http } from "@tool-gate/server"
 * import { Layer } from "effect"
 *
 * const policy = Policy.unsafeMake({ requireApproval: ["bash"] })
 * const Gate = ToolGate.layer({ policy }).pipe(Layer.provideMerge(ApprovalStore.layerMemory))
 * const ApiLive = Http.layer.pipe(
 *   Layer.provide(Auth.layer([{ token: "a-long-random-approver-token", name: "ana", role: "approver" }])),
 *   Layer.provide(Gate)
 * )
 * const { handler } = HttpApiBuilder.toWebHandler(Layer.mergeAll(ApiLive, HttpServer.layerContext))
 *
 * @since 0.1.0
 */
import {
  type HttpApi,
  HttpApiBuilder,
  HttpApiError,
  HttpApp,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import * as HttpServerError from "@effect/platform/HttpServerError"
import { RequestError, RouteNotFound as Unrouted } from "@effect/platform/HttpServerError"
import {
  ApprovalRequest,
  ApprovalStore,
  AuditChain,
  AuditEvent,
  Limits,
  type ToolCall,
  ToolGate,
  ToolGateError
} from "@tool-gate/core"
import { Context, Effect, Exit, FiberRef, Layer, Option, type Redacted, Schema, Scope } from "effect"
import { PassThrough, type Writable } from "node:stream"
import {
  Api,
  type Extension,
  MethodNotAllowed,
  PayloadTooLarge,
  RouteNotFound,
  sessionNotFound,
  Unavailable
} from "./Api.js"
import * as Auth from "./Auth.js"
import * as AuditFanout from "./internal/auditFanout.js"
import * as EncodeJson from "./internal/encodeJson.js"
import * as IoTurn from "./internal/ioTurn.js"
import * as LeanRoutes from "./internal/leanRoutes.js"
import * as NodeFastPath from "./internal/nodeFastPath.js"
import * as PendingLists from "./internal/pendingLists.js"
import * as PlainAuth from "./internal/plainAuth.js"
import * as ResponseHeaders from "./internal/responseHeaders.js"
import * as Routing from "./internal/routing.js"
import * as WebConsole from "./WebConsole.js"

const requestJson = EncodeJson.compile(ApprovalRequest.ApprovalRequest)

/** Requests as the endpoints' JSON, without a `Schema.encode` of what the gate read from its store. */
const json = <A>(encode: (value: A) => string) => (value: A) =>
  HttpServerResponse.text(encode(value), { contentType: "application/json" })

/**
 * What the groups share in one server: one fan-out of the live audit log (the SSE clients' and
 * the pending lists') and the pending lists it keeps fresh.
 */
class Shared extends Context.Tag("@tool-gate/server/Http/Shared")<Shared, {
  readonly fanout: AuditFanout.Fanout
  readonly pendingLists: PendingLists.PendingLists
}>() {}

const layerShared = Layer.scoped(
  Shared,
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const store = yield* ApprovalStore.ApprovalStore
    const fanout = yield* AuditFanout.make(gate, store, sseBytes)
    return { fanout, pendingLists: PendingLists.make({ gate, store, fanout, encode: requestJson }) }
  })
)

/**
 * What the approvals group does, over a gate: the HttpApi handlers and the lean routes
 * (`internal/leanRoutes.ts`) call the same functions, so both answer alike.
 */
const approvals = (gate: ToolGate.ToolGate["Type"], pendingLists: PendingLists.PendingLists) => {
  // A request of a session the token may not see is answered exactly as a missing one.
  const missing = (requestId: ApprovalRequest.RequestId) => () => new ToolGateError.RequestNotFound({ requestId })
  /** The request, once the caller may read its session. */
  const readable = (requestId: ApprovalRequest.RequestId) =>
    Effect.tap(
      gate.getRequest(requestId),
      (request) => Auth.readerFor(request.toolCall.sessionKey, missing(requestId))
    )
  type Answering = Effect.Effect<
    Auth.Approver | Auth.GlobalApprover,
    ToolGateError.RequestNotFound | ToolGateError.PersistenceError | Auth.Forbidden,
    Auth.CurrentPrincipal
  >
  /**
   * The caller, once it may answer for the request's session. A token that may answer for every
   * session needs no read of the request here: the gate reads it anyway (and answers a missing
   * one with the same `RequestNotFound`).
   */
  const approverOf = (requestId: ApprovalRequest.RequestId) =>
    Effect.flatMap(Auth.CurrentPrincipal, (principal): Answering => {
      const global = Auth.globalApprover(principal)
      if (global !== undefined) return Effect.succeed(global)
      return Effect.flatMap(
        gate.getRequest(requestId),
        (request) => Auth.approverFor(request.toolCall.sessionKey, missing(requestId))
      )
    })
  return {
    pending: (sessionKey: ToolCall.SessionKey | undefined) =>
      Effect.gen(function*() {
        const principal = yield* Auth.CurrentPrincipal
        if (sessionKey !== undefined) yield* Auth.readerFor(sessionKey, sessionNotFound)
        const pending = yield* pendingLists.pending(sessionKey)
        const visible = principal.sessions === undefined
          ? pending
          : pending.filter((request) => principal.canSee(request.sessionKey))
        // the list's JSON, as its schema encodes it: each request's JSON, in order
        return HttpServerResponse.text(`[${visible.map((request) => request.json).join(",")}]`, {
          contentType: "application/json"
        })
      }),
    get: (requestId: ApprovalRequest.RequestId) => Effect.map(readable(requestId), json(requestJson)),
    // after the I/O turn, with the other answers read in it: they commit together
    respond: (requestId: ApprovalRequest.RequestId, payload: ApprovalRequest.ApprovalResponse) =>
      Effect.zipRight(
        IoTurn.end,
        Effect.flatMap(approverOf(requestId), (approver) =>
          Effect.map(gate.respond(requestId, Auth.answerOf(approver, payload)), json(requestJson)))
      ),
    extend: (requestId: ApprovalRequest.RequestId, extension: typeof Extension.Type) =>
      Effect.flatMap(
        approverOf(requestId),
        (approver) =>
          Effect.map(
            gate.extend(requestId, extension.ttlMs, approver.name, { allowShorten: extension.allowShorten }),
            json(requestJson)
          )
      )
  }
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layerApprovals = HttpApiBuilder.group(Api, "approvals", (handlers) =>
  Effect.gen(function*() {
    const approvalsOf = approvals(yield* ToolGate.ToolGate, (yield* Shared).pendingLists)
    return handlers
      .handle("pending", ({ urlParams }) => approvalsOf.pending(urlParams.sessionKey))
      .handle("get", ({ path }) => approvalsOf.get(path.requestId))
      .handle("respond", ({ path, payload }) => approvalsOf.respond(path.requestId, payload))
      .handle("extend", ({ path, payload }) => approvalsOf.extend(path.requestId, payload))
  })).pipe(Layer.provide(layerShared))

/**
 * @since 0.1.0
 * @category layers
 */
export const layerSessions = HttpApiBuilder.group(Api, "sessions", (handlers) =>
  Effect.gen(function*() {
    const gate = yield* ToolGate.ToolGate
    const clear = (sessionKey: ToolCall.SessionKey) =>
      Effect.flatMap(Auth.approverFor(sessionKey, sessionNotFound), (approver) =>
        gate.clearApprovals(sessionKey, approver.name).pipe(
          Effect.map((cleared) => ({ sessionKey, cleared })),
          // a key the gate refuses (too long for its limits) names no session there can be
          Effect.catchTag("InvalidToolCall", () =>
            Effect.fail(sessionNotFound()))
        ))
    return handlers
      .handle("list", ({ path }) =>
        Effect.zipRight(Auth.readerFor(path.sessionKey, sessionNotFound), gate.sessionApprovals(path.sessionKey)))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const missing = () =>
            new ToolGateError.SessionApprovalNotFound({ sessionApprovalId: path.sessionApprovalId })
          const approver = yield* Auth.approverFor(path.sessionKey, missing)
          // Ids are global; the path's session is what the token was checked against, and the gate
          // refuses an approval of another session as a missing one.
          return yield* gate.revokeApproval(path.sessionApprovalId, {
            actor: approver.name,
            sessionKey: path.sessionKey
          })
        }))
      .handle("clear", ({ path }) =>
        clear(path.sessionKey))
      .handle("clearByPost", ({ path }) =>
        clear(path.sessionKey))
  }))

const encoder = new TextEncoder()
const retryHint = encoder.encode("retry: 1000\n\n")
const keepAlive = encoder.encode(": keep-alive\n\n")

// Live events reach every stream client as the same objects (the gate's hub): each is rendered
// and encoded once, whichever clients it goes to, and again in no replay from the recent events.
const rendered = new WeakMap<AuditEvent.AuditEvent, Uint8Array>()
const sseEvent = (event: AuditEvent.AuditEvent): Uint8Array => {
  let bytes = rendered.get(event)
  if (bytes === undefined) {
    bytes = encoder.encode(`id: ${event.seq}\ndata: ${JSON.stringify(AuditEvent.toJson(event))}\n\n`)
    rendered.set(event, bytes)
  }
  return bytes
}

interface Batch {
  readonly events: ReadonlyArray<AuditEvent.AuditEvent>
  readonly bytes: Uint8Array
}

/**
 * The bytes of the last batch that began with an event: clients that receive the same run of live
 * events (most of them, most of the time) write the same bytes, joined once. A run is the same
 * when every event is the same object: clients whose filters differ may share its ends but not
 * its middle.
 */
const batches = new WeakMap<AuditEvent.AuditEvent, Batch>()

const sameEvents = (batch: Batch, events: ReadonlyArray<AuditEvent.AuditEvent>): boolean => {
  if (batch.events.length !== events.length) return false
  for (let i = 0; i < events.length; i++) {
    if (batch.events[i] !== events[i]) return false
  }
  return true
}

/** The events of a chunk (not empty) as one piece of bytes: one socket write per chunk, not per event. */
const sseBytes = (events: ReadonlyArray<AuditEvent.AuditEvent>): Uint8Array => {
  const known = batches.get(events[0]!)
  if (known !== undefined && sameEvents(known, events)) return known.bytes
  const batch: Batch = {
    events,
    bytes: events.length === 1 ? sseEvent(events[0]!) : Buffer.concat(events.map(sseEvent))
  }
  batches.set(events[0]!, batch)
  return batch.bytes
}

/** How long a stream may stay silent before a comment line goes out, so idle proxies keep it open. */
const keepAliveMs = 15_000

/**
 * Bytes a stream client may leave unread: past them it is cut off, and resumes with
 * `Last-Event-ID` (a replay sends a page at a time, waiting for the client, so only live batches
 * pile up in a client that stopped reading). Node's server says when a socket is full; Bun's
 * `node:http` takes every write into buffers of its own, so there neither applies.
 */
const maxUnreadBytes = 4 * 1024 * 1024

/** The largest write to a stream's body (a transform hands each write on whole). */
const writePiece = 1024 * 1024

/** An event stream's content type and headers, before the headers every response gets. */
const sseOptions = {
  contentType: "text/event-stream",
  headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
} as const

/**
 * Server-Sent Events written to `body`: a `retry` hint first (it also gets the headers out at
 * once), then every event, with a comment line every 15 seconds so idle proxies keep the
 * connection open. The fan-out writes each batch's bytes to `body` and the heartbeat writes there
 * too, with no Effect stream per client between them (a stream's per-chunk work was most of what
 * a client cost). The client's part of the fan-out lives in a scope of its own, closed when the
 * body closes: the client went away, the server cut the connection, or the fan-out failed the
 * client (then the body ends, and so does the response). `unread`: the bytes written to `body`
 * that the client has not taken yet.
 */
const followInto = (
  fanout: AuditFanout.Fanout,
  query: AuditEvent.AuditQuery,
  keep: (event: AuditEvent.AuditEvent) => boolean,
  body: Writable,
  unread: () => number
): Effect.Effect<void> =>
  Effect.suspend(() => {
    // a client gone already (it left before its answer) is followed by nothing
    if (!body.writable) return Effect.void
    /** `false`: the client holds as much as it should (a replay waits for `drained`), or is gone. */
    const send = (bytes: Uint8Array) => {
      if (!body.writable) return false
      if (unread() > maxUnreadBytes) {
        // it stopped reading: cut off (it resumes with Last-Event-ID) rather than held in memory
        body.destroy()
        return false
      }
      // in pieces, so that `drained` means the client has taken all but the last few of them
      let fits = true
      for (let at = 0; at < bytes.length; at += writePiece) fits = body.write(bytes.subarray(at, at + writePiece))
      return fits
    }
    const drained = Effect.async<void>((resume) => {
      if (!body.writable || !body.writableNeedDrain) return resume(Effect.void)
      const done = () => {
        body.off("drain", done)
        body.off("close", done)
        resume(Effect.void)
      }
      body.once("drain", done)
      body.once("close", done)
      return Effect.sync(() => {
        body.off("drain", done)
        body.off("close", done)
      })
    })
    // the body's close is watched from here on, in the step that saw it open
    let scope: Scope.CloseableScope | undefined
    let gone = false
    const heartbeat = setInterval(() => send(keepAlive), keepAliveMs)
    body.once("close", () => {
      gone = true
      clearInterval(heartbeat)
      if (scope !== undefined) Effect.runFork(Scope.close(scope, Exit.void))
    })
    send(retryHint)
    return Effect.flatMap(Scope.make(), (made) => {
      scope = made
      if (gone) return Scope.close(made, Exit.void)
      return Scope.extend(fanout.follow({ query, keep, push: send, drained, fail: () => body.end() }), made)
    })
  })

/**
 * The event stream as the platform serves it: the body is a Node stream the server pipes to the
 * socket. Node's server pipes the body within the request, so when the request's scope closes the
 * body is done with, or was never piped (the client left before the answer): it is destroyed then.
 * A web handler hands the body on as the `Response`'s and ends the request at once: its body lives
 * until the reader cancels it. (On `Server.layerNodeServer` a plain stream request never gets here:
 * the Node fast path writes it to the socket's response itself, `followInto` on the response.)
 */
const sseResponse = (
  fanout: AuditFanout.Fanout,
  query: AuditEvent.AuditQuery,
  keep: (event: AuditEvent.AuditEvent) => boolean
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = new PassThrough()
    // A plain finalizer of the request's scope: one of `Effect.addFinalizer` first restores the
    // context of the fiber that added it, a patch per service of the server on every departure.
    if (!(request.source instanceof Request)) {
      yield* Scope.addFinalizer(
        yield* Effect.scope,
        Effect.sync(() => body.destroy())
      )
    }
    yield* followInto(fanout, query, keep, body, () => body.writableLength + body.readableLength)
    return HttpServerResponse.raw(body, sseOptions)
  })

/**
 * How many events a token limited to some sessions reads per query while looking for ones it may
 * see: fixed, since pages of `limit` events would cost one query per event at `limit=1`.
 */
const auditPageSize = 500

/**
 * @since 0.1.0
 * @category layers
 */
export const layerAudit = HttpApiBuilder.group(Api, "audit", (handlers) =>
  Effect.gen(function*() {
    const store = yield* ApprovalStore.ApprovalStore
    const { fanout } = yield* Shared
    return handlers
      .handle("query", ({ urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* Auth.CurrentPrincipal
          if (urlParams.sessionKey !== undefined) yield* Auth.readerFor(urlParams.sessionKey, sessionNotFound)
          const limit = urlParams.limit ?? 100
          if (principal.sessions === undefined) return yield* store.events({ ...urlParams, limit })
          // A limited token reads page after page until it has `limit` events it may see (or the
          // log ends).
          const visible: Array<AuditEvent.AuditEvent> = []
          let afterSeq = urlParams.afterSeq ?? 0
          while (visible.length < limit) {
            const page = yield* store.events({ ...urlParams, afterSeq, limit: auditPageSize })
            for (const event of page) {
              if (visible.length < limit && principal.canSee(event.sessionKey)) visible.push(event)
            }
            if (page.length < auditPageSize) break
            afterSeq = page[page.length - 1]!.seq
          }
          return visible
        }))
      .handle("head", () => Effect.map(store.lastSeq, (lastSeq) => ({ lastSeq })))
      .handle("stream", ({ headers, urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* Auth.CurrentPrincipal
          if (urlParams.sessionKey !== undefined) yield* Auth.readerFor(urlParams.sessionKey, sessionNotFound)
          // A reconnecting EventSource sends the last id it saw; it wins over the URL it reuses.
          const afterSeq = headers["last-event-id"] ?? urlParams.afterSeq
          const query = { ...urlParams, afterSeq }
          const matches = AuditEvent.matches({ ...query, afterSeq: undefined })
          return yield* sseResponse(fanout, query, (event) => matches(event) && principal.canSee(event.sessionKey))
        }))
      .handle("verify", ({ urlParams }) =>
        Effect.gen(function*() {
          // the chain runs through every session's events
          const principal = yield* Auth.CurrentPrincipal
          if (principal.sessions !== undefined) {
            return yield* new Auth.Forbidden({
              message:
                `Token "${principal.name}" is limited to some sessions; verifying the audit chain reads every session's events`
            })
          }
          return yield* AuditChain.verify({ anchor: urlParams.anchor }).pipe(
            Effect.provideService(ApprovalStore.ApprovalStore, store)
          )
        }))
  })).pipe(Layer.provide(layerShared))

/**
 * @since 0.1.0
 * @category layers
 */
export const layerIdentity = HttpApiBuilder.group(
  Api,
  "identity",
  (handlers) =>
    handlers.handle(
      "me",
      () =>
        Effect.map(Auth.CurrentPrincipal, ({ name, role, sessions }) =>
          sessions === undefined ? { name, role } : { name, role, sessions })
    )
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layerHealth = HttpApiBuilder.group(Api, "health", (handlers) =>
  Effect.gen(function*() {
    const store = yield* ApprovalStore.ApprovalStore
    return handlers.handle("health", () =>
      Effect.as(store.lastSeq, { status: "ok" as const }).pipe(
        // Anyone may ask, so the store's error (file paths, SQL, hosts) goes to the log only.
        Effect.tapError((error) => Effect.logWarning("health check: the approval store failed", error.message)),
        Effect.mapError(() => new Unavailable({ message: "The approval store is not answering" }))
      ))
  }))

/**
 * Every group of the API, implemented.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<
  HttpApi.Api,
  never,
  ToolGate.ToolGate | ApprovalStore.ApprovalStore | Auth.Authentication
> = HttpApiBuilder.api(Api).pipe(
  Layer.provide([layerApprovals, layerSessions, layerAudit, layerIdentity, layerHealth])
)

const tooLarge = (limitBytes: number) =>
  new PayloadTooLarge({ limitBytes, message: `The request body is larger than the limit of ${limitBytes} bytes` })

/** A body the platform could not read (a defect by default) as the client's fault, or any other defect as is. */
const unreadableBody = (limitBytes: number) =>
(
  defect: unknown
): Effect.Effect<never, PayloadTooLarge | HttpApiError.HttpApiDecodeError> => {
  if (!(defect instanceof RequestError) || defect.reason !== "Decode") return Effect.die(defect)
  const cause = defect.cause instanceof Error ? defect.cause.message : String(defect.cause)
  // the platform's stream reader reports an oversized body with exactly this message
  if (cause === "maxBytes exceeded") return Effect.fail(tooLarge(limitBytes))
  const message = `The request body is not valid JSON: ${cause}`
  return Effect.fail(new HttpApiError.HttpApiDecodeError({ issues: [{ _tag: "Type", path: [], message }], message }))
}

const decodeError = (path: ReadonlyArray<string>, problem: string, message: string) =>
  new HttpApiError.HttpApiDecodeError({ issues: [{ _tag: "Type", path, message: problem }], message })

/**
 * Every route the server serves: the API's endpoints, and the pages `Server.layerApp` serves
 * beside them (the console, the OpenAPI document, Swagger UI).
 */
const routes: ReadonlyArray<Routing.Route> = [
  ...Object.values(Api.groups).flatMap((group) =>
    Object.values(group.endpoints).map(({ method, path }): Routing.Route => ({ method, path }))
  ),
  ...["/", WebConsole.path, `${WebConsole.path}/:file`, "/openapi.json", "/docs"].map((path) => ({
    method: "GET",
    path
  }))
]
const diagnose = Routing.make(routes)

/** A request no route took, answered as the API's other 4xx: a JSON body with `_tag` and `message`. */
const unrouted = (request: HttpServerRequest.HttpServerRequest) => {
  const { method } = request
  const path = request.url.split("?")[0]!
  const found = diagnose(method, request.url)
  switch (found._tag) {
    case "MethodNotAllowed": {
      const allow = found.allow.join(", ")
      const error = new MethodNotAllowed({
        method,
        path,
        allow: found.allow,
        message: `${method} is not served on ${path}; it answers ${allow}`
      })
      return Effect.succeed(
        HttpServerResponse.unsafeJson(Schema.encodeSync(MethodNotAllowed)(error), { status: 405, headers: { allow } })
      )
    }
    case "BadPathParameter":
      return Effect.fail(
        decodeError([found.name], found.problem, `The path parameter ${found.name} ${found.problem}`)
      )
    case "NotFound": {
      const error = new RouteNotFound({ method, path, message: `No route for ${method} ${path}` })
      return Effect.succeed(HttpServerResponse.unsafeJson(Schema.encodeSync(RouteNotFound)(error), { status: 404 }))
    }
  }
}

/**
 * `app` with requests it would misread refused first (a query parameter given twice), and the
 * ones its router does not route answered by `unrouted`.
 */
const routed = <E, R>(request: HttpServerRequest.HttpServerRequest, app: HttpApp.Default<E, R>) => {
  const repeated = Routing.repeatedParameter(request.url)
  if (repeated !== undefined) {
    return Effect.fail(decodeError(
      [repeated.name],
      `is given ${repeated.times} times; give it once`,
      `The query parameter ${repeated.name} is given ${repeated.times} times; give it once`
    ))
  }
  return Effect.catchIf(
    app,
    (error): error is Extract<E, Unrouted> => error instanceof Unrouted,
    () => unrouted(request)
  )
}

/**
 * How deep a request body may nest: deeper than any gate takes arguments (`Limits.maxCallLimits`)
 * and the body's own levels above them, no body is valid, and decoding one would report it
 * with a recursive formatter that overflows the stack.
 */
const maxBodyDepth = Limits.maxCallLimits.maxDepth + 2

const tooDeep = decodeError(
  [],
  `nests objects and arrays more than ${maxBodyDepth} levels deep`,
  `The request body nests objects and arrays more than ${maxBodyDepth} levels deep`
)

/** The body limit around `app`: see `layerBodyLimit`. */
const bodyLimited = (limitBytes: number) => <E, R>(app: HttpApp.Default<E, R>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const length = Number(request.headers["content-length"] ?? 0)
    if (length > limitBytes) return yield* tooLarge(limitBytes)
    // Handlers without a payload (revoke, clear) never read the body: read it whole first, so a
    // request whose body cannot be read fails before any handler acts on it. `text` is cached,
    // so a handler with a payload decodes the same read.
    const hasBody = request.headers["transfer-encoding"] !== undefined || length > 0
    const readFirst = hasBody
      ? Effect.zipRight(
        Effect.flatMap(
          Effect.catchAll(request.text, (error) => Effect.die(error)),
          (text) => Routing.nestsDeeperThan(text, maxBodyDepth) ? Effect.fail(tooDeep) : Effect.void
        ),
        routed(request, app)
      )
      : routed(request, app)
    return yield* readFirst.pipe(
      HttpServerRequest.withMaxBodySize(Option.some(limitBytes)),
      Effect.catchAllDefect(unreadableBody(limitBytes))
    )
  })

/**
 * Request bodies of at most `limitBytes`: a larger declared `Content-Length` is refused before
 * anything is read, and a body that grows past the limit while streaming is cut off; both 413.
 * Bodies that are not JSON become a 400 `HttpApiDecodeError` (the platform would otherwise answer
 * an empty 400 from a defect). A request that has a body has it read whole before its handler
 * runs, so one whose body cannot be read (a malformed chunked encoding) changes nothing.
 *
 * Requests the router would answer with an empty body, or an endpoint would misread, get a JSON
 * body with `_tag` and `message` like every other 4xx: a path served with other methods is a 405
 * `MethodNotAllowed` with `Allow`, a path not served a 404 `RouteNotFound`, a path parameter that
 * is not percent-encoding (or is longer than 100 characters) a 400 naming it, a query parameter
 * given more than once a 400 naming it, and a body nested deeper than any arguments may be a 400.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerBodyLimit = (limitBytes: number): Layer.Layer<never> =>
  HttpApiBuilder.middleware(Api, bodyLimited(limitBytes))

/**
 * The body limit of `layerBodyLimit`, with answers (`POST /approvals/:requestId/respond`) and
 * pending lists (`GET /approvals/pending`), the two requests a busy approval server gets most,
 * served before the router: the same checks in the same order, the same schemas, handlers and
 * error bodies, without the router's lookup and the HttpApi route's per-request work (small next
 * to the gate's: tens of µs per answer). Use it instead of `layerBodyLimit`, not beside it.
 *
 * On the server of `Server.layerNodeServer`, with no tracer installed and `Auth.layer`'s tokens,
 * the two are served on Node's server itself, before the platform: a request that passes every
 * check runs its handler there (about 0.3 ms less of main thread per answer on Bun), and one
 * that fails any goes through this middleware, so its refusal is the same.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerBodyLimitWithLeanRoutes = (
  limitBytes: number
): Layer.Layer<never, never, ToolGate.ToolGate | ApprovalStore.ApprovalStore | Auth.Authentication> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const shared = yield* Shared
    const authenticate = (yield* Auth.Authentication).bearer
    const handlers = approvals(yield* ToolGate.ToolGate, shared.pendingLists)
    const lean = LeanRoutes.make(authenticate, handlers)
    const limited = bodyLimited(limitBytes)
    const withLean = (app: HttpApp.Default<never, never>) =>
      limited(lean(app)) as HttpApp.Default<HttpApiError.HttpApiDecodeError | PayloadTooLarge>
    yield* installNodeFastPath(limitBytes, authenticate, handlers, shared.fanout, withLean)
    // The API's error encoding covers every endpoint's errors, not only the API-wide ones a
    // middleware's type names: the lean routes fail with their endpoints' errors, as the handlers.
    return HttpApiBuilder.middleware(Api, withLean)
  })).pipe(Layer.provide(layerShared))

/** The tracer a program has when none is installed. */
const builtInTracer = Effect.runSync(Effect.tracer)

/**
 * The lean routes, and the event stream of the whole log, on Node's server itself
 * (`internal/nodeFastPath.ts`), when the server is `Server.layerNodeServer`'s, no tracer is
 * installed (the platform's span of each request stays where one is), the bearer check is
 * `Auth.layer`'s (it reads nothing but the token) and no handler of the program's own is set for
 * every response (`Server.layerApp` sets its headers on the served app alone, and the fast path
 * sets the same ones).
 */
const installNodeFastPath = (
  limitBytes: number,
  authenticate: Auth.Authentication["Type"]["bearer"],
  handlers: ReturnType<typeof approvals>,
  fanout: AuditFanout.Fanout,
  withLean: (app: HttpApp.Default<never, never>) => HttpApp.Default<HttpApiError.HttpApiDecodeError | PayloadTooLarge>
) =>
  Effect.gen(function*() {
    const fastPath = yield* Effect.serviceOption(NodeFastPath.NodeFastPath)
    if (fastPath._tag === "None" || (yield* Effect.tracer) !== builtInTracer || !PlainAuth.isPlain(authenticate)) {
      return
    }
    // a handler of the program's own for every response would be skipped: leave it the platform
    if (Option.isSome(yield* FiberRef.get(HttpApp.currentPreResponseHandlers))) return
    const runtime = yield* Effect.runtime<never>()
    // as the API answers: its error encoding, then the platform's answer to anything else
    const encodeErrors = yield* HttpApiBuilder.buildMiddleware(Api)
    const answer = <E, R>(
      effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> =>
      Effect.catchAllCause(
        encodeErrors(effect as Effect.Effect<HttpServerResponse.HttpServerResponse, E>) as Effect.Effect<
          HttpServerResponse.HttpServerResponse,
          unknown,
          R
        >,
        (cause) => Effect.map(HttpServerError.causeResponse(cause), ([response]) => response)
      )
    const unreachable = Effect.dieMessage("the lean routes take every request the fast path hands them")
    yield* fastPath.value.install(LeanRoutes.makeNode({
      limitBytes,
      nestsTooDeep: (text) => Routing.nestsDeeperThan(text, maxBodyDepth),
      // `Auth.layer`'s check reads nothing of the request (isPlain)
      authenticate: authenticate as (token: Redacted.Redacted) => Effect.Effect<Auth.Principal, Auth.Unauthorized>,
      handlers,
      encodeFailure: (cause) => answer(Effect.failCause(cause)),
      fallback: (request) =>
        answer(Effect.scoped(Effect.provideService(
          withLean(unreachable) as HttpApp.Default<HttpApiError.HttpApiDecodeError | PayloadTooLarge, Scope.Scope>,
          HttpServerRequest.HttpServerRequest,
          request
        ))),
      finish: ResponseHeaders.finish,
      stream: (response, afterSeq, principal) =>
        followInto(
          fanout,
          { afterSeq },
          (event) => principal.canSee(event.sessionKey),
          response,
          () => response.writableLength
        ),
      streamHead: HttpServerResponse.raw(undefined, sseOptions),
      runtime
    }))
  })
