import { describe, expect, test } from "bun:test"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { runToEnd } from "../support/processes.js"

// Every TypeScript block of the README is a file under examples/ (named by the comment
// `<!-- example: examples/NAME.ts -->` just above it), so that `tsc -b` type-checks what the
// README shows (tests/tsconfig.json includes examples/) and the tests below run it. A block must
// be a run of consecutive lines of its file (the file may add a header comment), so the two
// cannot drift apart.

const root = fileURLToPath(new URL("../..", import.meta.url))
const readme = readFileSync(join(root, "README.md"), "utf8")

interface Block {
  readonly line: number
  readonly example: string | undefined
  readonly lines: ReadonlyArray<string>
}

/** The README's ```ts blocks, each with its example comment and its lines, un-indented. */
const blocks = (text: string): ReadonlyArray<Block> => {
  const lines = text.split("\n")
  const found: Array<Block> = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```ts\s*$/.exec(lines[i]!)
    if (open === null) continue
    const indent = open[1]!
    const end = lines.findIndex((line, at) => at > i && line.trim() === "```")
    const marker = /^\s*<!-- example: (\S+) -->\s*$/.exec(lines[i - 1] ?? "")
    found.push({
      line: i + 1,
      example: marker?.[1],
      lines: lines.slice(i + 1, end).map((line) => line.startsWith(indent) ? line.slice(indent.length) : line)
    })
    i = end
  }
  return found
}

/** Whether `part` is a run of consecutive lines of `whole`. */
const containsRun = (whole: ReadonlyArray<string>, part: ReadonlyArray<string>) =>
  whole.some((_, start) => part.every((line, k) => whole[start + k] === line))

describe("the README's TypeScript blocks are example files", () => {
  const all = blocks(readme)

  test("the README has its blocks, each naming its example file", () => {
    expect(all.length).toBeGreaterThanOrEqual(8)
    for (const block of all) {
      expect({ line: block.line, example: block.example }).toEqual({
        line: block.line,
        example: expect.stringMatching(/^examples\/[\w-]+\.ts$/)
      })
    }
  })

  for (const block of all) {
    test(`README.md:${block.line} is part of ${block.example}`, () => {
      const path = join(root, block.example ?? "missing")
      expect(existsSync(path)).toBe(true)
      const file = readFileSync(path, "utf8").split("\n")
      if (!containsRun(file, block.lines)) {
        // show the first line that differs from the best match, to fix whichever drifted
        const first = file.findIndex((line) => line === block.lines[0])
        const at = block.lines.findIndex((line, k) => file[first + k] !== line)
        throw new Error(
          `README.md:${block.line} differs from ${block.example}: README line ${block.line + 1 + at} reads\n` +
            `  ${block.lines[at]}\nwhere the file has\n  ${
              first < 0 ? "(no line like the block's first)" : file[first + at]
            }`
        )
      }
    })
  }

  test("a block that drifted from its file is caught", () => {
    const [quickstart] = blocks(readme)
    const file = readFileSync(join(root, quickstart!.example!), "utf8").split("\n")
    expect(containsRun(file, quickstart!.lines)).toBe(true)
    const edited = quickstart!.lines.map((line) => line.replace("rm -rf*", "rm -r*"))
    expect(containsRun(file, edited)).toBe(false)
  })
})

/** Runs an example with Bun in a fresh folder (its database files go there), as a user would. */
const runExample = async (name: string, env: Record<string, string | undefined> = {}) => {
  const cwd = mkdtempSync(join(tmpdir(), "toolgate-example-"))
  try {
    return await runToEnd([process.execPath, "--conditions=@tool-gate/source", join(root, "examples", name)], {
      cwd,
      env: { ...process.env, ...env }
    })
  } finally {
    rmSync(cwd, { recursive: true, force: true })
  }
}

/** The stdout lines, without the gate's log lines. */
const outputOf = (stdout: string) => stdout.trim().split("\n").filter((line) => !line.startsWith("timestamp="))

describe("the README's examples run as documented", () => {
  test("agent.ts: the turn pauses for the deploy, the answer resumes it, the model reports", async () => {
    const { code, stderr, stdout } = await runExample("agent.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(outputOf(stdout)).toEqual(["Shipped 1.2.0."])
  }, 60_000)

  test("agent-stream.ts: the model's text arrives piece by piece, the allowed call runs", async () => {
    const { code, stderr, stdout } = await runExample("agent-stream.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(outputOf(stdout)).toEqual(["model > Reading the changelog.", "model > The changelog is read.", "Completed"])
  }, 60_000)

  test("stores.ts: the SQLite store opens in the folder", async () => {
    const { code, stderr, stdout } = await runExample("stores.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(outputOf(stdout)).toEqual(["0 pending"])
  }, 60_000)

  test("checkpoint.ts: saved, answered, resumed and completed", async () => {
    const { code, stderr, stdout } = await runExample("checkpoint.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(outputOf(stdout)).toEqual(["step 3: approved"])
  }, 60_000)

  test("config.ts: the gate configured from the environment", async () => {
    const { code, stderr, stdout } = await runExample("config.ts", {
      TOOLGATE_POLICY: join(root, "examples/policy.yaml"),
      TOOLGATE_TTL: "90 seconds"
    })
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(outputOf(stdout)).toEqual(["Deny by no-env-files; approvals wait 90 s"])
  }, 60_000)

  test("config.ts without TOOLGATE_POLICY: the ConfigError names the key, exit 1", async () => {
    const { code, stderr, stdout } = await runExample("config.ts", { TOOLGATE_POLICY: undefined })
    expect(code).toBe(1)
    // NodeRuntime.runMain reports the failure through Effect's logger
    expect(stdout + stderr).toContain("Missing data at TOOLGATE_POLICY")
  }, 60_000)

  test("reload.ts: the edited file judges the next call; the switch is audited", async () => {
    const { code, stderr, stdout } = await runExample("reload.ts")
    expect(stderr).toBe("")
    expect(code).toBe(0)
    const lines = outputOf(stdout)
    expect(lines.slice(0, 2)).toEqual(["Deny", "Allow"])
    expect(lines[2]).toMatch(/^policy\.loaded [0-9a-f]{12} \(was [0-9a-f]{12}\)$/)
  }, 60_000)

  test("server.ts: the approval server answers on the port it is given", async () => {
    const port = await freePort()
    const cwd = mkdtempSync(join(tmpdir(), "toolgate-example-"))
    writeFileSync(
      join(cwd, "tokens.json"),
      JSON.stringify([{ token: "5f0c6b1e2d9a4c7e8b3a1f6d0e9c2b7a", name: "ana", role: "approver" }])
    )
    const server = Bun.spawn([process.execPath, "--conditions=@tool-gate/source", join(root, "examples/server.ts")], {
      cwd,
      env: { ...process.env, PORT: String(port) },
      stdout: "pipe",
      stderr: "pipe"
    })
    try {
      const health = await untilAnswered(`http://127.0.0.1:${port}/health`)
      expect(health).toEqual({ status: "ok" })
      const pending = await fetch(`http://127.0.0.1:${port}/approvals/pending`, {
        headers: { authorization: "Bearer 5f0c6b1e2d9a4c7e8b3a1f6d0e9c2b7a" }
      })
      expect(pending.status).toBe(200)
      expect(await pending.json()).toEqual([])
    } finally {
      server.kill()
      await server.exited
      rmSync(cwd, { recursive: true, force: true })
    }
  }, 60_000)
})

/** A port nothing listens on now (the OS's pick, released at once). */
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.on("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** The JSON of the first answer from `url`, asking again while the server is still starting. */
const untilAnswered = async (url: string): Promise<unknown> => {
  for (let attempt = 0;; attempt++) {
    try {
      // a connection made while the server starts may never be answered: each attempt is bounded
      return await (await fetch(url, { signal: AbortSignal.timeout(2_000) })).json()
    } catch (error) {
      if (attempt > 400) throw error
      await Bun.sleep(50)
    }
  }
}
