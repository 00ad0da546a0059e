/**
 * The tool-gate demo (`npm run demo`): an agent pauses for a human, its process exits, a human
 * answers from another process, and the agent resumes from its checkpoint in a third. Each step
 * is a separate process on one SQLite file, `.toolgate/demo.db`, removed first so every run
 * starts clean.
 *
 * The steps, by hand:
 *   bun examples/agent.ts                                    runs until the deploy needs a human, exits
 *   npx toolgate approve REQUEST_ID --db .toolgate/demo.db   answers, as the OS user
 *   bun examples/agent.ts resume TOKEN                       finishes, prints the audit trail
 */
import { spawnSync } from "node:child_process"
import { rmSync } from "node:fs"
import { relative } from "node:path"
import { fileURLToPath } from "node:url"
import { demoDb } from "./release-agent.js"

const root = fileURLToPath(new URL("..", import.meta.url))

const toolgate = fileURLToPath(new URL("../packages/cli/bin/toolgate.mjs", import.meta.url))

/** Runs one step as its own process: `bun ARGS`, or with `toolgate` first the CLI under Node, shown as `npx toolgate`. */
const step = (title: string, args: Array<string>): string => {
  const cli = args[0] === "toolgate"
  console.log(`\n── ${title} ──\n$ ${cli ? "npx" : "bun"} ${args.join(" ")}`)
  const child = cli
    ? spawnSync("node", [toolgate, ...args.slice(1)], { cwd: root, encoding: "utf8" })
    : spawnSync(process.execPath, ["--conditions=@tool-gate/source", ...args], { cwd: root, encoding: "utf8" })
  process.stdout.write(child.stdout)
  console.log(`(process ${child.pid} exited ${child.status})`)
  if (child.status !== 0) {
    process.stderr.write(child.stderr)
    process.exit(1)
  }
  return child.stdout
}

const found = (text: string, pattern: RegExp, what: string): string => {
  const match = text.match(pattern)
  if (match === null) {
    console.error(`the agent printed no ${what}`)
    process.exit(1)
  }
  return match[0]
}

for (const suffix of ["", "-wal", "-shm"]) rmSync(`${demoDb}${suffix}`, { force: true })
console.log(
  `tool-gate demo: a release agent on ${
    relative(root, demoDb)
  } (read_file allowed, deploy needs a human, drop_database denied)`
)

const first = step("1. the agent runs, pauses on the deploy and exits", ["examples/agent.ts"])
const requestId = found(first, /req_[0-9a-f-]{36}/, "request id")
const token = found(first, /cp_[0-9a-f-]{36}/, "checkpoint token")
step("2. a human approves, from another process", ["toolgate", "approve", requestId, "--db", relative(root, demoDb)])
step("3. the agent runs again and resumes from the checkpoint", ["examples/agent.ts", "resume", token])
