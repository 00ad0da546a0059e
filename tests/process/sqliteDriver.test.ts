/**
 * The SQLite driver is picked at run time: `@effect/sql-sqlite-node` is a dependency, Bun's
 * `@effect/sql-sqlite-bun` an optional peer. A Bun app without it gets a typed error that names
 * the package to install, and nothing is written.
 */
import { afterAll, expect, test } from "bun:test"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { runToEnd } from "../support/processes.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
// outside the repository, so no node_modules above it holds the Bun driver
const dir = mkdtempSync(join(tmpdir(), "toolgate-driver-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

test("on Bun without @effect/sql-sqlite-bun: a PersistenceError naming the package and its install line; no file", async () => {
  const built = await Bun.build({
    entrypoints: [`${root}tests/process/support/driverWorker.ts`],
    outdir: dir,
    target: "bun",
    format: "esm",
    conditions: ["@tool-gate/source"],
    external: ["@effect/sql-sqlite-bun", "@effect/sql-sqlite-node", "bun:*"]
  })
  expect(built.success).toBe(true)
  const db = join(dir, "data", "gate.db")
  // --no-install: Bun would otherwise fetch the missing package itself, there being no node_modules
  const { code, stderr, stdout } = await runToEnd([process.execPath, "--no-install", built.outputs[0]!.path, db], {
    cwd: dir
  })
  expect(stderr).toBe("")
  expect(code).toBe(0)
  const result = JSON.parse(stdout) as { exit: string; defect: boolean; tag?: string; message?: string }
  expect(result).toMatchObject({ exit: "Failure", defect: false, tag: "PersistenceError" })
  expect(result.message).toContain("@effect/sql-sqlite-bun is needed")
  expect(result.message).toContain("bun add @effect/sql-sqlite-bun")
  expect(existsSync(join(dir, "data"))).toBe(false)
})
