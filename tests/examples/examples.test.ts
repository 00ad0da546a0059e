import { describe, expect, test } from "bun:test"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

const run = async (file: string) => {
  const child = Bun.spawn([process.execPath, file], { cwd: root, stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { stdout, stderr, code }
}

describe("examples run as documented", () => {
  test("the README quick start prints what its comments say", async () => {
    const { code, stdout, stderr } = await run("examples/quickstart.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout.trim().split("\n")).toEqual(["ran npm test", "Allow"])
  })

  test("the demo decides, pauses, takes answers, times out and prints the audit trail", async () => {
    const { code, stdout } = await run("examples/demo.ts")
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
      "approval.expired expired"
    ])
  })
})
