/**
 * A TCP proxy on loopback in front of a server. `forget` ends every flow it carries on the server's
 * side and leaves the client's side open until the client next sends, then closes it: as a load
 * balancer or a NAT that forgot an idle flow answers the next packet. A client (a connection pool)
 * learns that such a connection is gone only when it uses it.
 */
import { Effect, type Scope } from "effect"
import { createConnection, createServer, type Socket } from "node:net"

export interface TcpProxy {
  /** `url` with its host and port replaced by the proxy's. */
  readonly url: (url: string) => string
  /** Forgets every flow carried now; gives how many. */
  readonly forget: Effect.Effect<number>
  /** Stops taking connections (each is refused); the flows it carries go on. */
  readonly refuse: Effect.Effect<void>
  /**
   * The next bytes a client sends that hold `marker` reach the server, but its answer does not
   * reach the client: that flow ends on both sides when the answer comes, as a connection lost after
   * the server took a statement (a `COMMIT` that took effect, its answer lost).
   */
  readonly loseAnswerTo: (marker: string) => Effect.Effect<void>
  /** Answers lost so far (`loseAnswerTo`). */
  readonly answersLost: () => number
  /**
   * The next bytes a client sends that hold `marker` never reach the server: that flow ends on
   * both sides instead, as a connection lost before the server took a statement.
   */
  readonly dropRequestTo: (marker: string) => Effect.Effect<void>
  /** Requests dropped so far (`dropRequestTo`). */
  readonly requestsDropped: () => number
}

interface Flow {
  readonly client: Socket
  readonly server: Socket
  forgotten: boolean
  answerLost: boolean
}

/** A proxy to the server of `serverUrl` (its host and port), closed with every flow when the scope closes. */
export const tcpProxy = (serverUrl: string): Effect.Effect<TcpProxy, never, Scope.Scope> =>
  Effect.gen(function*() {
    const server = new URL(serverUrl)
    const [host, port] = [server.hostname, Number(server.port)]
    const flows = new Set<Flow>()
    let losing: string | undefined
    let answersLost = 0
    let dropping: string | undefined
    let requestsDropped = 0
    const listener = createServer((client) => {
      const flow: Flow = { client, server: createConnection({ host, port }), forgotten: false, answerLost: false }
      flows.add(flow)
      client.on("data", (chunk) => {
        if (flow.forgotten) return client.destroy()
        if (dropping !== undefined && chunk.includes(dropping)) {
          dropping = undefined
          requestsDropped++
          client.destroy()
          return flow.server.destroy()
        }
        if (losing !== undefined && chunk.includes(losing)) {
          losing = undefined
          flow.answerLost = true
        }
        flow.server.write(chunk)
      })
      flow.server.on("data", (chunk) => {
        if (!flow.answerLost) return client.write(chunk)
        if (!client.destroyed) answersLost++
        client.destroy()
        flow.server.destroy()
      })
      flow.server.on("close", () => flow.forgotten || client.destroy())
      client.on("close", () => {
        flow.server.destroy()
        flows.delete(flow)
      })
      client.on("error", () => {})
      flow.server.on("error", () => {})
    })
    const listening = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        listener.listen(0, "127.0.0.1", () => {
          const address = listener.address()
          resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          for (const flow of flows) flow.client.destroy()
          if (listener.listening) listener.close(() => resume(Effect.void))
          else resume(Effect.void)
        })
    )
    return {
      url: (url) => {
        const proxied = new URL(url)
        proxied.hostname = "127.0.0.1"
        proxied.port = String(listening)
        return proxied.toString()
      },
      forget: Effect.sync(() => {
        let forgotten = 0
        for (const flow of flows) {
          if (flow.forgotten) continue
          flow.forgotten = true
          flow.server.destroy()
          forgotten++
        }
        return forgotten
      }),
      refuse: Effect.sync(() => {
        listener.close()
      }),
      loseAnswerTo: (marker) =>
        Effect.sync(() => {
          losing = marker
        }),
      answersLost: () => answersLost,
      dropRequestTo: (marker) =>
        Effect.sync(() => {
          dropping = marker
        }),
      requestsDropped: () => requestsDropped
    }
  })
