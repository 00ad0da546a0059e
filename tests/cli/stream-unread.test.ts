/**
 * `toolgate serve` (Node's HTTP server, the published bundle) and an audit stream client that
 * stops reading: the server holds at most a few megabytes unread for it, then cuts it off; the
 * client, resumed with Last-Event-ID, misses nothing. Events are written by a gate in this
 * process on the same SQLite file, and reach the server's stream live.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { connect, type Socket } from "node:net"
import { type Fixture, fixture, run, type Running, serve } from "./support/cli.js"

const auditorToken = "auditor-token-0123456789"

let f: Fixture
let server: Running
let port: number

beforeAll(async () => {
  f = await fixture()
  let url: string
  ;({ server, url } = await serve(f, [{ token: auditorToken, name: "audit-bot", role: "auditor" }]))
  port = Number(new URL(url).port)
}, 60_000)

afterAll(async () => {
  expect(await server.stop()).toBe(0)
  await f.close()
})

/** A raw connection asking for the stream; its bytes as they arrive, and whether it has closed. */
const openRaw = (lastEventId: number) => {
  const socket: Socket = connect(port, "127.0.0.1")
  const received: Array<Buffer> = []
  let closed = false
  const close = new Promise<void>((resolve) =>
    socket.once("close", () => {
      closed = true
      resolve()
    })
  )
  socket.on("data", (chunk: Buffer) => received.push(chunk))
  socket.write(
    `GET /audit/stream HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n` +
      `authorization: Bearer ${auditorToken}\r\nlast-event-id: ${lastEventId}\r\n\r\n`
  )
  const ids = () =>
    [...Buffer.concat(received).toString("utf8").matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]))
  return { socket, received, ids, close, closed: () => closed }
}

const until = async (check: () => boolean, ms: number) => {
  for (const deadline = Date.now() + ms; !check();) {
    if (Date.now() > deadline) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

test("a stream client that stops reading is cut off with megabytes unread; resumed, it misses nothing", async () => {
  // the log's first event: the stream starts after it
  await run(f.gate.evaluate({ id: "first", name: "ls", sessionKey: "s1" }))
  const head = 1
  const stalled = openRaw(head)
  await until(() => stalled.received.length > 0, 10_000)
  stalled.socket.pause()
  // about 18 MB of events, far past what the server holds for one client (and the sockets' buffers)
  const blob = "x".repeat(30_000)
  for (let i = 0; i < 600; i++) {
    await run(f.gate.evaluate({ id: `big-${i}`, name: "ls", sessionKey: "s1", args: { blob } }))
  }
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  // reading again: what was sent before the cut, then the end
  stalled.socket.resume()
  await Promise.race([stalled.close, until(() => false, 15_000)])
  const got = stalled.ids()
  expect(got.length).toBeLessThan(600)
  expect(got).toEqual(Array.from({ length: got.length }, (_, i) => head + 1 + i))

  const resumed = openRaw(got.at(-1) ?? head)
  try {
    await until(() => resumed.ids().length >= 600 - got.length, 15_000)
    expect(resumed.ids()).toEqual(Array.from({ length: 600 - got.length }, (_, i) => head + 1 + got.length + i))
  } finally {
    resumed.socket.destroy()
  }
}, 60_000)
