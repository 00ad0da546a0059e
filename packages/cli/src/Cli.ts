/**
 * The `toolgate` command line as a pure `Command` value: serve the approval API, list and answer
 * pending approvals, extend them, manage session approvals, read or follow the audit log, check
 * policies and run the demo. Every command that reads or answers works on the SQLite file
 * (`--db`) or against a server (`--server` with `--token`), through the `Backend` service.
 *
 * Failures print one line on stderr and end with a distinct exit code (`ExitCode`). Everything
 * printed passes one output boundary (`internal/terminal.ts`): a control character that a model,
 * an approver or a server put in a value is shown escaped, never sent to the terminal.
 *
 * @example
 * import { NodeContext, NodeRuntime } from "@effect/platform-node"
 * import { Cli } from "@tool-gate/cli"
 * import { Effect } from "effect"
 *
 * NodeRuntime.runMain(Cli.run(process.argv).pipe(Effect.provide(NodeContext.layer)), {
 *   disableErrorReporting: true,
 *   teardown: (exit) => process.exit(Cli.exitCode(exit))
 * })
 *
 * @since 0.1.0
 */
import { Args, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import type { FileSystem } from "@effect/platform"
import { ApprovalRequest, AuditEvent, Limits, Policy, SessionApproval, ToolCall, ToolGateError } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import {
  Cause,
  Clock,
  Config,
  Console,
  Context,
  Effect,
  Either,
  Exit,
  Layer,
  Option,
  Redacted,
  Schema,
  Stream
} from "effect"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { userInfo } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Backend from "./Backend.js"
import * as Format from "./internal/format.js"
import * as Terminal from "./internal/terminal.js"

/**
 * The process exit codes, one per kind of failure a script handles differently.
 *
 * @since 0.1.0
 * @category models
 */
export const ExitCode = {
  ok: 0,
  /** `policy check` found problems, or `--policy` names an invalid policy */
  policyInvalid: 1,
  /** a bad command line or input: unknown option, malformed `--args`, bad `--ttl` or `--session-ttl`, a refused answer */
  usage: 2,
  /** no such request, session approval or session (as far as the token may see) */
  notFound: 3,
  /** the request was already answered differently (HTTP 409) */
  alreadyResolved: 4,
  /** the request expired before the answer (HTTP 410); timeout means deny */
  expired: 5,
  /** no token or an unknown one (HTTP 401) */
  unauthorized: 6,
  /** the token may not do this: the auditor role answering (HTTP 403) */
  forbidden: 7,
  /** the database or the server could not be used, or the server answered with a redirect */
  unavailable: 8,
  /** `approve --args`: the policy denied the edited arguments, so the request is denied, not approved */
  policyDenied: 9,
  /** a bug: the report on stderr is worth filing */
  internal: 70
} as const

/**
 * Ends the command with `code` after the command itself reported why (a failed policy check,
 * the demo's own exit code).
 *
 * @since 0.1.0
 * @category errors
 */
export class Failed extends Schema.TaggedError<Failed>()("Failed", { code: Schema.Number }) {}

const codeOf = (error: unknown): number => {
  if (ValidationError.isValidationError(error)) return ExitCode.usage
  switch ((error as { readonly _tag?: string })._tag) {
    case "Failed":
      return (error as Failed).code
    case "PolicyInvalid":
      return ExitCode.policyInvalid
    case "InvalidInput":
    case "InvalidResponse":
    case "InvalidDuration":
    case "InvalidToolCall":
    case "TokensInvalid":
      return ExitCode.usage
    case "RequestNotFound":
    case "SessionApprovalNotFound":
    case "SessionNotFound":
      return ExitCode.notFound
    case "AlreadyResolved":
      return ExitCode.alreadyResolved
    case "RequestExpired":
      return ExitCode.expired
    case "Unauthorized":
      return ExitCode.unauthorized
    case "Forbidden":
      return ExitCode.forbidden
    case "PersistenceError":
    case "ServerUnavailable":
    case "ServerRedirected":
    case "ServeError":
      return ExitCode.unavailable
  }
  return ExitCode.internal
}

/**
 * The exit code for how the program ended: 0 on success or when stopped by a signal.
 *
 * @since 0.1.0
 * @category utils
 */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number =>
  Exit.match(exit, {
    onSuccess: () => ExitCode.ok,
    onFailure: (cause) =>
      Cause.isInterruptedOnly(cause)
        ? ExitCode.ok
        : Option.match(Cause.failureOption(cause), { onNone: () => ExitCode.internal, onSome: codeOf })
  })

/** The report of a bug, line by line (each escaped like every other line). */
const internalError = (cause: Cause.Cause<unknown>) =>
  Effect.forEach(["toolgate: internal error", ...Cause.pretty(cause).split("\n")], (line) => Console.error(line), {
    discard: true
  })

/** One line on stderr per failure; @effect/cli has already printed its own validation errors. */
const report = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  return Option.match(Cause.failureOption(cause), {
    onNone: () => internalError(cause),
    onSome: (error) => {
      if (ValidationError.isValidationError(error) || error instanceof Failed) return Effect.void
      const message = error instanceof Error ? error.message : String(error)
      return codeOf(error) === ExitCode.internal ? internalError(cause) : Console.error(`toolgate: ${message}`)
    }
  })
}

// Usage errors quote the command line, which may hold text pasted from a model: one escaped line.
const invalid = (message: string) => ValidationError.invalidValue(HelpDoc.p(Terminal.escape(message)))

// Options ----------------------------------------------------------------------------------------

const db = Options.text("db").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription("the SQLite file (env TOOLGATE_DB)"),
  Options.withFallbackConfig(Config.string("TOOLGATE_DB")),
  Options.withDefault(".toolgate/toolgate.db")
)

const policyOption = Options.text("policy").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription(
    "a policy file, .yaml or .json (env TOOLGATE_POLICY); approvals with edited arguments are judged by it"
  ),
  Options.withFallbackConfig(Config.string("TOOLGATE_POLICY")),
  Options.optional
)

/** Where the commands act: the file, or a server. */
const target = {
  db,
  policy: policyOption,
  server: Options.text("server").pipe(
    Options.withPseudoName("URL"),
    Options.withDescription("a toolgate server's URL, instead of the file (env TOOLGATE_SERVER)"),
    Options.withFallbackConfig(Config.string("TOOLGATE_SERVER")),
    Options.mapEffect((text) => Either.mapLeft(serverUrl(text), invalid)),
    Options.optional
  ),
  token: Options.redacted("token").pipe(
    Options.withPseudoName("TOKEN"),
    Options.withDescription("the bearer token for --server (env TOOLGATE_TOKEN)"),
    Options.withFallbackConfig(Config.redacted("TOOLGATE_TOKEN")),
    // A header cannot carry it otherwise, and fetch's complaint would quote the secret.
    Options.mapEffect((token) =>
      /^[\x21-\x7e]+$/.test(Redacted.value(token))
        ? Either.right(token)
        : Either.left(invalid("--token must be visible ASCII characters, without spaces or line breaks (not shown)"))
    ),
    Options.optional
  ),
  actor: Options.text("actor").pipe(
    Options.withPseudoName("NAME"),
    Options.withDescription("who answers, on the file (default: the OS user); a server takes it from the token"),
    Options.mapEffect((text) => Either.mapLeft(name("--actor")(text), ValidationError.invalidValue)),
    Options.optional
  )
}

interface Target {
  readonly db: string
  readonly policy: Option.Option<string>
  readonly server: Option.Option<string>
  readonly token: Option.Option<Redacted.Redacted>
  readonly actor: Option.Option<string>
}

const json = Options.boolean("json").pipe(Options.withDescription("print JSON (the domain schemas' encoding)"))

// Ids and session keys are never blank (the schemas say so); refusing one here keeps a remote call
// from failing while encoding its URL.
const nonBlank = (what: string) => (text: string): Either.Either<string, HelpDoc.HelpDoc> =>
  text.trim() === "" || text.trim() !== text
    ? Either.left(HelpDoc.p(`${what} must not be blank or start or end with spaces, got "${Terminal.escape(text)}"`))
    : Either.right(text)

// What the gate makes (request and session approval ids) and who answers (recorded in the audit
// log) never holds a control character; one pasted in is refused rather than sent or stored.
const printable = (what: string) => (text: string): Either.Either<string, HelpDoc.HelpDoc> =>
  Terminal.escape(text) === text
    ? Either.right(text)
    : Either.left(HelpDoc.p(`${what} must not contain control characters, got "${Terminal.escape(text)}"`))

const name = (what: string) => (text: string) => Either.flatMap(nonBlank(what)(text), printable(what))

const serverUrl = (text: string): Either.Either<string, string> =>
  Either.try(() => new URL(text)).pipe(
    Either.filterOrLeft(
      (url) => (url.protocol === "http:" || url.protocol === "https:") && url.search === "" && url.hash === "",
      () => undefined
    ),
    Either.mapBoth({
      onLeft: () => `--server must be an http:// or https:// URL (the server's base), got "${text}"`,
      onRight: () => text
    })
  )

const sessionKey = (description: string) =>
  Options.text("session").pipe(
    Options.withPseudoName("KEY"),
    Options.withDescription(description),
    Options.mapEffect((text) => Either.mapLeft(nonBlank("--session")(text), ValidationError.invalidValue))
  )

const idArg = (description: string) =>
  Args.text({ name: "id" }).pipe(
    Args.withDescription(description),
    Args.mapEffect(name("the id"))
  )

/** The options and argument of every command that acts on one request. */
const onRequest = { ...target, json, id: idArg("the request id (req_...)") }

const reason = (description: string) =>
  Options.text("reason").pipe(Options.withPseudoName("TEXT"), Options.withDescription(description), Options.optional)

/**
 * `--args`: a JSON object of arguments, as a model would send them, decoded by the core's schema.
 * Anything else (not JSON, not an object, values the gate refuses, nesting too deep to walk) is a
 * usage error before a backend is asked.
 *
 * @since 0.1.0
 * @category utils
 */
export const parseArgs = (text: string): Either.Either<ToolCall.ToolArgs, string> =>
  Either.try({
    try: () => JSON.parse(text) as unknown,
    catch: (error) => `--args is not valid JSON: ${(error as Error).message}`
  }).pipe(
    Either.flatMap((value) =>
      typeof value !== "object" || value === null || Array.isArray(value)
        ? Either.left(`--args must be a JSON object of arguments, got ${text}`)
        : Either.try({
          // a stack overflow on absurdly deep nesting is the input's fault, not a bug
          try: () => Schema.decodeUnknownEither(ToolCall.ToolArgs)(value),
          catch: () => "--args is nested too deeply"
        }).pipe(
          Either.flatMap(Either.mapLeft((error) =>
            `--args are not acceptable arguments: ${
              ToolGateError.problemsOf(error).map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`)).join(
                "; "
              )
            }`
          ))
        )
    )
  )

const editedArgs = Options.text("args").pipe(
  Options.withPseudoName("JSON"),
  Options.withDescription("approve with these arguments instead (a JSON object); the policy judges them again"),
  Options.mapEffect((text) => Either.mapLeft(parseArgs(text), invalid)),
  Options.optional
)

const ttlPattern = /^(\d+(?:\.\d+)?)\s*(ms|millis|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)$/i

const unitMillis = (unit: string): number => {
  const lower = unit.toLowerCase()
  if (lower === "ms" || lower.startsWith("milli")) return 1
  return { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[lower[0] as "s" | "m" | "h" | "d"]
}

/**
 * A duration option (`--ttl`, `--session-ttl`): `90s`, `10m`, `2h`, `1d`, `500ms`, `10 minutes`,
 * in milliseconds: a whole number of them from 1 ms to a year (`Limits.TtlMillis`, the bound of
 * every duration the gate takes).
 *
 * @since 0.1.0
 * @category utils
 */
export const parseDuration = (flag: string, text: string): Either.Either<number, string> => {
  const match = ttlPattern.exec(text.trim())
  if (match === null) {
    return Either.left(`${flag}: expected a duration such as 90s, 10m, 2h or "10 minutes", got "${text}"`)
  }
  // rounded to a millionth of a millisecond first, so 0.1h is 360000 ms rather than a float's 360000.00000000006
  const millis = Math.round(Number(match[1]) * unitMillis(match[2]!) * 1e6) / 1e6
  return Either.mapLeft(
    Schema.decodeUnknownEither(Limits.TtlMillis)(millis),
    () => `${flag}: must be a whole number of milliseconds from 1 ms to a year (365d), got "${text}"`
  )
}

const duration = (flag: string, description: string) =>
  Options.text(flag).pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(description),
    Options.mapEffect((text) => Either.mapLeft(parseDuration(`--${flag}`, text), invalid))
  )

// Wiring -----------------------------------------------------------------------------------------

/** Without a policy nothing evaluates new calls, and an approval with edited arguments is denied. */
const editsDenied = Policy.unsafeMake({ default: "deny" })

const loadPolicy = (
  file: Option.Option<string>
): Effect.Effect<Policy.Policy, ToolGateError.PolicyInvalid, FileSystem.FileSystem> =>
  Option.match(file, { onNone: () => Effect.succeed(editsDenied), onSome: Policy.load })

const osUser = (): string => {
  try {
    return userInfo().username
  } catch {
    return process.env.USER ?? "cli"
  }
}

const backend = (config: Target) =>
  Option.match(config.server, {
    onSome: (url) => Backend.layerRemote({ url, token: config.token }),
    onNone: () =>
      Layer.unwrapEffect(Effect.gen(function*() {
        // Opening a path would create an empty database there: a mistyped --db would then list
        // nothing and answer nothing, silently.
        if (!existsSync(config.db)) {
          return yield* new Backend.InvalidInput({
            message: `no database at ${config.db}: give the file your agents use with --db (or TOOLGATE_DB)`
          })
        }
        const policy = yield* loadPolicy(config.policy)
        return Backend.layerDirect({ filename: config.db, policy, actor: Option.getOrElse(config.actor, osUser) })
      }))
  })

/** Prints each line with its own `Console.log`: the boundary escapes any line break inside one. */
const printLines = (lines: ReadonlyArray<string>) =>
  Effect.forEach(lines, (line) => Console.log(line), { discard: true })

/** Prints `value` as JSON encoded by `schema`, or as lines of text. */
const print = <A, I>(
  asJson: boolean,
  schema: Schema.Schema<A, I>,
  value: A,
  text: () => string | ReadonlyArray<string>
) => asJson ? printLines(Terminal.json(Schema.encodeSync(schema)(value)).split("\n")) : printLines([text()].flat())

const withBackend = <Name extends string, A extends Target, E, R>(
  command: Command.Command<Name, R, E, A>
) => Command.provide(command, backend)

// Commands ---------------------------------------------------------------------------------------

const pending = Command.make(
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

const approve = Command.make(
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
          return yield* new Backend.InvalidInput({
            message: `${flag} applies only with --session (approve for the session)`
          })
        }
      }
      if (Option.isSome(config.args) && Option.isNone(config.server) && Option.isNone(config.policy)) {
        return yield* new Backend.InvalidInput({
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

const deny = Command.make(
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

const extend = Command.make(
  "extend",
  {
    ...onRequest,
    ttl: duration("ttl", "more time from now: 90s, 10m, 2h, 1d")
  },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const request = yield* backend.extend(config.id, config.ttl)
      const now = yield* Clock.currentTimeMillis
      yield* print(config.json, ApprovalRequest.ApprovalRequest, request, () => Format.extendedLine(request, now))
    })
).pipe(Command.withDescription("Give a pending request more time before it expires"), withBackend)

const approvalsList = Command.make(
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

const approvalsRevoke = Command.make(
  "revoke",
  {
    ...target,
    json,
    session: sessionKey("the session the approval belongs to"),
    id: idArg("the session approval id (sa_...)")
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

const approvalsClear = Command.make(
  "clear",
  { ...target, session: sessionKey("the session") },
  (config) =>
    Effect.gen(function*() {
      const backend = yield* Backend.Backend
      const cleared = yield* backend.clear(config.session)
      yield* Console.log(`cleared ${cleared} session approval(s) of ${config.session}`)
    })
).pipe(Command.withDescription("Revoke every session approval of a session"), withBackend)

const approvals = Command.make("approvals").pipe(
  Command.withDescription("Session approvals: list, revoke, clear"),
  Command.withSubcommands([approvalsList, approvalsRevoke, approvalsClear])
)

const audit = Command.make(
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

const policyCheck = Command.make(
  "check",
  { json, file: Args.text({ name: "file" }).pipe(Args.withDescription("a .yaml, .yml or .json policy")) },
  ({ file, json }) =>
    Effect.gen(function*() {
      const loaded = yield* Effect.either(Policy.load(file))
      const problems = Either.match(loaded, { onLeft: (error) => error.problems, onRight: () => [] })
      const warnings = Either.match(loaded, { onLeft: () => [], onRight: (policy) => policy.warnings })
      const at = (path: string) => (path === "" ? `${file}:` : `${file}: ${path}:`)
      if (json) {
        yield* printLines(
          Terminal.json(
            {
              file,
              valid: Either.isRight(loaded),
              ...Either.match(loaded, {
                onLeft: () => ({}),
                onRight: (policy) => ({ version: policy.version, rules: policy.rules.length })
              }),
              problems,
              warnings
            }
          ).split("\n")
        )
      } else {
        for (const problem of problems) yield* Console.log(`${at(problem.path)} error: ${problem.message}`)
        for (const warning of warnings) {
          yield* Console.log(`${at(warning.path)} warning (${warning.kind}): ${warning.message}`)
        }
        yield* Console.log(Either.match(loaded, {
          onLeft: () => `${file}: invalid policy, ${problems.length} problem(s)`,
          onRight: (policy) =>
            `${file}: valid policy, ${policy.rules.length} rule(s), ${warnings.length} warning(s), version ${
              policy.version.slice(0, 12)
            }`
        }))
      }
      if (Either.isLeft(loaded)) return yield* new Failed({ code: ExitCode.policyInvalid })
    })
).pipe(
  Command.withDescription("Validate a policy file: every problem and lint warning with its path; exit 1 if invalid")
)

const policy = Command.make("policy").pipe(
  Command.withDescription("Policy files"),
  Command.withSubcommands([policyCheck])
)

const serve = Command.make(
  "serve",
  {
    db,
    policy: policyOption,
    port: Options.integer("port").pipe(
      Options.withPseudoName("PORT"),
      Options.withDescription("0 picks a free port"),
      Options.mapEffect((port) =>
        port >= 0 && port <= 65535
          ? Either.right(port)
          : Either.left(invalid(`--port must be from 0 to 65535, got ${port}`))
      ),
      Options.withDefault(7070)
    ),
    host: Options.text("host").pipe(
      Options.withPseudoName("HOST"),
      Options.withDescription("the address to bind; the default is reachable from this machine only"),
      Options.withDefault("127.0.0.1")
    ),
    tokens: Options.text("tokens").pipe(
      Options.withPseudoName("FILE"),
      Options.withDescription("a JSON token file (default: the TOOLGATE_TOKENS environment variable)"),
      Options.optional
    )
  },
  (config) =>
    Effect.gen(function*() {
      // the server is loaded only to serve, so the other commands start without it
      const [HttpServer, { Auth, Server }] = yield* Effect.promise(() =>
        Promise.all([
          import("@effect/platform/HttpServer"),
          import("@tool-gate/server")
        ])
      )
      const tokens = yield* Option.match(config.tokens, { onNone: () => Auth.fromEnv, onSome: Auth.fromFile })
      const policy = yield* loadPolicy(config.policy)
      // Server.layer cuts open event streams on stop, so Ctrl-C never waits on a console tab
      const context = yield* Layer.build(
        Server.layer({ tokens, port: config.port, host: config.host }).pipe(
          Layer.provide(ToolGateSqlite.layer({ filename: config.db, policy }))
        )
      )
      const address = Context.get(context, HttpServer.HttpServer).address
      const where = address._tag === "TcpAddress"
        ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
        : address.path
      yield* Console.log(`toolgate: serving ${where} on ${config.db} (${tokens.length} token(s)); stop with Ctrl-C`)
      if (Option.isNone(config.policy)) {
        yield* Console.error("toolgate: no --policy given: approvals with edited arguments will be denied")
      }
      return yield* Effect.never
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Serve the approval API (and its console) over the SQLite file"))

// The CLI's sources and its bundle (dist/toolgate.mjs) both sit two levels below the repository.
const examples = fileURLToPath(new URL("../../../examples/", import.meta.url))

const demo = Command.make("demo", {}, () =>
  Effect.gen(function*() {
    const script = join(examples, "demo.ts")
    if (!existsSync(script)) {
      return yield* new Backend.InvalidInput({
        message: `the demo ships with the tool-gate repository (${script} not found); run it from a checkout`
      })
    }
    // The demo's agent runs on Bun (installed from npm with the repository), on the sources.
    const bun = join(dirname(createRequire(import.meta.url).resolve("bun/package.json")), "bin", "bun.exe")
    const code = yield* Effect.async<number>((resume) => {
      const child = spawn(bun, ["--conditions=@tool-gate/source", script], { cwd: dirname(examples), stdio: "inherit" })
      child.on("exit", (status) => resume(Effect.succeed(status ?? ExitCode.internal)))
      child.on("error", () => resume(Effect.succeed(ExitCode.internal)))
      return Effect.sync(() => child.kill())
    })
    if (code !== 0) return yield* new Failed({ code })
  })).pipe(Command.withDescription("Run the demo: an agent pauses, is approved from another process, and resumes"))

const toolgate = Command.make(
  "toolgate",
  {},
  () => Effect.fail(new Backend.InvalidInput({ message: "missing command; see toolgate --help" }))
).pipe(
  Command.withDescription("Gate AI-agent tool calls: answer approvals, read the audit log, check policies"),
  Command.withSubcommands([serve, pending, approve, deny, extend, approvals, audit, policy, demo]),
  // every command prints through the output boundary (internal/terminal.ts)
  Command.transformHandler(Terminal.withConsole(Terminal.lines))
)

/**
 * The whole command line.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = toolgate

const cli = Command.run(toolgate, { name: "toolgate", version: "0.1.0" })

/**
 * Runs the command line on `argv` (as `process.argv`: runtime and script first), reporting a
 * failure as one line on stderr; the exit code is `exitCode` of the result.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (argv: ReadonlyArray<string>) =>
  cli(argv).pipe(
    Effect.tapErrorCause((cause) => Terminal.withConsole(Terminal.lines)(report(cause))),
    // @effect/cli's own help and usage errors
    Terminal.withConsole(Terminal.docs)
  )
