/**
 * A bench script's entry point: the workload on a SQLite file in a temp dir, then on PostgreSQL
 * when TOOLGATE_PG_URL is set (else a skipped line), one JSON line each, as `bench/index.ts` reads.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const runMain = async (
  workload: string,
  runs: {
    readonly sqlite: (filename: string) => Promise<object>
    readonly postgres: (url: string) => Promise<object>
  }
): Promise<never> => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-bench-"))
  try {
    console.log(JSON.stringify({ workload: `${workload} SQLite`, ...(await runs.sqlite(join(dir, "bench.db"))) }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const pg = process.env.TOOLGATE_PG_URL
  if (pg) console.log(JSON.stringify({ workload: `${workload} PostgreSQL`, ...(await runs.postgres(pg)) }))
  else console.log(JSON.stringify({ workload: `${workload} PostgreSQL`, skipped: "TOOLGATE_PG_URL not set" }))
  // a closed PgClient layer may still hold a socket (its LISTEN connection) that keeps the
  // process alive; the figures are out, so leave
  process.exit(0)
}
