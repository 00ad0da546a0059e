import { describe } from "bun:test"
import { pgStore, pgUrl } from "../support/sqlStores.js"
import { toolGateSuite } from "./toolGateSuite.js"

const url = pgUrl
if (url === undefined) {
  console.warn("PostgreSQL tests SKIPPED: TOOLGATE_PG_URL not set")
  // Registers every scenario as skipped, so the run reports them as skipped, never passed.
  describe.skip("PostgreSQL (TOOLGATE_PG_URL not set)", () => {
    toolGateSuite("postgres", () => pgStore(""))
  })
} else {
  toolGateSuite("postgres", () => pgStore(url))
}
