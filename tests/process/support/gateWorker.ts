/**
 * A gate process for the process tests, run under Node (so the better-sqlite3 driver is the one
 * exercised). Prints one JSON object per line; times are `performance.timeOrigin + now()` (ms,
 * sub-millisecond) so two processes' stamps compare.
 *
 *   wait    DB SESSION CALL_ID [TTL_MS]   ask for bash; wait for the answer; report it
 *   create  DB SESSION COUNT [TTL_MS]     create COUNT pending requests ("paused", with their deadlines),
 *                                         report "ready", stay up
 *   answer  DB REQUEST_ID DECISION [WHO] [RESPONSE_JSON]
 *                                         answer one request (RESPONSE_JSON: more of the response, e.g. a reason)
 *   race    DB WHO IDS_JSON               answer every id (shuffled), each twice, random decisions
 *   pending DB [SESSION]                  list pending requests
 *   rerun   DB SESSION CALL_ID            ask again with the same call id; run it if allowed
 *   waitMany    DB COUNT                  COUNT times: ask, report "paused", wait, report "resolved"
 *   answerStream DB COUNT                 tail the audit log; approve each new request, report "answered"
 *
 * DB is a SQLite file path, or a postgres:// URL (then the PostgreSQL store with LISTEN/NOTIFY).
 */
import "./commitStamps.js"
import { ApprovalRequest, ApprovalStore, PauseSignal, Policy, ToolCall, ToolGate } from "@tool-gate/core"
import { ToolGatePg } from "@tool-gate/pg"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Effect, Either, Redacted, Stream } from "effect"

const [command, filename, ...rest] = process.argv.slice(2)
const now = () => performance.timeOrigin + performance.now()
const say = (value: object) => Effect.sync(() => console.log(JSON.stringify({ ...value, at: now() })))
const policy = (ttlMs: number) => Policy.unsafeMake({ requireApproval: ["bash"], ttlMs })
const bash = (sessionKey: string, id: string) => ({ id, name: "bash", sessionKey, args: { command: `echo ${id}` } })

const program = Effect.gen(function*() {
  const gate = yield* ToolGate.ToolGate
  switch (command) {
    case "wait": {
      const [sessionKey, id] = rest as [string, string]
      const paused = yield* gate.authorize(bash(sessionKey, id))
      if (!PauseSignal.isPauseSignal(paused)) return yield* say({ event: "allowed" })
      yield* say({ event: "paused", requestId: paused.requestId })
      const resolved = yield* gate.awaitDecision(paused.requestId)
      yield* say({ event: "resolved", status: resolved.status, request: resolved })
      const ran = yield* Effect.either(gate.gate(bash(sessionKey, id), () => Effect.succeed("ran")))
      return yield* say({ event: "gate", result: Either.isRight(ran) ? ran.right : ran.left._tag })
    }
    case "create": {
      const [sessionKey, count] = rest as [string, string]
      for (let i = 0; i < Number(count); i++) {
        const paused = yield* gate.authorize(bash(sessionKey, `call-${i}`))
        if (PauseSignal.isPauseSignal(paused)) {
          yield* say({ event: "paused", requestId: paused.requestId, expiresAt: paused.expiresAt })
        }
      }
      yield* say({ event: "ready" })
      return yield* Effect.never
    }
    case "answer": {
      const [requestId, decision, who, more] = rest as [
        string,
        ApprovalRequest.ApprovalResponse["decision"],
        string | undefined,
        string | undefined
      ]
      const result = yield* Effect.either(
        gate.respond(ApprovalRequest.RequestId.make(requestId), {
          decision,
          respondedBy: who ?? "op",
          ...(more !== undefined ? JSON.parse(more) : {})
        })
      )
      return yield* say(
        Either.isRight(result)
          ? { event: "answered", status: result.right.status, request: result.right }
          : { event: "refused", error: result.left._tag }
      )
    }
    case "race": {
      const [who, idsJson] = rest as [string, string]
      const ids = JSON.parse(idsJson) as Array<string>
      const answers = ids.flatMap((id) => [id, id]).sort(() => Math.random() - 0.5)
      const tally: Record<string, number> = {}
      const won: Array<string> = []
      yield* say({ event: "racing" })
      for (const id of answers) {
        const decision = Math.random() < 0.5 ? "approve_once" as const : "deny" as const
        const result = yield* Effect.either(
          gate.respond(ApprovalRequest.RequestId.make(id), { decision, respondedBy: who })
        )
        const key = Either.isRight(result)
          ? (result.right.resolution?.respondedBy === who ? "ours" : "sameAsWinner")
          : result.left._tag
        tally[key] = (tally[key] ?? 0) + 1
        if (Either.isRight(result) && result.right.resolution?.respondedBy === who && !won.includes(id)) won.push(id)
      }
      return yield* say({ event: "raced", tally, won })
    }
    case "pending": {
      const pending = yield* gate.pending(
        rest[0] !== undefined ? { sessionKey: ToolCall.SessionKey.make(rest[0]) } : {}
      )
      return yield* say({
        event: "pending",
        requestIds: pending.map((r) => r.requestId),
        callIds: pending.map((r) => r.toolCall.id)
      })
    }
    case "rerun": {
      const [sessionKey, id] = rest as [string, string]
      const ran = yield* Effect.either(gate.gate(bash(sessionKey, id), (allowed) => Effect.succeed(allowed.call.id)))
      return yield* say({ event: "gate", result: Either.isRight(ran) ? `ran ${ran.right}` : ran.left._tag })
    }
    case "waitMany": {
      // a session of its own, so runs against a shared database never meet earlier runs' calls
      const sessionKey = `bench-${process.pid}-${Date.now()}`
      for (let i = 0; i < Number(rest[0]); i++) {
        const paused = yield* gate.authorize(bash(sessionKey, `wait-${i}`))
        if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.die("expected a pause")
        yield* say({ event: "paused", requestId: paused.requestId })
        const resolved = yield* gate.awaitDecision(paused.requestId)
        yield* say({ event: "resolved", requestId: resolved.requestId })
      }
      return yield* say({ event: "done" })
    }
    case "answerStream": {
      const lastSeq = yield* Effect.flatMap(ApprovalStore.ApprovalStore, (store) => store.lastSeq)
      yield* say({ event: "listening" })
      return yield* gate.auditLog({ afterSeq: lastSeq }).pipe(
        Stream.filter((e) => e.type === "approval.requested"),
        Stream.take(Number(rest[0])),
        Stream.runForEach((e) =>
          say({ event: "answering", requestId: e.requestId }).pipe(
            Effect.zipRight(
              gate.respond(ApprovalRequest.RequestId.make(e.requestId!), {
                decision: "approve_once",
                respondedBy: "bench"
              })
            ),
            // with TOOLGATE_STAMP_COMMITS=1, when the answer's COMMIT returned (the bench's origin)
            Effect.zipRight(
              Effect.suspend(() =>
                say({ event: "answered", requestId: e.requestId, committedAt: globalThis.toolgateLastCommit })
              )
            )
          )
        )
      )
    }
    default:
      return yield* Effect.die(`unknown command ${command}`)
  }
})

const ttlMs = Number(
  command === "wait" || command === "create" ? rest[2] ?? 300_000 : 300_000
)

const options: ToolGate.Options = { policy: policy(ttlMs), sweepInterval: "100 millis" }
const layer = filename!.startsWith("postgres://")
  ? ToolGatePg.layer({ url: Redacted.make(filename!), ...options })
  : ToolGateSqlite.layer({ filename: filename!, ...options })

Effect.runPromise(program.pipe(Effect.provide(layer))).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
