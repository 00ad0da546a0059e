import { describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { runToEnd } from "../support/processes.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

const run = (file: string) => runToEnd([process.execPath, "--conditions=@tool-gate/source", file], { cwd: root })

describe("examples run as documented", () => {
  test("the README quick start prints what its comments say", async () => {
    const { code, stdout, stderr } = await run("examples/quickstart.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout.trim().split("\n")).toEqual(["ran npm test", "Allow"])
  })

  test(
    "npm run demo (toolgate demo): the agent pauses and exits, a second process answers, a third resumes it; twice in a row",
    async () => {
      // as the README runs it, from the checkout; the database goes to the working directory
      const cwd = mkdtempSync(join(tmpdir(), "toolgate-demo-"))
      try {
        for (const _ of [1, 2]) await demoRound(cwd)
      } finally {
        rmSync(cwd, { recursive: true, force: true })
      }
    },
    60_000
  )

  const demoRound = async (cwd: string) => {
    const { code, stderr, stdout } = await runToEnd(["node", join(root, "packages/cli/bin/toolgate.mjs"), "demo"], {
      cwd
    })
    expect(stderr).toBe("")
    expect(code).toBe(0)
    const [, first, answer, resume] = stdout.split(/\n── \d\. /)
    const pids = [...stdout.matchAll(/\(process (\d+) exited 0\)/g)].map((m) => m[1])
    expect(new Set(pids).size).toBe(3)

    // 1: the allowed call runs, the policy denies the drop, the deploy waits; the process exits.
    const requestId = first!.match(/gate {3}: needs a human: request (req_[0-9a-f-]{36})/)![1]!
    const token = first!.match(/npx toolgate demo agent --resume (cp_[0-9a-f-]{36})/)![1]!
    expect(first).toContain(`tool   < "## 1.2.0 - faster builds, login redirect fixed"`)
    expect(first).toContain(
      "gate   : Tool call call_drop (drop_database) denied by policy rule no-drops: Databases are dropped by a person, after a backup."
    )
    expect(first).toMatch(
      /Allow deploy \{"env":"production","version":"1\.2\.0"\} in session release-[0-9a-f]{8}\?/
    )
    expect(first).toContain(`npx toolgate approve ${requestId} --db .toolgate/demo.db`)
    expect(first).not.toContain("deployed")

    // 2: the answer, from its own process: the toolgate CLI under Node.
    expect(answer).toContain(`$ npx toolgate approve ${requestId} --db .toolgate/demo.db`)
    expect(answer).toContain(`approved ${requestId} (deploy`)

    // 3: the resumed agent deploys once, the model reports what it read back, the audit trail ends it.
    expect(resume).toContain(`resuming checkpoint ${token}`)
    expect(resume).toContain(`tool   < "deployed 1.2.0 to production"`)
    expect(resume).toContain(
      "model  : Release report. read_file: ## 1.2.0 - faster builds, login redirect fixed; deploy: deployed 1.2.0 to production; " +
        "drop_database: not done (policy: Databases are dropped by a person, after a backup.)."
    )
    const trail = resume!.slice(resume!.indexOf("audit trail:")).trim().split("\n").slice(1, -1)
    expect(trail.map((line) => line.replace(/^\s*#\s*\d+\s+(\S+)\s+(\S+)\s+(\S+).*$/, "$1 $2 $3"))).toEqual([
      "decision allow read_file",
      "approval.requested pending deploy",
      "decision deny drop_database",
      "approval.resolved approved deploy"
    ])
  }

  test("the in-memory demo decides, pauses, takes answers, times out and prints the audit trail", async () => {
    const { code, stdout } = await run("examples/memory-demo.ts")
    expect(code).toBe(0)
    expect(stdout).toContain("tool   < <contents of src/index.ts>")
    expect(stdout).toContain("gate   : denied: Environment files hold secrets.")
    expect(stdout).toContain("gate   : denied: File it in the tracker's triage board instead.")
    expect(stdout).toContain("gate   : timed out, denied")
    const trail = stdout.slice(stdout.indexOf("audit trail:")).trim().split("\n").slice(1)
    expect(trail.map((line) => line.replace(/^\s*#\s*\d+\s+(\S+)\s+(\S+).*$/, "$1 $2"))).toEqual([
      "decision allow",
      "decision deny",
      "approval.requested pending",
      "approval.resolved approved",
      "decision allow",
      "decision deny",
      "approval.requested pending",
      "approval.resolved denied",
      "approval.requested pending",
      "approval.expiring pending",
      "approval.expired expired"
    ])
  })
})
