/** `toolgate audit`: the audit log in sequence order, or followed, filtered as `GET /audit` filters it. */
import { Command, Options } from "@effect/cli"
import { AuditEvent } from "@tool-gate/core"
import { Console, Effect, Either, Option, Schema, Stream } from "effect"
import * as Backend from "../../Backend.js"
import * as Format from "../format.js"
import { invalid, sessionKey, target } from "../options.js"
import { withBackend } from "../target.js"
import * as Terminal from "../terminal.js"

const decodeTime = Schema.decodeEither(AuditEvent.TimeFromString)

/** `--since` / `--until`: RFC 3339 or epoch milliseconds, as the HTTP API takes them. */
const time = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("TIME"),
    Options.withDescription(`${description} (RFC 3339, 2026-11-24T09:00:00Z, or epoch milliseconds)`),
    Options.mapEffect((text) =>
      Either.mapLeft(
        decodeTime(text),
        () =>
          invalid(
            `--${name} must be an RFC 3339 date-time (2026-11-24T09:00:00Z) or epoch milliseconds, got "${text}"`
          )
      )
    ),
    Options.optional
  )

/** `toolgate audit` */
export const audit = Command.make(
  "audit",
  {
    ...target,
    json: Options.boolean("json").pipe(
      Options.withDescription("JSON Lines: one event per line, as the HTTP API writes it")
    ),
    follow: Options.boolean("follow").pipe(
      Options.withAlias("f"),
      Options.withDescription("after the log, keep printing new events until interrupted")
    ),
    session: sessionKey("only this session's events (and clears of every session)").pipe(Options.optional),
    tool: Options.text("tool").pipe(
      Options.withPseudoName("NAME"),
      Options.withDescription("only this tool's events"),
      Options.mapEffect((name) =>
        name.trim() === "" || name.trim() !== name
          ? Either.left(invalid(`--tool must not be blank or start or end with spaces, got "${name}"`))
          : Either.right(name)
      ),
      Options.optional
    ),
    outcome: Options.choice("outcome", AuditEvent.Outcome.literals).pipe(
      Options.withDescription("only events with this outcome"),
      Options.optional
    ),
    since: time("since", "only events at or after this time"),
    until: time("until", "only events at or before this time"),
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
        sessionKey: Option.getOrUndefined(config.session),
        toolName: Option.getOrUndefined(config.tool),
        outcome: Option.getOrUndefined(config.outcome),
        since: Option.getOrUndefined(config.since),
        until: Option.getOrUndefined(config.until)
      }).pipe(
        Stream.runForEach((event) =>
          Console.log(config.json ? Terminal.json(AuditEvent.toJson(event), 0) : Format.auditLine(event))
        )
      ))
).pipe(
  Command.withDescription(
    "Print the audit log in sequence order (--json: JSON Lines); filter by session, tool, outcome and time; --follow to tail it"
  ),
  withBackend
)
