/**
 * A place on Node's HTTP server for a listener that sees each request before the platform's:
 * the listener answers the request itself (and says so) or leaves it to the platform, which then
 * gets it as if nothing had looked. The platform's per-request work (its request object, the
 * request's fiber context, the app's middleware and error handling, the response's own fiber
 * steps) is about 0.13 ms of main thread per request on Bun, against 0.06 ms for all of Node's
 * own; the answers and pending lists of a busy server are most of its requests.
 */
import { Context, Effect, type Scope } from "effect"
import type { IncomingMessage, Server, ServerResponse } from "node:http"

/** Answers the request and returns true, or returns false having touched nothing. */
export type Listener = (request: IncomingMessage, response: ServerResponse) => boolean

export class NodeFastPath extends Context.Tag("@tool-gate/server/internal/NodeFastPath")<NodeFastPath, {
  /** Puts the listener in place for the scope (one at a time: a later one replaces it). */
  readonly install: (listener: Listener) => Effect.Effect<void, never, Scope.Scope>
  /** whether a listener is in place */
  readonly installed: () => boolean
}>() {}

// Requests held while no handler is in place, at most (past that, answered 503).
const maxEarly = 1_024

/**
 * The fast path of `server`: its `request` events go to the installed listener first. The
 * platform's server listens (its layer is built) before the app's handler is in place: a request
 * arriving in between would be dropped unanswered, its client waiting forever (an event stream
 * reconnecting to a restarting server). Such requests wait here until a handler is in place.
 */
export const attach = (server: Server): NodeFastPath["Type"] => {
  let current: Listener | undefined
  const early: Array<readonly [IncomingMessage, ServerResponse]> = []
  const emit = server.emit
  server.emit = function(this: Server, event: string | symbol, ...args: Array<unknown>): boolean {
    if (event === "request") {
      const [request, response] = args as [IncomingMessage, ServerResponse]
      if (current !== undefined && current(request, response)) return true
      if (server.listenerCount("request") === 0) {
        if (early.length < maxEarly) early.push([request, response])
        else response.writeHead(503, { "retry-after": "1" }).end()
        return true
      }
    }
    return emit.apply(this, [event, ...args] as Parameters<Server["emit"]>)
  } as Server["emit"]
  server.on("newListener", (event) => {
    // after the listener is added (`newListener` comes before)
    if (event === "request" && early.length > 0) {
      setImmediate(() => {
        for (const [request, response] of early.splice(0)) server.emit("request", request, response)
      })
    }
  })
  return NodeFastPath.of({
    install: (listener) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          current = listener
        }),
        () =>
          Effect.sync(() => {
            if (current === listener) current = undefined
          })
      ),
    installed: () => current !== undefined
  })
}
