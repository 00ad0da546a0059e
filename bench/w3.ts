/**
 * W3 recovery queries on a big store: 1,000,000 audit events over 10,000 sessions, 100 pending
 * approvals in the session asked for, one pending in each other session (10,099 pending overall),
 * 20,000 answered requests and 12,000 session approvals (10,000 active). Figures:
 * - pending of one session: `ToolGate.pending({ sessionKey })`, p50/p99 of 100 queries (and the
 *   first, cold one: its rows decoded, not yet cached);
 * - pending across all sessions: thousands are pending, so the first page of the 100 oldest
 *   (`ApprovalStore.listPending({ limit: 100 })`), p50/p99 of 100 queries; and the whole list
 *   (`ToolGate.pending()`, 10,099 requests) once;
 * - start-up: a fresh `ToolGate` layer built on the file (open, migrations, the log's last seq, the
 *   first expiry sweep; no session approval is read), median of 5; the same in a fresh process,
 *   with its RSS before and after (`freshStartMs`, `rssBeforeMb`, `rssAfterMb`), and in another
 *   fresh process in two stages: the stores (open, WAL, migrations: `freshStoresMs`) and the gate
 *   over them (`freshGateMs`), then one session's first read (`freshFirstNeedMs`), and the RSS
 *   once the gate holds `HELD` sessions, its default cap (`rssHeldMb`, and after a full collection
 *   `rssHeldAfterGcMb`), with the JS heap the held sessions keep (`heapHeldMb`).
 *   W3_SESSIONS=100000 gives the 100,000 active session approvals of issue 13's start-up goal;
 * - a session's approvals read on its first need (`hasApproval` of a session the gate does not
 *   hold yet: one indexed read), p50/p99 over 100 sessions.
 *
 * Seeding writes the store's own tables with its own row encoders (the JSON each row holds is
 * what the store itself would write), in multi-row INSERTs of 50,000-row transactions: the store
 * has no bulk API, and a million single appends would measure seeding, not recovery.
 *
 * SQLite (a WAL file), and PostgreSQL in a fresh schema when TOOLGATE_PG_URL is set.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { AuditEvent } from "@tool-gate/core"
import {
  ApprovalRequest,
  ApprovalStore,
  Checkpoint,
  type CheckpointStore,
  Policy,
  SessionApproval,
  ToolCall,
  ToolGate
} from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Context, Effect, Layer, Redacted } from "effect"
import { spawn } from "node:child_process"
import * as Rows from "../packages/core/src/internal/sqlRows.js"
import { tables } from "../packages/core/src/internal/sqlSchema.js"
import { pgSchema } from "../tests/support/sqlStores.js"
import { runMain } from "./main.js"

const EVENTS = Number(process.env.W3_EVENTS ?? 1_000_000)
const SESSIONS = Number(process.env.W3_SESSIONS ?? 10_000)
const TARGET_PENDING = 100
const ANSWERED = Math.min(20_000, Math.floor(EVENTS / 50))
const ACTIVE_APPROVALS = SESSIONS
const REVOKED_APPROVALS = Math.floor(SESSIONS / 5)
const QUERIES = 100
const BUILDS = 5
/** sessions the fresh process has the gate read and hold: `heldSessions`' default */
const HELD = Math.min(SESSIONS, 10_000)

const policy = Policy.unsafeMake({ requireApproval: ["bash", "deploy"] })
const session = (i: number) => `s-${String(i).padStart(5, "0")}`
const sessionKey = (i: number) => ToolCall.SessionKey.make(session(i))
const TARGET = sessionKey(4242)
const TOOLS = ["bash", "deploy", "read_file", "write_file", "http_get", "sql", "grep", "ls"]
const T0 = Date.now() - EVENTS - 60_000
const DAY = 86_400_000

const percentile = (xs: Array<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 1000) / 1000
}

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const start = performance.now()
    return Effect.map(effect, (value) => [performance.now() - start, value] as const)
  })

/** Writes the seed through `sql` into the store's tables (default prefix); returns what it wrote. */
const seed = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const t = tables("toolgate_")
  const codecs = Rows.makeCodecs(0)
  const json = <A>(codec: Rows.Codec<A>, value: A) => Effect.orDie(codec.json(value))

  // The lifecycle events (requests, answers, grants, revocations) are spread evenly through the
  // log, sessions interleaved; every other event is a policy decision. Seqs are assigned in
  // insertion order from 1.
  type Lifecycle =
    | {
      readonly kind: "request"
      readonly n: number
      readonly sessionKey: ToolCall.SessionKey
      readonly answered: boolean
    }
    | { readonly kind: "answer"; readonly n: number }
    | {
      readonly kind: "grant"
      readonly n: number
      readonly sessionKey: ToolCall.SessionKey
      readonly revoked: boolean
    }
    | { readonly kind: "revoke"; readonly n: number }
  const lives: Array<Array<Lifecycle>> = []
  let n = 0
  for (let i = 0; i < TARGET_PENDING; i++) {
    lives.push([{ kind: "request", n: n++, sessionKey: TARGET, answered: false }])
  }
  for (let s = 0; s < SESSIONS; s++) {
    if (session(s) !== TARGET) lives.push([{ kind: "request", n: n++, sessionKey: sessionKey(s), answered: false }])
  }
  for (let a = 0; a < ANSWERED; a++, n++) {
    lives.push([{ kind: "request", n, sessionKey: sessionKey(a % SESSIONS), answered: true }, { kind: "answer", n }])
  }
  for (let g = 0; g < ACTIVE_APPROVALS + REVOKED_APPROVALS; g++) {
    const revoked = g >= ACTIVE_APPROVALS
    lives.push([
      { kind: "grant", n: g, sessionKey: sessionKey(g % SESSIONS), revoked },
      ...(revoked ? [{ kind: "revoke" as const, n: g }] : [])
    ])
  }
  // a deterministic shuffle of whole lifecycles (each one's steps stay in order)
  let state = 42
  const random = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648
  for (let i = lives.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[lives[i], lives[j]] = [lives[j]!, lives[i]!]
  }
  const steps = lives.flat()
  if (steps.length > EVENTS) throw new Error(`W3: ${steps.length} lifecycle events exceed ${EVENTS}`)
  const stepAt = new Map<number, Lifecycle>()
  steps.forEach((step, k) => stepAt.set(1 + Math.floor((k * EVENTS) / steps.length), step))

  const requests = new Map<number, ApprovalRequest.ApprovalRequest>()
  const approvals = new Map<number, SessionApproval.SessionApproval>()
  const eventRows: Array<Record<string, unknown>> = []
  const requestRows: Array<Record<string, unknown>> = []
  const approvalRows = new Map<number, Record<string, unknown>>()
  let written = 0

  const flushEvents = Effect.suspend(() => {
    const rows = eventRows.splice(0)
    const chunks: Array<Array<Record<string, unknown>>> = []
    for (let i = 0; i < rows.length; i += 500) chunks.push(rows.slice(i, i + 500))
    written += rows.length
    return Effect.forEach(chunks, (chunk) => sql`INSERT INTO ${sql(t.events)} ${sql.insert(chunk)}`, { discard: true })
  })
  const insertAll = (table: string, rows: Array<Record<string, unknown>>, size: number) =>
    Effect.forEach(
      Array.from({ length: Math.ceil(rows.length / size) }, (_, i) => rows.slice(i * size, (i + 1) * size)),
      (chunk) => sql`INSERT INTO ${sql(table)} ${sql.insert(chunk)}`,
      { discard: true }
    )

  const eventRow = (seq: number, event: AuditEvent.UnsequencedEvent) =>
    Effect.map(json(codecs.event, event), (text) => ({
      seq,
      at: event.at,
      type: event.type,
      outcome: event.outcome,
      session_key: event.sessionKey ?? null,
      tool_call_id: event.toolCallId ?? null,
      tool_name: event.toolName?.toLowerCase() ?? null,
      request_id: event.requestId ?? null,
      event: text
    }))

  for (let seq = 1; seq <= EVENTS; seq++) {
    const at = T0 + seq
    const step = stepAt.get(seq)
    let event: AuditEvent.UnsequencedEvent
    if (step === undefined) {
      const tool = TOOLS[seq % TOOLS.length]!
      const deny = seq % 7 === 0
      event = {
        at,
        type: "decision",
        outcome: deny ? "deny" : "allow",
        sessionKey: ToolCall.SessionKey.make(session(seq % SESSIONS)),
        toolCallId: ToolCall.ToolCallId.make(`call-${seq}`),
        toolName: tool,
        rule: deny ? "deny[0]" : "allow[0]",
        ruleSource: deny ? "deny" : "allow",
        policyVersion: policy.version,
        ...(deny ? { reason: "not here" } : { via: "policy" as const }),
        args: "{}"
      }
    } else if (step.kind === "request") {
      const request: ApprovalRequest.ApprovalRequest = {
        requestId: ApprovalRequest.RequestId.make(`req-${step.n}`),
        toolCall: {
          id: ToolCall.ToolCallId.make(`call-r${step.n}`),
          name: "bash",
          args: { command: `make target-${step.n}`, cwd: "/repo" },
          sessionKey: step.sessionKey
        },
        argsDigest: `digest-${step.n}`,
        rule: { id: "requireApproval[0]", source: "requireApproval" },
        policyVersion: policy.version,
        sessionScope: "exact",
        reason: "bash requires approval",
        prompt: `Allow bash make target-${step.n} in session ${step.sessionKey}?`,
        createdAt: at,
        expiresAt: at + DAY,
        status: "pending"
      }
      requests.set(step.n, request)
      event = AuditEvent.approvalRequested(request, ToolCall.canonicalArgs(request.toolCall.args))
      if (!step.answered) {
        requestRows.push({
          request_id: request.requestId,
          session_key: step.sessionKey,
          tool_call_id: request.toolCall.id,
          status: "pending",
          created_at: at,
          requested_seq: seq,
          expires_at: request.expiresAt,
          warned_at: null,
          consumed_at: null,
          request: yield* json(codecs.request, request)
        })
      }
    } else if (step.kind === "answer") {
      const asked = requests.get(step.n)!
      const answered: ApprovalRequest.ApprovalRequest = {
        ...asked,
        status: "approved",
        resolution: { status: "approved", decision: "approve_once", respondedBy: "ana", resolvedAt: at },
        consumedAt: at + 1
      }
      requestRows.push({
        request_id: answered.requestId,
        session_key: answered.toolCall.sessionKey,
        tool_call_id: answered.toolCall.id,
        status: "approved",
        created_at: answered.createdAt,
        requested_seq: null,
        expires_at: answered.expiresAt,
        warned_at: null,
        consumed_at: at + 1,
        request: yield* json(codecs.request, answered)
      })
      event = AuditEvent.approvalResolved(asked, answered.resolution!)
    } else if (step.kind === "grant") {
      const tool = TOOLS[step.n % 2]!
      const approval: SessionApproval.SessionApproval = {
        id: SessionApproval.SessionApprovalId.make(`sa-${step.n}`),
        sessionKey: step.sessionKey,
        toolName: tool,
        scope: step.n % 2 === 0 ? "tool" : "exact",
        ...(step.n % 2 === 0 ? {} : { argsDigest: `digest-sa-${step.n}`, args: `{"command":"make ${step.n}"}` }),
        grantedBy: "ana",
        createdAt: at,
        seq
      }
      approvals.set(step.n, approval)
      approvalRows.set(step.n, {
        id: approval.id,
        session_key: approval.sessionKey,
        tool_name: tool,
        seq,
        granted_seq: seq,
        revoked_at: null,
        expires_at: null,
        approval: yield* json(codecs.approval, approval)
      })
      event = {
        at,
        type: "session.granted",
        outcome: "approved",
        sessionKey: step.sessionKey,
        toolName: tool,
        actor: "ana"
      }
    } else {
      const granted = approvals.get(step.n)!
      const revoked: SessionApproval.SessionApproval = { ...granted, revokedAt: at, seq }
      approvalRows.set(step.n, {
        ...approvalRows.get(step.n)!,
        seq,
        revoked_at: at,
        approval: yield* json(codecs.approval, revoked)
      })
      event = {
        at,
        type: "session.revoked",
        outcome: "revoked",
        sessionKey: granted.sessionKey,
        toolName: granted.toolName,
        sessionApprovalId: granted.id,
        actor: "ana"
      }
    }
    eventRows.push(yield* eventRow(seq, event))
    if (eventRows.length >= 50_000) yield* sql.withTransaction(flushEvents)
  }
  yield* sql.withTransaction(flushEvents)
  yield* sql.withTransaction(insertAll(t.requests, requestRows, 500))
  yield* sql.withTransaction(insertAll(t.sessionApprovals, [...approvalRows.values()], 500))
  // PostgreSQL: the explicit seqs bypassed the sequence; move it past them
  yield* sql.onDialectOrElse({
    pg: () => sql`SELECT setval(pg_get_serial_sequence(${t.events}, 'seq'), ${EVENTS})`,
    orElse: () => Effect.void
  })
  // PostgreSQL's autovacuum would analyze the bulk-loaded tables soon; do it now. (SQLite runs
  // without statistics, as the store leaves it.)
  yield* sql.onDialectOrElse({ pg: () => sql`ANALYZE`, orElse: () => Effect.void })
  return {
    events: written,
    sessions: SESSIONS,
    pendingInSession: TARGET_PENDING,
    pendingOverall: requestRows.filter((r) => r.status === "pending").length,
    answeredRequests: ANSWERED,
    activeSessionApprovals: ACTIVE_APPROVALS,
    revokedSessionApprovals: REVOKED_APPROVALS
  }
})

type GateLayer = Layer.Layer<ToolGate.ToolGate | ApprovalStore.ApprovalStore, unknown>

/**
 * A gate opened on the seeded store by a fresh process (`bun bench/w3.ts open|stages sqlite|pg
 * TARGET`), as a user's process would see it: its last line of output, parsed.
 */
const inFreshProcess = <A>(mode: "open" | "stages", kind: "sqlite" | "pg", target: string) =>
  Effect.promise(() =>
    new Promise<A>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        ["--conditions=@tool-gate/source", import.meta.path, mode, kind, target],
        { stdio: ["ignore", "pipe", "inherit"] }
      )
      let out = ""
      child.stdout!.on("data", (chunk) => out += chunk)
      child.once(
        "exit",
        (code) =>
          code === 0
            ? resolve(JSON.parse(out.trim().split("\n").pop()!))
            : reject(new Error(`W3 ${mode}: exit ${code}`))
      )
    })
  )

/** Seeds through `client` (after one open has migrated the schema), then measures on `gate`. */
export const runW3With = (
  gate: GateLayer,
  client: Layer.Layer<SqlClient.SqlClient, unknown>,
  fresh: readonly ["sqlite" | "pg", string]
) =>
  Effect.gen(function*() {
    // migrate once through the real layer, then seed the empty tables
    yield* Effect.scoped(Layer.build(gate))
    const seedStart = performance.now()
    const seeded = yield* seed.pipe(Effect.provide(client))
    const seedSeconds = (performance.now() - seedStart) / 1000

    const opened = yield* inFreshProcess<
      { readonly freshStartMs: number; readonly rssBeforeMb: number; readonly rssAfterMb: number }
    >("open", ...fresh)
    const stages = yield* inFreshProcess<
      {
        readonly freshStoresMs: number
        readonly freshGateMs: number
        readonly freshFirstNeedMs: number
        readonly rssHeldMb: number
        readonly rssHeldAfterGcMb: number
        readonly heapHeldMb: number
      }
    >("stages", ...fresh)
    const builds: Array<number> = []
    for (let i = 0; i < BUILDS; i++) {
      const [ms] = yield* timed(Effect.scoped(Layer.build(gate)))
      builds.push(ms)
    }

    return yield* Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(gate)
      const tg = Context.get(context, ToolGate.ToolGate)
      const store = Context.get(context, ApprovalStore.ApprovalStore)

      // sessions this gate does not hold yet: each one's approvals are read on this first need
      const firstNeed: Array<number> = []
      for (let i = 0; i < QUERIES; i++) {
        const [ms, held] = yield* timed(tg.hasApproval("bash", sessionKey(i * 2)))
        if (!held) throw new Error(`W3: no approval of bash in ${session(i * 2)}`)
        firstNeed.push(ms)
      }

      const [firstSessionMs, first] = yield* timed(tg.pending({ sessionKey: TARGET }))
      if (first.length !== TARGET_PENDING) throw new Error(`W3: ${first.length} pending in ${TARGET}`)
      const perSession: Array<number> = []
      for (let i = 0; i < QUERIES; i++) perSession.push((yield* timed(tg.pending({ sessionKey: TARGET })))[0])

      const [firstPageColdMs] = yield* timed(store.listPending({ limit: 100 }))
      const firstPage: Array<number> = []
      for (let i = 0; i < QUERIES; i++) firstPage.push((yield* timed(store.listPending({ limit: 100 })))[0])

      const [allPendingMs, all] = yield* timed(tg.pending())
      if (all.length !== seeded.pendingOverall) throw new Error(`W3: ${all.length} pending overall`)

      return {
        ...seeded,
        seedSeconds: Math.round(seedSeconds * 10) / 10,
        sessionPendingP50ms: percentile(perSession, 0.5),
        sessionPendingP99ms: percentile(perSession, 0.99),
        sessionPendingFirstMs: Math.round(firstSessionMs * 1000) / 1000,
        allPendingFirstPage100P50ms: percentile(firstPage, 0.5),
        allPendingFirstPage100P99ms: percentile(firstPage, 0.99),
        allPendingFirstPage100FirstMs: Math.round(firstPageColdMs * 1000) / 1000,
        allPendingFullListMs: Math.round(allPendingMs * 1000) / 1000,
        gateStartP50ms: percentile(builds, 0.5),
        ...opened,
        ...stages,
        sessionFirstNeedP50ms: percentile(firstNeed, 0.5),
        sessionFirstNeedP99ms: percentile(firstNeed, 0.99)
      }
    }))
  })

export const runW3 = (filename: string) =>
  runW3With(ToolGateSqlite.layer({ filename, policy }), ToolGateSqlite.layerClient(filename), ["sqlite", filename])

export const runW3Pg = (url: string) =>
  Effect.scoped(Effect.flatMap(pgSchema(url), (schemaUrl) => {
    const options = { url: Redacted.make(schemaUrl), policy }
    return runW3With(ToolGatePg.layer(options), ToolGatePg.layerClient(options), ["pg", schemaUrl])
  }))

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024 * 10) / 10

const storesOf = (kind: string | undefined, target: string) =>
  kind === "pg"
    ? ToolGatePg.layerStore({ url: Redacted.make(target) })
    : ToolGateSqlite.layerStore({ filename: target })

const since = (start: number) => Math.round((performance.now() - start) * 10) / 10

if (process.argv[2] === "open") {
  const [kind, target] = [process.argv[3], process.argv[4]!]
  const layer: GateLayer = kind === "pg"
    ? ToolGatePg.layer({ url: Redacted.make(target), policy })
    : ToolGateSqlite.layer({ filename: target, policy })
  const rssBefore = process.memoryUsage().rss
  const start = performance.now()
  await Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(layer), () =>
    Effect.sync(() => {
      const freshStartMs = since(start)
      console.log(
        JSON.stringify({ freshStartMs, rssBeforeMb: mb(rssBefore), rssAfterMb: mb(process.memoryUsage().rss) })
      )
    }))))
  process.exit(0)
} else if (process.argv[2] === "stages") {
  const [kind, target] = [process.argv[3], process.argv[4]!]
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    let start = performance.now()
    const stores = yield* Layer.build(storesOf(kind, target))
    const freshStoresMs = since(start)
    start = performance.now()
    const gate = Context.get(
      yield* Layer.build(
        Checkpoint.layerWithGate({ policy }).pipe(
          Layer.provide(
            Layer.succeedContext(
              stores as Context.Context<ApprovalStore.ApprovalStore | CheckpointStore.CheckpointStore>
            )
          )
        )
      ),
      ToolGate.ToolGate
    )
    const freshGateMs = since(start)
    start = performance.now()
    yield* gate.hasApproval("bash", sessionKey(1))
    const freshFirstNeedMs = since(start)
    Bun.gc(true)
    const heapBefore = process.memoryUsage().heapUsed
    for (let i = 0; i < HELD; i++) yield* gate.hasApproval("bash", sessionKey(i))
    const rssHeldMb = mb(process.memoryUsage().rss)
    Bun.gc(true)
    console.log(JSON.stringify({
      freshStoresMs,
      freshGateMs,
      freshFirstNeedMs,
      rssHeldMb,
      rssHeldAfterGcMb: mb(process.memoryUsage().rss),
      heapHeldMb: mb(process.memoryUsage().heapUsed - heapBefore)
    }))
  })))
  process.exit(0)
} else if (import.meta.main) {
  await runMain("W3", {
    sqlite: (filename) => Effect.runPromise(runW3(filename)),
    postgres: (url) => Effect.runPromise(runW3Pg(url))
  })
}
