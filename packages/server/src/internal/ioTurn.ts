/**
 * The end of the current I/O turn, for every fiber that waits on it at once. The store commits
 * the writes that are in flight together in one transaction (group commit), but an HTTP server
 * reads its requests one socket at a time, and with a synchronous driver each answer reached the
 * store and committed alone before the next request was even parsed: one COMMIT (and one fsync)
 * per answer. Waiting here, the answers read in one turn of the event loop are released together,
 * after it (`setImmediate`: once the sockets that were ready have been read), so they reach the
 * store together and commit as one. A lone request waits for nothing more than the rest of the
 * turn it arrived in.
 */
import { Effect } from "effect"

type Resume = (effect: Effect.Effect<void>) => void

let waiting: Array<Resume> = []

// Node and Bun run `setImmediate` callbacks once the ready sockets have been read; a runtime
// without it (a web handler elsewhere) gets the next timer turn.
const afterTurn: (release: () => void) => void = typeof setImmediate === "function"
  ? (release) => setImmediate(release)
  : (release) => setTimeout(release, 0)

/** Releases every fiber that waited during the turn, in the order they came. */
const release = () => {
  const resumes = waiting
  waiting = []
  for (const resume of resumes) resume(Effect.void)
}

/** Completes after the current I/O turn, with every other fiber that waited in it. */
export const end: Effect.Effect<void> = Effect.async<void>((resume) => {
  if (waiting.length === 0) afterTurn(release)
  waiting.push(resume)
  return Effect.sync(() => {
    const index = waiting.indexOf(resume)
    if (index >= 0) waiting.splice(index, 1)
  })
})
