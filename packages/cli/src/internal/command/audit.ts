/** `toolgate audit`: the audit log in sequence order, or followed. */
import { Command, Options } from "@effect/cli"
import { AuditEvent } from "@tool-gate/core"
import { Console, Effect, Either, Option, Schema, Stream } from "effect"
import * as Backend from "../../Backend.js"
import * as Format from "../format.js"
import { invalid, sessionKey, target } from "../options.js"
import { withBackend } from "../target.js"
import * as Terminal from "../terminal.js"

/** `toolgate audit` */
export const audit = Command.make(
  "audit",
  {
    ...target,
    json: Options.boolean("json").pipe(Options.withDescription("one JSON event per line")),
    follow: Options.boolean("follow").pipe(
      Options.withAlias("f"),
      Options.withDescription("after the log, keep printing new events until interrupted")
    ),
    session: sessionKey("only this session's events (and clears of every session)").pipe(Options.optional),
    after: Options.integer("after").pipe(
      Options.withPseudoName("SEQ"),
      Options.withDescription("only events after this sequence number (to resume)"),
      Options.mapEffect((seq) =>
        seq >= 0 ? Either.right(seq) : Either.left(invalid(`--after must be 0 or more, got ${seq}`))
      ),
      Options.optional
    )
  },
  (config) =>
    Effect.flatMap(Backend.Backend, (backend) =>
      backend.audit({
        follow: config.follow,
        afterSeq: Option.getOrUndefined(config.after),
        sessionKey: Option.getOrUndefined(config.session)
      }).pipe(
        Stream.runForEach((event) =>
          Console.log(
            config.json ? Terminal.json(Schema.encodeSync(AuditEvent.AuditEvent)(event), 0) : Format.auditLine(event)
          )
        )
      ))
).pipe(Command.withDescription("Print the audit log in sequence order; --follow to tail it"), withBackend)
