/**
 * The tool-gate demo (`npm run demo`): an agent pauses for a human, its process exits, a human
 * answers from another process, and the agent resumes from its checkpoint in a third. Each step
 * is a separate process on one SQLite file, `.toolgate/demo.db`, removed first so every run
 * starts clean.
 *
 * The steps, by hand:
 *   bun examples/agent.ts                          runs until the deploy needs a human, exits
 *   bun examples/answer.ts REQUEST_ID approve      answers (later: toolgate approve REQUEST_ID)
 *   bun examples/agent.ts resume TOKEN             finishes, prints the audit trail
 */
import { spawnSync } from "node:child_process"
import { rmSync } from "node:fs"
import { relative } from "node:path"
import { fileURLToPath } from "node:url"
import { demoDb } from "./release-agent.js"

const root = fileURLToPath(new URL("..", import.meta.url))

const step = (title: string, args: Array<string>): string => {
  console.log(`\n── ${title} ──\n$ bun ${args.join(" ")}`)
  const child = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8" })
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
console.log(`tool-gate demo: a release agent on ${relative(root, demoDb)} (read_file allowed, deploy needs a human, drop_database denied)`)

const first = step("1. the agent runs, pauses on the deploy and exits", ["examples/agent.ts"])
const requestId = found(first, /req_[0-9a-f-]{36}/, "request id")
const token = found(first, /cp_[0-9a-f-]{36}/, "checkpoint token")
step("2. a human approves, from another process", ["examples/answer.ts", requestId, "approve"])
step("3. the agent runs again and resumes from the checkpoint", ["examples/agent.ts", "resume", token])
