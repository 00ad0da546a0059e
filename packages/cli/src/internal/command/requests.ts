/** The commands on pending requests: `pending`, `approve`, `deny`, `extend`. */
import { Command, Options } from "@effect/cli"
import { ApprovalRequest } from "@tool-gate/core"
import { Clock, Effect, Option, Schema } from "effect"
import * as Backend from "../../Backend.js"
import { Failed, InvalidInput } from "../errors.js"
import { ExitCode } from "../exit.js"
import * as Format from "../format.js"
import { duration, editedArgs, json, onRequest, reason, sessionKey, target } from "../options.js"
import { print } from "../print.js"
import { withBackend } from "../target.js"

/** `toolgate pending` */
export const pending = Command.make(
  "pending",
  { ...target, json, session: sessionKey("only this session's requests").pipe(Options.optional) },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const requests = yield* backend.pending(Option.getOrUndefined(config.session))
      const now = yield* Clock.currentTimeMillis
      yield* print(config.json, Schema.Array(ApprovalRequest.ApprovalRequest), requests, () =>
        requests.length === 0
          ? "no pending approvals"
          : requests.map((request) => Format.pendingLine(request, now)))
    })
).pipe(
  Command.withDescription("List pending approval requests, oldest first"),
  withBackend
)

const answered = (asJson: boolean) => (request: ApprovalRequest.ApprovalRequest) =>
  print(asJson, ApprovalRequest.ApprovalRequest, request, () => Format.resolvedLine(request))

/** `toolgate approve` */
export const approve = Command.make(
  "approve",
  {
    ...onRequest,
    session: Options.boolean("session").pipe(
      Options.withDescription("approve for the rest of the session, not only this call")
    ),
    scope: Options.choice("scope", ["exact", "tool"]).pipe(
      Options.withDescription("with --session: the same arguments only (exact), or any call of the tool (tool)"),
      Options.optional
    ),
    sessionTtl: duration("session-ttl", "with --session: the session approval lapses after this long").pipe(
      Options.optional
    ),
    args: editedArgs,
    reason: reason("a note kept with the answer")
  },
  (config) =>
    Effect.gen(function*() {
      const sessionOnly = [["--scope", Option.isSome(config.scope)], [
        "--session-ttl",
        Option.isSome(config.sessionTtl)
      ]] as const
      for (const [flag, given] of sessionOnly) {
        if (given && !config.session) {
          return yield* new InvalidInput({
            message: `${flag} applies only with --session (approve for the session)`
          })
        }
      }
      if (Option.isSome(config.args) && Option.isNone(config.server) && Option.isNone(config.policy)) {
        return yield* new InvalidInput({
          message: "--args needs the policy (--policy FILE or TOOLGATE_POLICY): edited arguments are judged by it again"
        })
      }
      const backend = yield* Backend.Backend
      const request = yield* backend.respond(config.id, {
        decision: config.session ? "approve_session" : "approve_once",
        scope: Option.getOrUndefined(config.scope),
        sessionTtlMs: Option.getOrUndefined(config.sessionTtl),
        editedArgs: Option.getOrUndefined(config.args),
        reason: Option.getOrUndefined(config.reason)
      })
      yield* answered(config.json)(request)
      // an edit the policy denies resolves the request as denied: no script may read that as approved
      if (request.status !== "approved") return yield* new Failed({ code: ExitCode.policyDenied })
    })
).pipe(Command.withDescription("Approve a pending request: once, or for the session"), withBackend)

/** `toolgate deny` */
export const deny = Command.make(
  "deny",
  {
    ...onRequest,
    reason: reason("why; the agent's model reads it")
  },
  (config) =>
    Effect.flatMap(
      Backend.Backend,
      (backend) => backend.respond(config.id, { decision: "deny", reason: Option.getOrUndefined(config.reason) })
    ).pipe(
      Effect.flatMap(answered(config.json))
    )
).pipe(Command.withDescription("Deny a pending request"), withBackend)

/** `toolgate extend` */
export const extend = Command.make(
  "extend",
  {
    ...onRequest,
    ttl: duration("ttl", "the deadline moves to this long from now, if that is later: 90s, 10m, 2h, 1d"),
    shorten: Options.boolean("shorten").pipe(
      Options.withDescription("let --ttl bring the deadline forward too (by default a later deadline is kept)")
    )
  },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const request = yield* backend.extend(config.id, config.ttl, config.shorten)
      const now = yield* Clock.currentTimeMillis
      // a deadline later than `--ttl` from now (read after the answer) was kept, not moved
      const kept = !config.shorten && request.expiresAt > now + config.ttl
      yield* print(
        config.json,
        ApprovalRequest.ApprovalRequest,
        request,
        () =>
          kept
            ? `kept ${request.requestId}: it expires at ${new Date(request.expiresAt).toISOString()}, in ${
              Format.duration(request.expiresAt - now)
            }, later than --ttl asks (extending never shortens; --shorten brings it forward)`
            : Format.extendedLine(request, now)
      )
    })
).pipe(
  Command.withDescription(
    "Give a pending request more time: its deadline moves to --ttl from now, never earlier unless --shorten"
  ),
  withBackend
)
