/**
 * PostgreSQL tests run when the suite has a server (`TOOLGATE_PG_URL`, which `npm test` sets
 * through scripts/with-postgres.mjs). Without one they are registered as skipped, never as
 * passed, and the run says so on stderr.
 */
import { describe } from "bun:test"
import { pgUrl } from "./sqlStores.js"

/** The server's URL, or `undefined` after saying on stderr that `what` is skipped. */
export const postgresUrl = (what: string): string | undefined => {
  if (pgUrl === undefined) console.warn(`PostgreSQL ${what} SKIPPED: TOOLGATE_PG_URL not set`)
  return pgUrl
}

/**
 * Registers `suite(url)` against the server, or, without one, under `describe.skip` (`suite` gets
 * an empty URL it never uses: skipped tests do not run).
 */
export const describePostgres = (what: string, suite: (url: string) => void): void => {
  const url = postgresUrl(what)
  if (url === undefined) describe.skip(`PostgreSQL ${what} (TOOLGATE_PG_URL not set)`, () => suite(""))
  else suite(url)
}
