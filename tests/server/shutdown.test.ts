/**
 * Releasing the server's layer must not wait on clients: an event stream never ends by itself,
 * and Node's graceful close waits for every connection.
 */
import { expect } from "bun:test"
import { Effect, Exit, Scope } from "effect"
import { describe, it } from "../support/effectTest.js"
import { authorization, bash, paused, startServer } from "./support/server.js"

describe("server shutdown", () => {
  it.live("releasing the server cuts open event streams instead of waiting for them", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const server = yield* Scope.extend(startServer(), scope)
      yield* paused(server.gate, bash("s1", "c1"))
      // a client that never disconnects on its own
      const response = yield* Effect.promise(() =>
        fetch(`${server.url}/audit/stream`, { headers: { accept: "text/event-stream", ...authorization("approver") } })
      )
      const reader = response.body!.getReader()
      const first = yield* Effect.promise(() => reader.read())
      expect(new TextDecoder().decode(first.value)).toContain("approval.requested")

      yield* Scope.close(scope, Exit.void)

      // the stream was cut (ended or errored), and nothing listens on the port any more
      const rest = yield* Effect.promise(async () => {
        try {
          while (!(await reader.read()).done) { /* drain what was sent before the cut */ }
          return "ended"
        } catch {
          return "cut"
        }
      })
      expect(["ended", "cut"]).toContain(rest)
      const after = yield* Effect.promise(() => fetch(`${server.url}/health`).then(() => "answered", () => "refused"))
      expect(after).toBe("refused")
    }))
})
