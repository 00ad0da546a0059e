/**
 * Watching a policy file: its text is read at the start, again on every change the platform
 * reports in its directory (editors often replace a file by renaming another over it, which a
 * watch on the file itself loses) and on a slow poll behind the watch, in case an event is dropped.
 * A changed text is read again until two reads a moment apart agree, so a file caught halfway
 * through being written (whose first half may well be a valid, looser policy) is not taken for
 * the new version. Each new text is parsed; the same text read twice gives nothing.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Clock, type Duration, Effect, Either, Stream } from "effect"

// String work rather than node:path: the core runs wherever Effect does.
const separator = (path: string) => Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"))
const basename = (path: string) => path.slice(separator(path) + 1)
const dirname = (path: string) => {
  const at = separator(path)
  return at < 0 ? "." : at === 0 ? path.slice(0, 1) : path.slice(0, at)
}

const same = (a: string, b: string) => a === b
const sameRead = Either.getEquivalence({ left: same, right: same })

/** Wall-clock time, so that a poll keeps its pace under a test's `TestClock`. */
const wallClock = Clock.make()

/**
 * The file's text each time it changes (the first read included): `Right` the text, `Left` why it
 * could not be read.
 */
export const texts = (
  path: string,
  interval: Duration.DurationInput,
  /** how long a changed file must stay as read before it counts as saved */
  settle: Duration.DurationInput
): Stream.Stream<Either.Either<string, string>, never, FileSystem.FileSystem> =>
  Stream.unwrap(Effect.map(FileSystem.FileSystem, (fs) => {
    const name = basename(path)
    // a watch that cannot be set up (or ends) leaves the poll
    const watched = fs.watch(dirname(path)).pipe(
      Stream.filter((event) => basename(event.path) === name),
      Stream.catchAll(() => Stream.empty)
    )
    const polled = Stream.repeatEffect(Effect.withClock(Effect.sleep(interval), wallClock))
    const read: Effect.Effect<Either.Either<string, string>> = fs.readFileString(path).pipe(
      Effect.map((text) => Either.right(text)),
      Effect.catchAll((error) => Effect.succeed(Either.left(error.message)))
    )
    const settled = (first: Either.Either<string, string>): Effect.Effect<Either.Either<string, string>> =>
      Effect.withClock(Effect.sleep(settle), wallClock).pipe(
        Effect.zipRight(read),
        Effect.flatMap((again) => sameRead(first, again) ? Effect.succeed(again) : settled(again))
      )
    return Stream.concat(Stream.make(undefined), Stream.merge(watched, polled)).pipe(
      Stream.mapEffect(() => read),
      Stream.changesWith(sameRead),
      Stream.mapEffect(settled),
      Stream.changesWith(sameRead)
    )
  }))
