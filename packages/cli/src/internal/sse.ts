/**
 * Server-Sent Events, parsed as the HTML standard says (section 9.2.6, "Interpreting an event
 * stream"): lines end with CRLF, LF or CR (a CRLF split between two chunks is one line end), a
 * leading byte order mark is dropped, `:` starts a comment, one space after the field's colon is
 * dropped, `data:` lines join with LF, `id:` sets the last event id (not with U+0000 in it),
 * `retry:` with ASCII digits sets the reconnection time, a blank line dispatches the event (none
 * when no `data:` came), and an event left unfinished when the stream ends is dropped. A line or
 * an event longer than `maxChars` fails the stream rather than growing without end.
 */
import { Data, Either } from "effect"

/** A line or an event over the parser's limit. */
export class EventTooLarge extends Data.TaggedError("EventTooLarge")<{ readonly maxChars: number }> {
  override get message() {
    return `an event longer than ${this.maxChars} characters`
  }
}

/** A dispatched event. */
export interface Event {
  /** `event:`, or `message` */
  readonly type: string
  readonly data: string
  /** the last event id at dispatch (it carries over to later events, as the standard says) */
  readonly lastEventId: string
}

/** A parser for one stream: `feed` takes decoded text chunk by chunk. */
export interface Parser {
  readonly feed: (text: string) => Either.Either<ReadonlyArray<Event>, EventTooLarge>
  /** the last `retry:` hint in milliseconds, if the stream gave one */
  readonly retryMs: () => number | undefined
}

const digits = /^[0-9]+$/

/**
 * A new parser, for the start of a stream. `maxChars` bounds a line and an event's data (64 Mi
 * characters by default, far above what the server writes: its arguments are at most 1 MB).
 */
export const make = (maxChars = 64 * 1024 * 1024): Parser => {
  let started = false
  // the previous chunk ended with CR: an LF opening this one ends no other line
  let afterCr = false
  let pending = ""
  let data = ""
  let type = ""
  let lastEventId = ""
  let retryMs: number | undefined

  const line = (text: string, out: Array<Event>) => {
    if (text === "") {
      if (data !== "") out.push({ type: type === "" ? "message" : type, data: data.slice(0, -1), lastEventId })
      data = ""
      type = ""
      return
    }
    if (text.charCodeAt(0) === 0x3a) return
    const colon = text.indexOf(":")
    const field = colon < 0 ? text : text.slice(0, colon)
    const value = colon < 0 ? "" : text.slice(text.charCodeAt(colon + 1) === 0x20 ? colon + 2 : colon + 1)
    switch (field) {
      case "data":
        data += value + "\n"
        break
      case "event":
        type = value
        break
      case "id":
        if (!value.includes("\u0000")) lastEventId = value
        break
      case "retry":
        if (digits.test(value)) retryMs = Number(value)
        break
    }
  }

  const feed = (chunk: string): Either.Either<ReadonlyArray<Event>, EventTooLarge> => {
    let text = chunk
    if (text === "") return Either.right([])
    if (!started) {
      started = true
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    if (afterCr && text.charCodeAt(0) === 0x0a) text = text.slice(1)
    afterCr = false
    const out: Array<Event> = []
    let start = 0
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c !== 0x0a && c !== 0x0d) continue
      line(pending + text.slice(start, i), out)
      pending = ""
      if (c === 0x0d) {
        if (i + 1 === text.length) afterCr = true
        else if (text.charCodeAt(i + 1) === 0x0a) i++
      }
      start = i + 1
    }
    pending += text.slice(start)
    return pending.length + data.length > maxChars ? Either.left(new EventTooLarge({ maxChars })) : Either.right(out)
  }

  return { feed, retryMs: () => retryMs }
}
