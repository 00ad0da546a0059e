#!/usr/bin/env node
// The toolgate command under Node: runs a bundle of src/bin.ts that Bun (installed from npm with
// the repository) builds on first use and again whenever a workspace source is newer. The bundle
// lives in build/ (gitignored); better-sqlite3 stays external and loads from node_modules.
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, readdirSync, renameSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const cli = fileURLToPath(new URL("..", import.meta.url))
const packages = dirname(cli)
const bundle = join(cli, "build", "toolgate.mjs")

const newest = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce(
    (latest, entry) =>
      Math.max(latest, entry.isDirectory() ? newest(join(dir, entry.name)) : statSync(join(dir, entry.name)).mtimeMs),
    0
  )

const builtAt = () => {
  try {
    return statSync(bundle).mtimeMs
  } catch {
    return -1
  }
}

// The server reads its web console's files beside its module, which in the bundle is build/.
const consoleFiles = join(packages, "server", "src", "console")
const consoleCopy = join(cli, "build", "console")

const sources = readdirSync(packages).map((name) => join(packages, name, "src")).filter(existsSync)
const stale = sources.some((dir) => newest(dir) > builtAt()) || (existsSync(consoleFiles) && !existsSync(consoleCopy))
if (stale) {
  const bun = join(dirname(createRequire(import.meta.url).resolve("bun/package.json")), "bin", "bun.exe")
  // Built beside the bundle and renamed over it, so a concurrent start never imports half a file.
  const partial = join(cli, "build", `toolgate.${process.pid}.partial.mjs`)
  const build = spawnSync(bun, [
    "build", join(cli, "src", "bin.ts"), "--target=node", "--format=esm", `--outfile=${partial}`,
    // the Bun driver is imported only under Bun
    "--external=better-sqlite3", "--external=@effect/sql-sqlite-bun", "--external=bun:*"
  ], { encoding: "utf8" })
  if (build.status !== 0) {
    process.stderr.write(`toolgate: building the command failed\n${build.stderr || build.error}\n`)
    process.exit(70)
  }
  if (existsSync(consoleFiles)) cpSync(consoleFiles, consoleCopy, { recursive: true })
  renameSync(partial, bundle)
}

await import(pathToFileURL(bundle).href)
