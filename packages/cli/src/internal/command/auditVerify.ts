/**
 * `toolgate audit verify`: checks the audit log's hash chain (`AuditChain`) on the SQLite file or
 * through a server (`GET /audit/verify`), with the `audit` command's `--db`, `--server`, `--token`
 * and `--json`. Prints the head to record elsewhere; exits 1 when the chain is broken.
 */
import { Command, Options } from "@effect/cli"
import {
  FetchHttpClient,
  HttpApiClient,
  HttpApiError,
  HttpClient,
  HttpClientError,
  HttpClientRequest
} from "@effect/platform"
import { AuditChain, ToolGateError } from "@tool-gate/core"
import { Api, Auth } from "@tool-gate/server"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Console, Effect, Either, Option, ParseResult, type Redacted, Schema } from "effect"
import { Failed, InvalidInput, ServerRedirected, ServerUnavailable } from "../errors.js"
import { invalid } from "../options.js"
import * as Terminal from "../terminal.js"
import { audit } from "./audit.js"

/** The chain on the file: the store opened on it (migrated, as every command on the file does). */
const onFile = (filename: string, anchor: AuditChain.Anchor | undefined) =>
  AuditChain.verify({ anchor }).pipe(Effect.provide(ToolGateSqlite.layerStore({ filename })))

const isApiError = Schema.is(Schema.Union(Auth.Unauthorized, Auth.Forbidden))

/** What a verification through a server fails with. */
type VerifyError =
  | ToolGateError.ToolGateError
  | Auth.Unauthorized
  | Auth.Forbidden
  | InvalidInput
  | ServerRedirected
  | ServerUnavailable

/** The chain through a server: the verify endpoint, with the token; no redirect followed. */
const onServer = (url: string, token: Option.Option<Redacted.Redacted>, anchor: AuditChain.Anchor | undefined) =>
  Effect.gen(function*() {
    const base = url.replace(/\/+$/, "")
    const http = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest((request) =>
        Option.match(token, { onNone: () => request, onSome: (value) => HttpClientRequest.bearerToken(request, value) })
      ),
      HttpClient.transformResponse((response) =>
        response.pipe(
          Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" }),
          Effect.filterOrFail(
            (reply) => reply.status < 300 || reply.status >= 400,
            (reply) =>
              new ServerRedirected({
                url: base,
                method: "GET",
                path: "/audit/verify",
                status: reply.status,
                location: reply.headers["location"]
              })
          )
        )
      )
    )
    const client = yield* HttpApiClient.makeWith(Api.Api, { httpClient: http, baseUrl: base })
    return yield* client.audit.verify({ urlParams: { anchor } }).pipe(
      Effect.catchAll((error: unknown): Effect.Effect<never, VerifyError> => {
        if (error instanceof HttpApiError.HttpApiDecodeError) {
          return Effect.fail(new InvalidInput({ message: `The server refused the input: ${error.message}` }))
        }
        if (ToolGateError.isToolGateError(error) || isApiError(error) || error instanceof ServerRedirected) {
          return Effect.fail(error)
        }
        const detail = HttpClientError.isHttpClientError(error) && error._tag === "RequestError"
          ? `cannot connect (${error.message})`
          : `unexpected reply: ${error instanceof Error ? error.message : String(error)}`
        return Effect.fail(new ServerUnavailable({ url: base, detail }))
      })
    )
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** The report as lines for a reader. */
const describe = (report: AuditChain.Report): ReadonlyArray<string> => {
  if (report.problem !== undefined) {
    const { kind, message, seq } = report.problem
    return [`audit log broken at seq ${seq} (${kind}): ${message}`, `${report.events} event(s) before it verified`]
  }
  if (report.events === 0) return ["audit log verified: no events yet"]
  if (report.head === undefined || report.chainStart === undefined) {
    return [`audit log verified: ${report.events} event(s), none chained (written before the store chained its events)`]
  }
  const before = report.chainStart > 1 ? ` (the ${report.chainStart - 1} before it were written unchained)` : ""
  const anchor = Schema.encodeSync(AuditChain.AnchorFromString)(report.head)
  return [
    `audit log verified: ${report.events} event(s), chained from seq ${report.chainStart}${before}`,
    `head: ${anchor}`,
    `record the head where the database's writers cannot change it; later: toolgate audit verify --anchor ${anchor}`
  ]
}

const decodeAnchor = Schema.decodeEither(AuditChain.AnchorFromString)

/** `toolgate audit verify` */
export const auditVerify = Command.make(
  "verify",
  {
    anchor: Options.text("anchor").pipe(
      Options.withPseudoName("SEQ:HASH"),
      Options.withDescription("a head printed by an earlier verify, which must still be in place"),
      Options.mapEffect((text) =>
        Either.mapLeft(
          decodeAnchor(text),
          (error) => invalid(`--anchor: ${ParseResult.TreeFormatter.formatErrorSync(error)}, got "${text}"`)
        )
      ),
      Options.optional
    )
  },
  (config) =>
    Effect.gen(function*() {
      const { db, json, server, token } = yield* audit
      const anchor = Option.getOrUndefined(config.anchor)
      const report = yield* Option.match(server, {
        onNone: () => onFile(db, anchor),
        onSome: (url) => onServer(url, token, anchor)
      })
      if (json) yield* Console.log(Terminal.json(Schema.encodeSync(AuditChain.Report)(report), 0))
      else for (const line of describe(report)) yield* Console.log(line)
      // exit 1: the check found a problem, as a failed `policy check` does
      if (!report.valid) return yield* new Failed({ code: 1 })
    })
).pipe(
  Command.withDescription(
    "Check the audit log's hash chain: no event missing, changed or unlinked; prints the head to record; exit 1 if " +
      "broken. Takes audit's --db, or --server and --token, and --json after its own --anchor: " +
      "toolgate audit verify --anchor SEQ:HASH --db FILE"
  )
)
