/**
 * A request whose body cannot be read (a malformed chunked `Transfer-Encoding`) is rejected
 * before any handler acts on it: a revoke or a clear sent that way changes nothing. Sent over a
 * raw socket, since `fetch` only writes well-formed chunks.
 */
import { ToolCall } from "@tool-gate/core"
import { expect } from "bun:test"
import { Effect } from "effect"
import { connect } from "node:net"
import { describe, it } from "../support/effectTest.js"
import { startServer, tokens } from "./support/server.js"

/** Writes `head` and `body` as they are and returns what the server wrote before closing. */
const raw = (url: string, head: string, body: string) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(url)
      const socket = connect(Number(port), hostname, () => socket.end(`${head}\r\n\r\n${body}`))
      let answer = ""
      socket.setEncoding("latin1")
      socket.on("data", (data: string) => answer += data)
      socket.on("close", () => resolve(answer))
      socket.on("error", reject)
    })
  )

const malformed = (method: string, path: string, host: string) =>
  [
    `${method} ${path} HTTP/1.1`,
    `Host: ${host}`,
    `Authorization: Bearer ${tokens.approver}`,
    "Content-Type: application/json",
    "Transfer-Encoding: chunked",
    "Connection: close"
  ].join("\r\n")

// "zz" is no chunk size
const badChunks = "zz\r\n{}\r\n0\r\n\r\n"

describe("a body that cannot be read changes nothing", () => {
  for (
    const [method, path] of [
      ["DELETE", (id: string) => `/sessions/s1/approvals/${id}`],
      ["DELETE", () => "/sessions/s1/approvals"],
      ["POST", () => "/sessions/s1/clear"]
    ] as const
  ) {
    it.live(`${method} ${path(":id")} with a malformed chunked body`, () =>
      Effect.gen(function*() {
        const server = yield* startServer()
        yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
        const [grant] = yield* server.gate.sessionApprovals(ToolCall.SessionKey.make("s1"))
        const answer = yield* raw(server.url, malformed(method, path(grant!.id), new URL(server.url).host), badChunks)
        expect(answer).toStartWith("HTTP/1.1 400")
        expect((yield* server.gate.sessionApprovals(ToolCall.SessionKey.make("s1"))).map((approval) => approval.id))
          .toEqual([grant!.id])
      }))
  }
})
