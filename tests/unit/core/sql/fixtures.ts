/**
 * Store-level fixtures: requests, events and grants decoded from plain JSON with the entity
 * Schemas, and helpers to open several stores (as several processes would) on one database.
 */
import { SqlClient } from "@effect/sql"
import type { ApprovalStore as Store } from "@tool-gate/core"
import { ApprovalRequest, ApprovalStore, AuditEvent, SessionApproval, ToolCall } from "@tool-gate/core"
import { Database } from "bun:sqlite"
import { Context, Effect, Layer, Schema } from "effect"
import pg from "pg"

export const request = (n: number, options: { readonly sessionKey?: string; readonly callId?: string } = {}) =>
  Schema.decodeUnknownSync(ApprovalRequest.ApprovalRequest)({
    requestId: `req_${n}`,
    toolCall: {
      id: options.callId ?? `call_${n}`,
      name: "Bash",
      args: { command: `make ${n}`, env: { CI: true, depth: [1, { x: null }] } },
      sessionKey: options.sessionKey ?? "s1",
      workingDirectory: "/repo"
    },
    argsDigest: `digest_${n}`,
    rule: { id: "requireApproval[0]", source: "requireApproval" },
    policyVersion: "v1",
    sessionScope: "exact",
    reason: "bash requires approval",
    prompt: `Allow bash make ${n}?`,
    createdAt: 1_000 + n,
    expiresAt: 61_000 + n,
    status: "pending"
  })

const event = Schema.decodeUnknownSync(AuditEvent.UnsequencedEvent)

export const requested = (r: ApprovalRequest.ApprovalRequest) =>
  AuditEvent.approvalRequested(r, ToolCall.canonicalArgs(r.toolCall.args))

export const resolved = (r: ApprovalRequest.ApprovalRequest, actor: string) =>
  AuditEvent.approvalResolved(r, approval(r, actor))

export const approval = (r: ApprovalRequest.ApprovalRequest, actor: string): ApprovalRequest.Resolution => ({
  status: "approved",
  decision: "approve_once",
  respondedBy: actor,
  resolvedAt: r.createdAt + 5
})

export const decision = (n: number, sessionKey = "s1") =>
  event({
    at: 2_000 + n,
    type: "decision",
    outcome: "allow",
    sessionKey,
    toolCallId: `d_${n}`,
    toolName: "LS",
    policyVersion: "v1",
    via: "policy",
    args: "{}"
  })

export const grant = (n: number, sessionKey = "s1"): Store.NewSessionApproval =>
  Schema.decodeUnknownSync(SessionApproval.SessionApproval.pipe(Schema.omit("seq")))({
    id: `sa_${n}`,
    sessionKey,
    toolName: "deploy",
    scope: "tool",
    grantedBy: "ana",
    createdAt: 3_000 + n
  })

/** A session approval of every bash call in `sessionKey`, until `expiresAt` when given. */
export const bashGrant = (id: string, sessionKey: string, expiresAt?: number) =>
  Schema.decodeUnknownSync(SessionApproval.SessionApproval.pipe(Schema.omit("seq")))({
    id,
    sessionKey,
    toolName: "bash",
    scope: "tool",
    grantedBy: "ana",
    createdAt: 500,
    ...(expiresAt !== undefined ? { expiresAt } : {})
  })

export const granted = (n: number, sessionKey = "s1") =>
  event({ at: 3_000 + n, type: "session.granted", outcome: "approved", sessionKey, toolName: "deploy" })

/** Builds a store layer in the current scope and returns the service with the client under it. */
export const open = <E>(store: Layer.Layer<Store.ApprovalStore | SqlClient.SqlClient, E>) =>
  Effect.map(Layer.build(store), (context) => ({
    store: Context.get(context, ApprovalStore.ApprovalStore),
    sql: Context.get(context, SqlClient.SqlClient)
  }))

/** What `body` gave and how many statements whose text contains `marker` ran meanwhile. */
export type Sent = <A, E, R>(
  marker: string,
  body: Effect.Effect<A, E, R>
) => Effect.Effect<{ readonly result: A; readonly statements: number }, E, R>

/** The statements `pg` sends while `body` runs whose text contains `marker`. */
export const statementsSent: Sent = <A, E, R>(marker: string, body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const counted = { statements: 0 }
      const query = pg.Client.prototype.query
      pg.Client.prototype.query = function(this: pg.Client, config: unknown, ...rest: Array<unknown>) {
        const text = typeof config === "string" ? config : (config as { text?: string } | undefined)?.text
        if (text?.includes(marker)) counted.statements++
        return (query as (...args: Array<unknown>) => unknown).call(this, config, ...rest)
      } as typeof query
      return { counted, query }
    }),
    ({ counted }) => Effect.map(body, (result) => ({ result, statements: counted.statements })),
    ({ query }) => Effect.sync(() => pg.Client.prototype.query = query)
  )

/** The statements bun:sqlite runs while `body` runs whose text contains `marker` (each runs through `query`). */
export const sqliteStatementsSent: Sent = <A, E, R>(marker: string, body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const counted = { statements: 0 }
      const query = Database.prototype.query
      Database.prototype.query = function(this: Database, text: string) {
        if (text.includes(marker)) counted.statements++
        return query.call(this, text)
      } as typeof query
      return { counted, query }
    }),
    ({ counted }) => Effect.map(body, (result) => ({ result, statements: counted.statements })),
    ({ query }) => Effect.sync(() => Database.prototype.query = query)
  )
