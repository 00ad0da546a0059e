/**
 * The options and arguments the commands share, each checked where it is parsed: a bad value is a
 * usage error (one escaped line) before any command runs.
 */
import { Args, HelpDoc, Options, ValidationError } from "@effect/cli"
import { ApprovalRequest, Limits, ToolCall, ToolGateError } from "@tool-gate/core"
import { Config, Either, ParseResult, Redacted, Schema } from "effect"
import * as Terminal from "./terminal.js"

// Usage errors quote the command line, which may hold text pasted from a model: one escaped line.
export const invalid = (message: string) => ValidationError.invalidValue(HelpDoc.p(Terminal.escape(message)))

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

/** `--db`: the SQLite file. */
export const db = Options.text("db").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription("the SQLite file (env TOOLGATE_DB)"),
  Options.withFallbackConfig(Config.string("TOOLGATE_DB")),
  Options.withDefault(".toolgate/toolgate.db")
)

/** `--policy`: the policy file that judges edited arguments. */
export const policy = Options.text("policy").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription(
    "a policy file, .yaml or .json (env TOOLGATE_POLICY); approvals with edited arguments are judged by it"
  ),
  Options.withFallbackConfig(Config.string("TOOLGATE_POLICY")),
  Options.optional
)

/** Where the commands act: the file, or a server. */
export const target = {
  db,
  policy,
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

/** `--json`: print the domain schemas' encoding. */
export const json = Options.boolean("json").pipe(Options.withDescription("print JSON (the domain schemas' encoding)"))

/**
 * `--session KEY`: decoded by the rules of a call's session key at their widest (what any gate or
 * server may accept), so the CLI sends only a key a call can have.
 */
export const sessionKey = (description: string) =>
  Options.text("session").pipe(
    Options.withPseudoName("KEY"),
    Options.withDescription(description),
    Options.mapEffect((text) =>
      Either.flatMap(
        Either.mapLeft(nonBlank("--session")(text), ValidationError.invalidValue),
        (key) =>
          Either.mapLeft(
            ToolCall.decodeSessionKey(key, Limits.maxCallLimits),
            (error) => invalid(`--session ${error.problems.map((problem) => problem.message).join("; ")}`)
          )
      )
    )
  )

/** The `id` argument: a request or session approval id, decoded by the id's branded schema. */
export const idArg = <A>(id: Schema.Schema<A, string>, description: string) =>
  Args.text({ name: "id" }).pipe(
    Args.withDescription(description),
    Args.mapEffect((text) =>
      Either.flatMap(
        name("the id")(text),
        (checked) => Either.mapLeft(Schema.decodeEither(id)(checked), () => HelpDoc.p(`not a valid id: "${checked}"`))
      )
    )
  )

/** The options and argument of every command that acts on one request. */
export const onRequest = { ...target, json, id: idArg(ApprovalRequest.RequestId, "the request id (req_...)") }

/** `--reason TEXT`. */
export const reason = (description: string) =>
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

/**
 * A string option's schema: `parse` decodes the text, and its refusal is the whole usage error (one
 * escaped line), not wrapped in the schema's own report.
 */
const fromText = <A>(
  to: Schema.Schema<A>,
  parse: (text: string) => Either.Either<A, string>,
  format: (value: A) => string
) =>
  Schema.transformOrFail(Schema.String, to, {
    strict: true,
    decode: (text, _, ast) =>
      Either.mapLeft(parse(text), (message) => new ParseResult.Type(ast, text, Terminal.escape(message))),
    encode: (value) => ParseResult.succeed(format(value))
  }).annotations({
    message: (issue) =>
      issue._tag === "Transformation" && issue.issue._tag === "Type" && issue.issue.message !== undefined
        ? issue.issue.message
        : { message: "", override: false }
  })

/** `--args JSON`: edited arguments, decoded by `parseArgs`. */
export const editedArgs = Options.text("args").pipe(
  Options.withPseudoName("JSON"),
  Options.withDescription("approve with these arguments instead (a JSON object); the policy judges them again"),
  Options.withSchema(fromText(Schema.typeSchema(ToolCall.ToolArgs), parseArgs, (args) => JSON.stringify(args))),
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

/** `--host HOST`: the address a server binds, loopback unless told otherwise. */
export const host = (description: string) =>
  Options.text("host").pipe(
    Options.withPseudoName("HOST"),
    Options.withDescription(description),
    Options.withDefault("127.0.0.1")
  )

/** `--FLAG PORT`: a TCP port, 0 to 65535 (0 picks a free one). */
export const port = (flag: string, description: string) =>
  Options.integer(flag).pipe(
    Options.withPseudoName("PORT"),
    Options.withDescription(description),
    Options.mapEffect((port) =>
      port >= 0 && port <= 65535
        ? Either.right(port)
        : Either.left(invalid(`--${flag} must be from 0 to 65535, got ${port}`))
    )
  )

/** A duration option, `--FLAG DURATION`. */
export const duration = (flag: string, description: string) =>
  Options.text(flag).pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(description),
    Options.withSchema(fromText(Schema.Number, (text) => parseDuration(`--${flag}`, text), (millis) => `${millis}ms`))
  )
