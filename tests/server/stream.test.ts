/**
 * The audit stream (Server-Sent Events) against a real server: replay, disconnect, resume with
 * Last-Event-ID, live events; no gap and no duplicate across reconnects; the log's head as the
 * point to resume from.
 */
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { Effect, Schedule } from "effect"
import { connect } from "node:net"
import { describe, it } from "../support/effectTest.js"
import { authorization, startServer, type TestServer } from "./support/server.js"
import { openStream } from "./support/sse.js"

/** `count` allowed decisions in `sessionKey`: one audit event each. */
const decisions = (server: TestServer, from: number, count: number, sessionKey = "s1") =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => from + i),
    (i) => server.gate.evaluate({ id: `call-${i}`, name: "ls", sessionKey }),
    { discard: true }
  )

describe("audit stream (SSE)", () => {
  it.live("a replay of events from before the server started and after: each once, in order", () =>
    Effect.gen(function*() {
      const earlier = yield* startServer()
      yield* decisions(earlier, 1, 3)
      const server = yield* startServer({ filename: earlier.filename })
      yield* decisions(server, 4, 3)
      // from the start, from within the earlier events, from the last of them, from within the later
      const resumes = [0, 2, 3, 5, 6]
      for (const [i, from] of resumes.entries()) {
        const stream = yield* openStream(server, { token: "auditor", lastEventId: String(from) })
        const replayed = Array.from({ length: 6 + i - from }, (_, k) => String(from + 1 + k))
        expect((yield* stream.take(replayed.length)).map((e) => e.id)).toEqual(replayed)
        // then live: the log has 6 events, and one more per stream before this one
        yield* decisions(server, 100 + i, 1)
        expect((yield* stream.take(1)).map((e) => e.id)).toEqual([String(7 + i)])
        stream.close()
      }
    }))

  it.live("read, disconnect, resume with Last-Event-ID: exactly the rest, then live events", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* decisions(server, 1, 6)

      const first = yield* openStream(server, { query: "?afterSeq=0", token: "auditor" })
      expect(first.status).toBe(200)
      expect(first.contentType).toContain("text/event-stream")
      const seen = yield* first.take(4)
      expect(seen.map((e) => e.id)).toEqual(["1", "2", "3", "4"])
      first.close()

      // while nobody listens
      yield* decisions(server, 7, 2)

      // an EventSource reconnects to the same URL and adds the last id it saw: the header wins
      const second = yield* openStream(server, { query: "?afterSeq=0", lastEventId: "4", token: "auditor" })
      const rest = yield* second.take(4)
      expect(rest.map((e) => e.id)).toEqual(["5", "6", "7", "8"])

      yield* decisions(server, 9, 2)
      const live = yield* second.take(2)
      expect(live.map((e) => e.id)).toEqual(["9", "10"])

      // every event once, in order, exactly as the store holds it
      const stored = yield* server.store.events()
      expect([...seen, ...rest, ...live].map((e) => e.data)).toEqual([...stored])
      for (const e of [...seen, ...rest, ...live]) expect(e.id).toBe(String(e.data.seq))
    }))

  it.live("?afterSeq starts after a sequence number; filters narrow the stream", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* decisions(server, 1, 3, "s1")
      yield* decisions(server, 4, 3, "s2")
      yield* server.gate.evaluate({ id: "x", name: "rm", sessionKey: "s1" })

      const after = yield* openStream(server, { query: "?afterSeq=5" })
      expect((yield* after.take(2)).map((e) => e.id)).toEqual(["6", "7"])

      const s1Denials = yield* openStream(server, { query: "?sessionKey=s1&outcome=deny" })
      const [denied] = yield* s1Denials.take(1)
      expect(denied!.data).toMatchObject({ seq: 7, outcome: "deny", toolName: "rm", sessionKey: "s1" })
      yield* server.gate.evaluate({ id: "y", name: "rm", sessionKey: "s2" })
      yield* server.gate.evaluate({ id: "z", name: "rm", sessionKey: "s1" })
      const [next] = yield* s1Denials.take(1)
      expect(next!.data).toMatchObject({ seq: 9, toolCallId: "z" })
    }))

  it.live("/audit/head is the last seq, for any token; the stream resumed from it starts with the next event", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const head = (token: "approver" | "auditor" | "teamA") =>
        Effect.map(server.request("GET", "/audit/head", { token }), (reply) => reply.json)
      expect(yield* head("auditor")).toEqual({ lastSeq: 0 })
      yield* decisions(server, 1, 4, "team-b-1")
      // a token limited to team-a-* sees none of these events, and still the same number
      for (const token of ["approver", "auditor", "teamA"] as const) expect(yield* head(token)).toEqual({ lastSeq: 4 })

      const { lastSeq } = yield* head("teamA")
      const stream = yield* openStream(server, { lastEventId: String(lastSeq), token: "teamA" })
      yield* server.gate.evaluate({ id: "after", name: "ls", sessionKey: "team-a-1" })
      const [next] = yield* stream.take(1)
      expect(next!.data).toMatchObject({ seq: 5, toolCallId: "after" })
      expect((yield* server.request("GET", "/audit/head", { token: null })).status).toBe(401)
    }))

  it.live("many reconnects at arbitrary points while events keep coming: no gap, no duplicate", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const received: Array<number> = []
      let lastId: string | undefined
      for (let round = 0; round < 5; round++) {
        yield* decisions(server, round * 10, 7)
        const connection = yield* openStream(server, lastId === undefined ? {} : { lastEventId: lastId })
        const events = yield* connection.take(3 + round)
        received.push(...events.map((e) => e.data.seq))
        lastId = events[events.length - 1]!.id
        connection.close()
      }
      const connection = yield* openStream(server, { lastEventId: lastId! })
      const total = yield* server.store.lastSeq
      const tail = yield* connection.take(total - received.length)
      received.push(...tail.map((e) => e.data.seq))
      expect(received).toEqual(Array.from({ length: total }, (_, i) => i + 1))
    }))

  it.live("clients in step share a batch's bytes, a client whose token sees less gets only its events", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* server.gate.evaluate({ id: "template", name: "ls", sessionKey: "team-b-1" })
      const [template] = yield* server.store.events()
      const { seq: _, ...decision } = template!
      const all = yield* openStream(server, { token: "approver", query: "?afterSeq=1" })
      const again = yield* openStream(server, { token: "auditor", query: "?afterSeq=1" })
      const teamA = yield* openStream(server, { token: "teamA", query: "?afterSeq=1" })
      // Appended at once, so published at once: chunks of many events, where a chunk of every
      // event and one of team A's alone begin with the same event and differ after it.
      yield* server.store.append(Array.from({ length: 40 }, (_, i) => ({
        ...decision,
        toolCallId: `c${i}`,
        sessionKey: i % 2 === 0 ? "team-a-1" : "team-b-1"
      } as typeof decision)))
      const stored = (yield* server.store.events()).slice(1)
      const [seenAll, seenAgain, seenTeamA] = yield* Effect.all([all.take(40), again.take(40), teamA.take(20)])
      expect(seenAll!.map((e) => e.data)).toEqual([...stored])
      expect(seenAgain!.map((e) => e.data)).toEqual([...stored])
      expect(seenTeamA!.map((e) => e.data)).toEqual(stored.filter((e) => e.sessionKey === "team-a-1"))
    }))

  it.live("a stream whose replay cannot be read ends; resumed once the log is back, it misses nothing", () =>
    Effect.gen(function*() {
      // events from before the server started: a replay of them reads the store (a server keeps
      // only the live events it saw)
      const earlier = yield* startServer()
      yield* decisions(earlier, 1, 3)
      const server = yield* startServer({ filename: earlier.filename })
      // Another connection takes the event log away, so the replay's read really fails.
      const other = new Database(server.filename)
      other.run("ALTER TABLE toolgate_events RENAME TO toolgate_events_away")
      const ended = yield* Effect.promise(() =>
        fetch(`${server.url}/audit/stream?afterSeq=0`, { headers: authorization("auditor") }).then(
          (response) => response.text().catch(() => ""),
          () => ""
        )
      ).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => "the stream did not end" }), Effect.orDie)
      expect(ended).not.toContain("id:")
      other.run("ALTER TABLE toolgate_events_away RENAME TO toolgate_events")
      other.close()
      const resumed = yield* openStream(server, { token: "auditor", lastEventId: "1" })
      expect((yield* resumed.take(2)).map((e) => e.id)).toEqual(["2", "3"])
      yield* decisions(server, 4, 1)
      expect((yield* resumed.take(1)).map((e) => e.id)).toEqual(["4"])
    }))

  it.live("a replay read slowly arrives whole and in order (each page waits for the client to take the last)", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      yield* decisions(server, 1, 3_000)
      const { port } = new URL(server.url)
      const socket = connect(Number(port), "127.0.0.1")
      yield* Effect.addFinalizer(() => Effect.sync(() => socket.destroy()))
      let text = ""
      socket.setEncoding("utf8")
      socket.on("data", (chunk: string) => {
        text += chunk
        // a slow reader: a pause after every chunk
        socket.pause()
        setTimeout(() => socket.resume(), 2)
      })
      socket.write(
        `GET /audit/stream?afterSeq=0 HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n` +
          `authorization: ${authorization("auditor").authorization}\r\n\r\n`
      )
      const ids = () => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))
      yield* Effect.retry(
        Effect.filterOrFail(Effect.sync(() => ids().length), (n) => n >= 3_000),
        Schedule.spaced("20 millis").pipe(Schedule.upTo("20 seconds"))
      )
      expect(ids()).toEqual(Array.from({ length: 3_000 }, (_, i) => i + 1))
    }).pipe(Effect.scoped))
})
