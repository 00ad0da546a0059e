/** `toolgate approvals`: a session's session approvals, listed, revoked one by one or cleared. */
import { Command } from "@effect/cli"
import { SessionApproval } from "@tool-gate/core"
import { Clock, Console, Effect, Schema } from "effect"
import * as Backend from "../../Backend.js"
import * as Format from "../format.js"
import { idArg, json, sessionKey, target } from "../options.js"
import { print } from "../print.js"
import { withBackend } from "../target.js"

const list = Command.make(
  "list",
  { ...target, json, session: sessionKey("the session") },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const approvals = yield* backend.sessionApprovals(config.session)
      const now = yield* Clock.currentTimeMillis
      yield* print(config.json, Schema.Array(SessionApproval.SessionApproval), approvals, () =>
        approvals.length === 0
          ? `no session approvals in ${config.session}`
          : approvals.map((approval) => Format.sessionApprovalLine(approval, now)))
    })
).pipe(Command.withDescription("List a session's active session approvals"), withBackend)

const revoke = Command.make(
  "revoke",
  {
    ...target,
    json,
    session: sessionKey("the session the approval belongs to"),
    id: idArg(SessionApproval.SessionApprovalId, "the session approval id (sa_...)")
  },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const approval = yield* backend.revoke(config.session, config.id)
      yield* print(
        config.json,
        SessionApproval.SessionApproval,
        approval,
        () => `revoked ${approval.id} (${approval.toolName}, session ${approval.sessionKey})`
      )
    })
).pipe(Command.withDescription("Revoke one session approval"), withBackend)

const clear = Command.make(
  "clear",
  { ...target, session: sessionKey("the session") },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const cleared = yield* backend.clear(config.session)
      yield* Console.log(`cleared ${cleared} session approval(s) of ${config.session}`)
    })
).pipe(Command.withDescription("Revoke every session approval of a session"), withBackend)

/** `toolgate approvals` */
export const approvals = Command.make("approvals").pipe(
  Command.withDescription("Session approvals: list, revoke, clear"),
  Command.withSubcommands([list, revoke, clear])
)
