// Builds the published `toolgate` bin: one Node ESM file, dist/toolgate.mjs, with the workspace's
// sources and their Effect dependencies inside, plus the web console's files (its page, script
// modules and style) beside it in dist/console/ (the server reads them next to its own module,
// which in the bundle is this file).
// Runs when the package is packed (`prepack`, through `npm run build`), when the repository is
// installed (`prepare`, so npm links the workspace's `toolgate` bin and `npx toolgate` finds it),
// and from bin/toolgate.mjs inside a checkout whenever a source is newer than the bundle.
//
// Bun (a devDependency of the repository, pinned) bundles: it is already what the repository runs,
// and it resolves the workspace's TypeScript sources through the `@tool-gate/source` condition.
// Left outside: better-sqlite3 (native; a dependency of @tool-gate/cli, so installing the CLI
// brings it) and the Bun SQLite driver, imported only when running under Bun.
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const cli = fileURLToPath(new URL("..", import.meta.url))
const packages = dirname(cli)
const dist = join(cli, "dist")

/** The bundle the package's `bin` points at. */
export const bundle = join(dist, "toolgate.mjs")

const consoleFiles = join(packages, "server", "src", "console")
const consoleCopy = join(dist, "console")

const newest = (path) => {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce((latest, name) => Math.max(latest, newest(join(path, name))), 0)
}

const builtAt = () => existsSync(bundle) && existsSync(consoleCopy) ? statSync(bundle).mtimeMs : -1

/** Whether a workspace source (or this script) is newer than the bundle. */
export const isStale = () => {
  const inputs = [
    ...readdirSync(packages).map((name) => join(packages, name, "src")),
    fileURLToPath(import.meta.url),
    join(cli, "package.json")
  ].filter(existsSync)
  const built = builtAt()
  return inputs.some((input) => newest(input) > built)
}

/** Builds the bundle and copies the console's files; a failure throws with Bun's output. */
export const build = () => {
  const bun = join(dirname(createRequire(import.meta.url).resolve("bun/package.json")), "bin", "bun.exe")
  mkdirSync(dist, { recursive: true })
  // Built beside the bundle and renamed over it, so a concurrent start never imports half a file.
  const partial = join(dist, `toolgate.${process.pid}.partial.mjs`)
  const result = spawnSync(bun, [
    "build",
    join(cli, "src", "bin.ts"),
    "--target=node",
    "--format=esm",
    "--conditions=@tool-gate/source",
    "--banner=#!/usr/bin/env node",
    `--outfile=${partial}`,
    "--external=better-sqlite3",
    "--external=@effect/sql-sqlite-bun",
    "--external=bun:*"
  ], { encoding: "utf8" })
  if (result.status !== 0) {
    rmSync(partial, { force: true })
    throw new Error(`building the toolgate bundle failed\n${result.stderr || result.error}`)
  }
  // what the server serves (the page, its script modules, its style), not the types of the
  // hidden-character module, which the bundle carries inside
  cpSync(consoleFiles, consoleCopy, { recursive: true, filter: (source) => !source.endsWith(".d.ts") })
  renameSync(partial, bundle)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    build()
  } catch (error) {
    process.stderr.write(`${error.message}\n`)
    process.exit(1)
  }
}
