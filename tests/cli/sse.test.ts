/**
 * The CLI's Server-Sent Events reader follows the HTML standard's parsing: multi-line `data:`,
 * comments, `id:` and `retry:` lines, `event:` types, CRLF, CR and LF line ends (a CRLF split
 * across chunks too), a byte order mark, a field without a colon, an unfinished event at the end.
 * First the parser on every split of a stream into chunks, then `toolgate audit --follow` in its
 * own process against a loopback server that writes such a stream.
 */
import { AuditEvent } from "@tool-gate/core"
import { afterEach, describe, expect, test } from "bun:test"
import { Chunk, Effect, Either, Stream } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { sseEvents } from "../../packages/cli/src/internal/audit.js"
import * as Sse from "../../packages/cli/src/internal/sse.js"
import { start } from "./support/cli.js"

/** Every event `text` gives when fed in the chunks `cuts` make. */
const parse = (text: string, cuts: ReadonlyArray<number> = []) => {
  const parser = Sse.make()
  const events: Array<Sse.Event> = []
  let from = 0
  for (const cut of [...cuts, text.length]) {
    events.push(...Either.getOrThrow(parser.feed(text.slice(from, cut))))
    from = cut
  }
  return { events, retryMs: parser.retryMs() }
}

/** A stream in the standard's own terms, with every kind of line it names. */
const sample = [
  "\uFEFF: a comment, then an event whose data spans lines\r\n",
  "data: first\r\n",
  "data:second, no space\r\n",
  "data:  third keeps one of two spaces\r\n",
  "\r\n",
  "retry: 2500\n",
  "retry: 1.5\n",
  "id: 7\n",
  "event: ping\n",
  "data: typed\n",
  "\n",
  "id: bad\u0000id\r",
  "data\r",
  "\r",
  ": only comments and ids dispatch nothing\n",
  "id: 9\n",
  "\n",
  "unknown: field\n",
  "data: last\n",
  "\n",
  "data: unfinished at the end"
].join("")

const expected = [
  { type: "message", data: "first\nsecond, no space\n third keeps one of two spaces", lastEventId: "" },
  { type: "ping", data: "typed", lastEventId: "7" },
  // `data` alone is a field with an empty value; the id with U+0000 is ignored
  { type: "message", data: "", lastEventId: "7" },
  { type: "message", data: "last", lastEventId: "9" }
]

describe("the SSE parser", () => {
  test("the standard's lines, fed at once", () => {
    expect(parse(sample)).toEqual({ events: expected, retryMs: 2500 })
  })

  test("the same events for every split into two and three chunks (a CRLF split between chunks is one line end)", () => {
    for (let i = 0; i <= sample.length; i++) {
      expect({ i, ...parse(sample, [i]) }).toEqual({ i, events: expected, retryMs: 2500 })
      const j = Math.min(sample.length, i + 1 + (i * 7) % 13)
      expect({ i, j, ...parse(sample, [i, j]) }).toEqual({ i, j, events: expected, retryMs: 2500 })
    }
    const oneByOne = Array.from({ length: sample.length }, (_, i) => i)
    expect(parse(sample, oneByOne)).toEqual({ events: expected, retryMs: 2500 })
  })

  test("CR, LF and CRLF each end a line; CR CR is two", () => {
    expect(parse("data: a\r\rdata: b\n\ndata: c\r\n\r\n").events.map((e) => e.data)).toEqual(["a", "b", "c"])
    // a CR at the end of a chunk and an LF opening the next: one line end, not an empty line
    expect(parse("data: a\rdata: b\r\n\r\n", [8]).events.map((e) => e.data)).toEqual(["a\nb"])
    expect(parse("data: a\r", []).events).toEqual([])
    // only the stream's first character is dropped as a byte order mark: later, it is part of a field name
    expect(parse("\uFEFFdata: a\n\n\uFEFFdata: b\n\n").events.map((e) => e.data)).toEqual(["a"])
  })

  test("a line or an event past the limit fails the stream, rather than growing without end", () => {
    const at = (limit: number, text: string) => Either.isLeft(Sse.make(limit).feed(text))
    expect(at(10, "data: 12345")).toBe(true)
    expect(at(11, "data: 12345")).toBe(false)
    // the data of one event, over many lines
    expect(at(10, "data: 123\ndata: 456\ndata: 789\n")).toBe(true)
    expect(at(12, "data: 123\ndata: 456\ndata: 789\n")).toBe(false)
    // a dispatched event's data no longer counts
    expect(at(10, "data: 1234\n\ndata: 5678\n\n")).toBe(false)
  })

  test("audit events whose JSON is written over several data lines decode (the reader joins them with LF)", async () => {
    const event = {
      ...AuditEvent.toJson({
        seq: 3,
        at: 1,
        type: "approvals.cleared",
        outcome: "cleared",
        sessionKey: "s1"
      } as AuditEvent.AuditEvent)
    }
    const pretty = JSON.stringify(event, null, 2).split("\n").map((line) => `data: ${line}`).join("\r\n")
    const text = `retry: 100\r\n: hi\r\nid: 3\r\n${pretty}\r\n\r\n`
    const chunks = Array.from(new TextEncoder().encode(text)).map((byte) => new Uint8Array([byte]))
    const retries: Array<number> = []
    const decoded = await Effect.runPromise(
      Stream.runCollect(sseEvents(Stream.fromIterable(chunks), (ms) => retries.push(ms)))
    )
    expect(Chunk.toArray(decoded) as Array<unknown>).toEqual([{
      seq: 3,
      at: 1,
      type: "approvals.cleared",
      outcome: "cleared",
      sessionKey: "s1"
    }])
    expect(retries.at(-1)).toBe(100)
  })
})

describe("toolgate audit --follow against a server writing the standard's stream", () => {
  let server: Server | undefined
  afterEach(() => server?.close())

  test("multi-line events, comments, ids, retry hints and CRLF, in small writes: each event printed once", async () => {
    const events = [1, 2, 3].map((seq) =>
      AuditEvent.toJson(
        {
          seq,
          at: 1_795_511_611_000 + seq,
          type: "decision",
          outcome: "allow",
          sessionKey: "s1",
          toolCallId: `c${seq}`,
          toolName: "ls",
          policyVersion: "v1",
          via: "default",
          args: `{"line":"one\\ntwo","n":${seq}}`
        } as AuditEvent.AuditEvent
      )
    )
    const body = [
      ": hello\r\n",
      "retry: 1000\r\n\r\n",
      ...events.map((event, i) =>
        `id: ${event.seq}\r\n` +
        (i === 1 ? ": a comment between data lines\r\n" : "") +
        JSON.stringify(event, null, 2).split("\n").map((line) => `data:${line}`).join(i === 2 ? "\r" : "\r\n") +
        (i === 2 ? "\r\r" : "\r\n\r\n")
      ),
      "event: other\ndata: {\"not\": \"an audit event\"}\n\n"
    ].join("")
    const bytes = new TextEncoder().encode(body)
    let path = ""
    server = createServer((request, response) => {
      path = request.url ?? ""
      response.writeHead(200, { "content-type": "text/event-stream" })
      let at = 0
      const write = () => {
        if (at >= bytes.length) return
        response.write(bytes.subarray(at, at + 7))
        at += 7
        setImmediate(write)
      }
      write()
    })
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as AddressInfo
    const follower = start([
      "audit",
      "--follow",
      "--json",
      "--server",
      `http://127.0.0.1:${port}`,
      "--token",
      "any-token-0123456789",
      "--tool",
      "ls"
    ])
    try {
      await follower.line(/"toolCallId":"c3"/)
      expect(follower.lines.map((line) => JSON.parse(line))).toEqual(events)
      expect(path).toBe("/audit/stream?toolName=ls")
    } finally {
      expect(await follower.stop()).toBe(0)
    }
  })
})
