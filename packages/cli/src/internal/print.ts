/** What the commands print, as text lines or as JSON encoded by the domain schemas. */
import { Console, Effect, Schema } from "effect"
import * as Terminal from "./terminal.js"

/** Prints each line with its own `Console.log`: the boundary escapes any line break inside one. */
export const printLines = (lines: ReadonlyArray<string>) =>
  Effect.forEach(lines, (line) => Console.log(line), { discard: true })

/** Prints `value` as JSON encoded by `schema`, or as lines of text. */
export const print = <A, I>(
  asJson: boolean,
  schema: Schema.Schema<A, I>,
  value: A,
  text: () => string | ReadonlyArray<string>
) => asJson ? printLines(Terminal.json(Schema.encodeSync(schema)(value)).split("\n")) : printLines([text()].flat())
