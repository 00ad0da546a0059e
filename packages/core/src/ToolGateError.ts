/**
 * Every failure a caller of tool-gate handles differently, as a tagged error with a readable
 * message and the HTTP status the approval API answers with.
 *
 * @example
 * import { ToolGateError } from "@tool-gate/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.fail(new ToolGateError.RequestNotFound({ requestId: "r-1" })).pipe(
 *   Effect.catchTag("RequestNotFound", (e) => Effect.succeed(e.message))
 * )
 *
 * @since 0.1.0
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Migrator from "@effect/sql/Migrator"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Either, Option, ParseResult, Schema } from "effect"

/**
 * One problem in an input, with the path of the offending value (`requireApproval[3].args.path`)
 * and, for a problem in a policy file, the line and column where it is written.
 *
 * @since 0.1.0
 * @category models
 */
export const Problem = Schema.Struct({
  path: Schema.String,
  message: Schema.String,
  line: Schema.optional(Schema.Number),
  column: Schema.optional(Schema.Number)
})
/**
 * @since 0.1.0
 * @category models
 */
export type Problem = typeof Problem.Type

/**
 * Every problem of a schema decoding failure, with its path (`args.n`, `editedArgs.path`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const problemsOf = (error: ParseResult.ParseError): Array<Problem> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    path: issue.path.map(String).join("."),
    message: issue.message
  }))

const listProblems = (problems: ReadonlyArray<Problem>): string =>
  problems.map((p) => {
    const where = p.line === undefined ? "" : ` (line ${p.line}, column ${p.column ?? 1})`
    return p.path === "" && where === "" ? p.message : `${p.path}${where}: ${p.message}`
  }).join("; ")

/**
 * The tool call may not run: a deny rule, a human's denial, or an approval that expired
 * (`outcome` tells which; expiry is never reported as a human denial).
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolDenied extends Schema.TaggedError<ToolDenied>()(
  "ToolDenied",
  {
    toolCallId: Schema.String,
    toolName: Schema.String,
    sessionKey: Schema.String,
    outcome: Schema.Literal("policy", "denied", "expired"),
    reason: Schema.String,
    rule: Schema.optional(Schema.String),
    requestId: Schema.optional(Schema.String)
  },
  HttpApiSchema.annotations({ status: 403 })
) {
  override get message(): string {
    const why = this.outcome === "expired"
      ? "approval expired (timeout means deny)"
      : this.outcome === "denied"
      ? "denied by a human"
      : `denied by policy rule ${this.rule ?? "default"}`
    return `Tool call ${this.toolCallId} (${this.toolName}) ${why}: ${this.reason}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class RequestNotFound extends Schema.TaggedError<RequestNotFound>()(
  "RequestNotFound",
  { requestId: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {
  override get message(): string {
    return `No approval request with id ${this.requestId}`
  }
}

/**
 * A second answer that conflicts with the first. (The same answer again is not an error: it
 * returns the first resolution.)
 *
 * @since 0.1.0
 * @category errors
 */
export class AlreadyResolved extends Schema.TaggedError<AlreadyResolved>()(
  "AlreadyResolved",
  {
    requestId: Schema.String,
    status: Schema.Literal("approved", "denied", "expired"),
    respondedBy: Schema.optional(Schema.String)
  },
  HttpApiSchema.annotations({ status: 409 })
) {
  override get message(): string {
    return `Approval request ${this.requestId} was already ${this.status}${
      this.respondedBy ? ` by ${this.respondedBy}` : ""
    }; this answer was not applied`
  }
}

/**
 * The request's TTL passed before the answer arrived; it resolved as `expired` (deny).
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestExpired extends Schema.TaggedError<RequestExpired>()(
  "RequestExpired",
  { requestId: Schema.String, expiresAt: Schema.Number },
  HttpApiSchema.annotations({ status: 410 })
) {
  override get message(): string {
    return `Approval request ${this.requestId} expired at ${
      new Date(this.expiresAt).toISOString()
    }; late answers are refused`
  }
}

/**
 * `resume` was asked for a request nobody has answered yet.
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestPending extends Schema.TaggedError<RequestPending>()(
  "RequestPending",
  { requestId: Schema.String, expiresAt: Schema.Number },
  HttpApiSchema.annotations({ status: 409 })
) {
  override get message(): string {
    return `Approval request ${this.requestId} is still pending (expires ${new Date(this.expiresAt).toISOString()})`
  }
}

/**
 * The same tool-call id was approved and already ran; running it again would apply it twice.
 *
 * @since 0.1.0
 * @category errors
 */
export class CallAlreadyExecuted extends Schema.TaggedError<CallAlreadyExecuted>()(
  "CallAlreadyExecuted",
  { toolCallId: Schema.String, requestId: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {
  override get message(): string {
    return `Tool call ${this.toolCallId} was approved (request ${this.requestId}) and has already run`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class PolicyInvalid extends Schema.TaggedError<PolicyInvalid>()(
  "PolicyInvalid",
  { problems: Schema.Array(Problem), source: Schema.optional(Schema.String) },
  HttpApiSchema.annotations({ status: 400 })
) {
  override get message(): string {
    return `Invalid policy${this.source ? ` ${this.source}` : ""}: ${listProblems(this.problems)}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class InvalidToolCall extends Schema.TaggedError<InvalidToolCall>()(
  "InvalidToolCall",
  { problems: Schema.Array(Problem) },
  HttpApiSchema.annotations({ status: 400 })
) {
  override get message(): string {
    return `Invalid tool call: ${listProblems(this.problems)}`
  }
}

const reusedIdText = (toolCallId: string) => `tool call id ${toolCallId} was already used in this session`

/**
 * The refusal of a call whose tool-call id its session already used for another call (replay by
 * call id never lends one call's decision to another).
 *
 * @since 0.1.0
 * @category constructors
 */
export const reusedCallId = (toolCallId: string): InvalidToolCall =>
  new InvalidToolCall({
    problems: [{
      path: "id",
      message: `${
        reusedIdText(toolCallId)
      } for another call (tool, arguments, agent, intent or working directory differ)`
    }]
  })

/**
 * Whether `error` refuses the call `toolCallId` because the session already used that id for
 * another call (`reusedCallId`).
 *
 * @since 0.1.0
 * @category refinements
 */
export const isReusedCallId = (error: unknown, toolCallId: string): error is InvalidToolCall =>
  error instanceof InvalidToolCall &&
  error.problems.some((problem) => problem.path === "id" && problem.message.startsWith(reusedIdText(toolCallId)))

/**
 * An approval answer that cannot be applied as given (malformed, or edited arguments that are
 * not valid JSON arguments).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidResponse extends Schema.TaggedError<InvalidResponse>()(
  "InvalidResponse",
  { problems: Schema.Array(Problem) },
  HttpApiSchema.annotations({ status: 400 })
) {
  override get message(): string {
    return `Invalid approval response: ${listProblems(this.problems)}`
  }
}

/**
 * A duration (TTL, extension, session-approval lifetime) that is not finite or not between 1 ms
 * and a year. Nothing was changed.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidDuration extends Schema.TaggedError<InvalidDuration>()(
  "InvalidDuration",
  { field: Schema.String, message: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/**
 * @since 0.1.0
 * @category errors
 */
export class SessionApprovalNotFound extends Schema.TaggedError<SessionApprovalNotFound>()(
  "SessionApprovalNotFound",
  { sessionApprovalId: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {
  override get message(): string {
    return `No active session approval with id ${this.sessionApprovalId}`
  }
}

/**
 * The store could not be read or written. Nothing was half-written; the caller may retry. Its
 * message names the store: the checkpoint store's operations name checkpoints.
 *
 * @since 0.1.0
 * @category errors
 */
export class PersistenceError extends Schema.TaggedError<PersistenceError>()(
  "PersistenceError",
  { operation: Schema.String, cause: Schema.Defect },
  HttpApiSchema.annotations({ status: 503 })
) {
  override get message(): string {
    const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
    const store = this.operation.includes("checkpoint") ? "Checkpoint" : "Approval"
    return `${store} store failed during ${this.operation}: ${detail}`
  }

  /**
   * Maps every failure of `self` to a `PersistenceError` naming `operation`, including the ones
   * `@effect/sql` raises as defects (a failed COMMIT, a failed migration); other defects stay defects.
   *
   * @since 0.1.0
   * @category constructors
   */
  static refail(
    operation: string
  ): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, PersistenceError, R> {
    // `catchSomeDefect` then `mapError` in one handler of failures: every store call passes
    // through it, and a success then skips one frame (`mapError` ran a step to pass it on)
    return (self) =>
      Effect.catchAllCause(self, (cause) => {
        const defect = Cause.find(cause, (reason) => reason._tag === "Die" ? Option.some(reason.defect) : Option.none())
        if (
          Option.isSome(defect) && (defect.value instanceof SqlError || defect.value instanceof Migrator.MigrationError)
        ) {
          return Effect.fail(new PersistenceError({ operation, cause: defect.value }))
        }
        const failure = Cause.failureOrCause(cause)
        return Either.isLeft(failure)
          ? Effect.fail(new PersistenceError({ operation, cause: failure.left }))
          : Effect.failCause(failure.right)
      })
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class CheckpointNotFound extends Schema.TaggedError<CheckpointNotFound>()(
  "CheckpointNotFound",
  { token: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {
  override get message(): string {
    return `No checkpoint for ${this.token}`
  }
}

/**
 * A checkpoint resumes once: its resume was completed (`Checkpoints.complete`); the pipeline that
 * completed it owns what follows.
 *
 * @since 0.1.0
 * @category errors
 */
export class AlreadyResumed extends Schema.TaggedError<AlreadyResumed>()(
  "AlreadyResumed",
  { token: Schema.String, resumedAt: Schema.Number },
  HttpApiSchema.annotations({ status: 409 })
) {
  override get message(): string {
    return `Checkpoint ${this.token} was already resumed at ${new Date(this.resumedAt).toISOString()}`
  }
}

/**
 * Another owner holds the checkpoint's resume lease. Unlike `AlreadyResumed` this may pass: if
 * that owner crashes and does not complete, the checkpoint can be claimed again after `until`.
 *
 * @since 0.1.0
 * @category errors
 */
export class CheckpointClaimed extends Schema.TaggedError<CheckpointClaimed>()(
  "CheckpointClaimed",
  { token: Schema.String, owner: Schema.String, until: Schema.Number },
  HttpApiSchema.annotations({ status: 409 })
) {
  override get message(): string {
    return `Checkpoint ${this.token} is being resumed by ${this.owner} (lease until ${
      new Date(this.until).toISOString()
    }); it can be claimed again after that if it is not completed`
  }
}

/**
 * State that does not fit the checkpoint's schema (on save or on resume), or a save that names
 * no request or a request another checkpoint holds.
 *
 * @since 0.1.0
 * @category errors
 */
export class CheckpointInvalid extends Schema.TaggedError<CheckpointInvalid>()(
  "CheckpointInvalid",
  { problems: Schema.Array(Problem) },
  HttpApiSchema.annotations({ status: 400 })
) {
  override get message(): string {
    return `Invalid checkpoint: ${listProblems(this.problems)}`
  }
}

// The union ---------------------------------------------------------------------------------------

/**
 * Every tool-gate error, as one schema: decodes any of them from its encoding (`_tag` tells which).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolGateError: Schema.Union<[
  typeof ToolDenied,
  typeof RequestNotFound,
  typeof AlreadyResolved,
  typeof RequestExpired,
  typeof RequestPending,
  typeof CallAlreadyExecuted,
  typeof PolicyInvalid,
  typeof InvalidToolCall,
  typeof InvalidResponse,
  typeof InvalidDuration,
  typeof SessionApprovalNotFound,
  typeof PersistenceError,
  typeof CheckpointNotFound,
  typeof AlreadyResumed,
  typeof CheckpointClaimed,
  typeof CheckpointInvalid
]> = Schema.Union(
  ToolDenied,
  RequestNotFound,
  AlreadyResolved,
  RequestExpired,
  RequestPending,
  CallAlreadyExecuted,
  PolicyInvalid,
  InvalidToolCall,
  InvalidResponse,
  InvalidDuration,
  SessionApprovalNotFound,
  PersistenceError,
  CheckpointNotFound,
  AlreadyResumed,
  CheckpointClaimed,
  CheckpointInvalid
)

/**
 * @since 0.1.0
 * @category errors
 */
export type ToolGateError = typeof ToolGateError.Type

/**
 * Whether `u` is one of tool-gate's errors (an instance of one of the classes above).
 *
 * @since 0.1.0
 * @category guards
 */
export const isToolGateError: (u: unknown) => u is ToolGateError = Schema.is(ToolGateError)
