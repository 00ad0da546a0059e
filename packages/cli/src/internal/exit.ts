/**
 * How a command ends: one exit code per kind of failure a script handles differently, looked up
 * in one table over every error a command can fail with, and the one line on stderr that says why.
 */
import { ValidationError } from "@effect/cli"
import type { ServeError } from "@effect/platform/HttpServerError"
import type { ToolGateError } from "@tool-gate/core"
import type { McpGateway } from "@tool-gate/mcp"
import type { Auth } from "@tool-gate/server"
import { Cause, Console, Effect, Exit, Option, Predicate } from "effect"
import type { BackendError } from "../Backend.js"
import { type CannotListen, Failed } from "./errors.js"

/**
 * The process exit codes, one per kind of failure a script handles differently.
 *
 * @since 0.1.0
 * @category models
 */
export const ExitCode = {
  ok: 0,
  /**
   * `policy check` found problems (or warnings, with `--strict`), `--policy` names an invalid
   * policy, a `policy test` case failed, `policy diff --exit-code` found differences, or `audit
   * verify` found the audit chain broken
   */
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
  /**
   * the database or the server could not be used, the server answered with a redirect, `serve` or
   * `mcp --http` could not listen on its address (a port in use: `EADDRINUSE`), or `mcp` could not
   * reach its downstream server or lost it
   */
  unavailable: 8,
  /** `approve --args`: the policy denied the edited arguments, so the request is denied, not approved */
  policyDenied: 9,
  /** a bug: the report on stderr is worth filing */
  internal: 70
} as const

/** Every error a command fails with: the gate's, the backends', the token file's and the server's start. */
type CommandError =
  | ToolGateError.ToolGateError
  | BackendError
  | Auth.TokensInvalid
  | ServeError
  | CannotListen
  | McpGateway.DownstreamUnavailable
  | McpGateway.DownstreamClosed

// One entry per error: a new error in any of those unions is a compile error here until it gets
// its code. Errors a command never meets (the agent side's) would be a bug there.
const codes: { readonly [Tag in CommandError["_tag"]]: number } = {
  PolicyInvalid: ExitCode.policyInvalid,
  InvalidInput: ExitCode.usage,
  InvalidResponse: ExitCode.usage,
  InvalidDuration: ExitCode.usage,
  InvalidToolCall: ExitCode.usage,
  TokensInvalid: ExitCode.usage,
  RequestNotFound: ExitCode.notFound,
  SessionApprovalNotFound: ExitCode.notFound,
  SessionNotFound: ExitCode.notFound,
  AlreadyResolved: ExitCode.alreadyResolved,
  RequestExpired: ExitCode.expired,
  Unauthorized: ExitCode.unauthorized,
  Forbidden: ExitCode.forbidden,
  PersistenceError: ExitCode.unavailable,
  ServerUnavailable: ExitCode.unavailable,
  ServerRedirected: ExitCode.unavailable,
  ServeError: ExitCode.unavailable,
  CannotListen: ExitCode.unavailable,
  DownstreamUnavailable: ExitCode.unavailable,
  DownstreamClosed: ExitCode.unavailable,
  ToolDenied: ExitCode.internal,
  RequestPending: ExitCode.internal,
  CallAlreadyExecuted: ExitCode.internal,
  CheckpointNotFound: ExitCode.internal,
  AlreadyResumed: ExitCode.internal,
  CheckpointClaimed: ExitCode.internal,
  CheckpointInvalid: ExitCode.internal
}

const isCoded = (tag: string): tag is keyof typeof codes => Object.hasOwn(codes, tag)

/** The exit code of a failure; anything no table names is a bug. */
const codeOf = (error: unknown): number => {
  if (ValidationError.isValidationError(error)) return ExitCode.usage
  if (error instanceof Failed) return error.code
  const tag = Predicate.hasProperty(error, "_tag") ? error._tag : undefined
  return typeof tag === "string" && isCoded(tag) ? codes[tag] : ExitCode.internal
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
export const report = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
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
