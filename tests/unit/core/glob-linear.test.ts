/**
 * Argument values come from the model: a glob must never backtrack. Each case runs in a child
 * process with a generous deadline, so a matcher that stalls fails the test instead of hanging
 * the suite (the timing itself is measured by bench/glob.ts).
 */
import { describe, expect, it } from "bun:test"
import * as path from "node:path"

const root = path.resolve(import.meta.dir, "../../..")

/** Evaluates `pattern` against `unit` repeated `times` times in a fresh process, killed after 15 s. */
const decideInChild = async (pattern: string, unit: string, times: number) => {
  const code = `
    import * as Policy from "@tool-gate/core/Policy"
    const policy = Policy.unsafeMake({ deny: [{ tool: "bash", args: { command: ${JSON.stringify(pattern)} } }] })
    const command = ${JSON.stringify(unit)}.repeat(${times})
    console.log(policy.evaluate({ name: "bash", args: { command } })._tag)
  `
  const child = Bun.spawn([process.execPath, "--conditions=@tool-gate/source", "-e", code], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe"
  })
  const timer = setTimeout(() => child.kill(), 15_000)
  const [out, exit] = await Promise.all([new Response(child.stdout).text(), child.exited])
  clearTimeout(timer)
  return { out: out.trim(), exit, killed: child.signalCode !== null }
}

describe("glob matching is linear in the argument", () => {
  it("a 256 KB argument against *rm*-rf* (seconds of backtracking before)", async () => {
    expect(await decideInChild("*rm*-rf*", "rm -r", 52_000)).toEqual({ out: "Allow", exit: 0, killed: false })
    expect(await decideInChild("*rm*-rf*", "rm -r-rf", 32_000)).toEqual({ out: "Deny", exit: 0, killed: false })
  }, 60_000)

  it("200 characters against *a*a*a*a*a*b (minutes of backtracking before)", async () => {
    expect(await decideInChild("*a*a*a*a*a*b", "a", 200)).toEqual({ out: "Allow", exit: 0, killed: false })
    expect(await decideInChild("*a*a*a*a*a*b", "ab", 100)).toEqual({ out: "Deny", exit: 0, killed: false })
  }, 60_000)
})
