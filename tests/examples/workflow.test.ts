import { expect, test } from "bun:test"
import { fileURLToPath } from "node:url"
import { runToEnd } from "../support/processes.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

test("the workflow example: suspended on a deploy, approved, denied, expired; twice in a row", async () => {
  for (const _ of [1, 2]) {
    const { code, stderr, stdout } = await runToEnd(
      [process.execPath, "--conditions=@tool-gate/source", "examples/workflow.ts"],
      { cwd: root }
    )
    expect(stderr).toBe("")
    expect(code).toBe(0)
    const [approved, denied, expired] = stdout.split(/^workflow /m).slice(1)

    expect(approved).toContain("gate   : needs a human: request req_")
    expect(approved).toContain("engine : Suspended")
    // the changelog is read once although the workflow ran again after its pause; the deploy runs once
    expect(approved!.match(/tool {3}< read CHANGELOG\.md/g)).toHaveLength(1)
    expect(approved!.match(/tool {3}< deploy /g)).toHaveLength(1)
    expect(approved).toContain(
      "engine : Complete, success: released (## 1.2.0 - faster builds; deployed 1.2.0 to production)"
    )

    expect(denied).toContain("engine : Suspended")
    expect(denied).not.toContain("tool   < deploy")
    expect(denied).toContain(
      "engine : Complete, failure: ToolDenied (denied): Tool call deploy (deploy) denied by a human: Release freeze until Monday."
    )

    expect(expired).not.toContain("tool   < deploy")
    expect(expired).toContain("engine : Complete, failure: ToolDenied (expired): ")

    // (the expiry warning is left out: whether a sweep falls in its half-second window depends on load)
    const trail = stdout.slice(stdout.indexOf("audit trail:")).trim().split("\n").slice(1)
      .filter((line) => !line.includes("approval.expiring"))
    expect(trail.map((line) => line.replace(/^\s*#\s*\d+\s+(\S+)\s+(\S+)\s+(\S+).*$/, "$1 $2 $3"))).toEqual([
      "decision allow read_file",
      "approval.requested pending deploy",
      "approval.resolved approved deploy",
      "decision allow read_file",
      "approval.requested pending deploy",
      "approval.resolved denied deploy",
      "decision allow read_file",
      "approval.requested pending deploy",
      "approval.expired expired deploy"
    ])
  }
}, 60_000)
