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
import type { ToolGateError } from "@tool-gate/core"
import {
  type ApprovalRequest,
  ApprovalStore,
  type AuditEvent,
  type Policy,
  type SessionApproval,
  type ToolCall,
  ToolGate
} from "@tool-gate/core"
import type { Api, Auth } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Context, Effect, Layer, type Option, type Redacted, type Stream } from "effect"
import { paged, pageSize } from "./internal/audit.js"
import type { InvalidInput, ServerRedirected, ServerUnavailable } from "./internal/errors.js"

/**
 * The CLI's own errors (`ServerUnavailable`, `ServerRedirected`, `InvalidInput`).
 *
 * @since 0.1.0
 * @category errors
 */
export { InvalidInput, ServerRedirected, ServerUnavailable } from "./internal/errors.js"

/**
 * Every failure a command can meet, whichever backend serves it.
 *
 * @since 0.1.0
 * @category errors
 */
export type BackendError =
  | ToolGateError.ToolGateError
  | Api.SessionNotFound
  | Auth.Unauthorized
  | Auth.Forbidden
  | ServerUnavailable
  | ServerRedirected
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
  readonly sessionKey?: ToolCall.SessionKey | undefined
  readonly toolName?: string | undefined
  readonly outcome?: AuditEvent.Outcome | undefined
  /** epoch milliseconds, inclusive */
  readonly since?: number | undefined
  /** epoch milliseconds, inclusive */
  readonly until?: number | undefined
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
    sessionKey: ToolCall.SessionKey | undefined
  ) => Effect.Effect<ReadonlyArray<ApprovalRequest.ApprovalRequest>, BackendError>
  readonly respond: (
    requestId: ApprovalRequest.RequestId,
    answer: Answer
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, BackendError>
  /** `allowShorten`: the deadline may come forward (by default a later one is kept) */
  readonly extend: (
    requestId: ApprovalRequest.RequestId,
    ttlMs: number,
    allowShorten: boolean
  ) => Effect.Effect<ApprovalRequest.ApprovalRequest, BackendError>
  readonly sessionApprovals: (
    sessionKey: ToolCall.SessionKey
  ) => Effect.Effect<ReadonlyArray<SessionApproval.SessionApproval>, BackendError>
  readonly revoke: (
    sessionKey: ToolCall.SessionKey,
    id: SessionApproval.SessionApprovalId
  ) => Effect.Effect<SessionApproval.SessionApproval, BackendError>
  /** revokes every session approval of the session; returns how many */
  readonly clear: (sessionKey: ToolCall.SessionKey) => Effect.Effect<number, BackendError>
  readonly audit: (options: AuditOptions) => Stream.Stream<AuditEvent.AuditEvent, BackendError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Backend extends Context.Tag("@tool-gate/cli/Backend")<Backend, Service>() {}

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
        extend: (requestId, ttlMs, allowShorten) => gate.extend(requestId, ttlMs, actor, { allowShorten }),
        sessionApprovals: (sessionKey) => gate.sessionApprovals(sessionKey),
        // ids are global: naming the session keeps another session's grant out of reach
        revoke: (sessionKey, id) => gate.revokeApproval(id, { actor, sessionKey }),
        clear: (sessionKey) => gate.clearApprovals(sessionKey, actor),
        audit: ({ afterSeq = 0, follow, ...filters }) =>
          follow
            ? gate.auditLog({ ...filters, afterSeq })
            : paged((after) => store.events({ ...filters, afterSeq: after, limit: pageSize }), afterSeq)
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

/**
 * The commands against a running server, authenticated by a bearer token: the server decides
 * who answers (the token's name) and which sessions the token may see.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRemote = (options: RemoteOptions): Layer.Layer<Backend> =>
  // loaded only when asked for, so commands on the file start without the HTTP client and API
  Layer.unwrapEffect(
    Effect.promise(() => import("./internal/remote.js")).pipe(
      Effect.map((remote) => Layer.effect(Backend, remote.make(options)))
    )
  )
