/**
 * The CLI's own errors: a server that cannot be used, a redirect it will not follow, an input it
 * refuses, and a command that ends with a code of its own.
 */
import { Schema } from "effect"

/**
 * The server could not be reached, or answered something the API does not define.
 *
 * @since 0.1.0
 * @category errors
 */
export class ServerUnavailable extends Schema.TaggedError<ServerUnavailable>()("ServerUnavailable", {
  url: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `Server ${this.url}: ${this.detail}`
  }
}

/**
 * The server answered with a redirect (3xx). The CLI follows none: another host's answer would be
 * shown as the server's ("no pending approvals"), and an answer sent there would not reach the
 * server. So the command stops here, says where the redirect leads, and sends nothing further.
 *
 * @since 0.1.0
 * @category errors
 */
export class ServerRedirected extends Schema.TaggedError<ServerRedirected>()("ServerRedirected", {
  url: Schema.String,
  method: Schema.String,
  path: Schema.String,
  status: Schema.Number,
  location: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const to = this.location === undefined ? "with no location" : `to ${this.location}`
    return `Server ${this.url}: answered ${this.method} ${this.path} with a redirect (${this.status}) ${to};`
      + " toolgate follows no redirect: give --server the URL that answers itself"
  }
}

/**
 * `serve` could not listen on its address: `code` is the system's (`EADDRINUSE`, `EACCES`,
 * `EADDRNOTAVAIL`, ...), `detail` what it means for whoever runs the command.
 *
 * @since 0.1.0
 * @category errors
 */
export class CannotListen extends Schema.TaggedError<CannotListen>()("CannotListen", {
  address: Schema.String,
  code: Schema.optional(Schema.String),
  detail: Schema.String
}) {
  override get message(): string {
    return `cannot listen on ${this.address}: ${this.detail}${this.code === undefined ? "" : ` (${this.code})`}`
  }
}

/**
 * An input the command or the server refused before acting on it.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", { message: Schema.String }) {}

/**
 * Ends the command with `code` after the command itself reported why (a failed policy check,
 * the demo's own exit code).
 *
 * @since 0.1.0
 * @category errors
 */
export class Failed extends Schema.TaggedError<Failed>()("Failed", { code: Schema.Number }) {}
