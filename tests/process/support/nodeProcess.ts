/**
 * Real processes for the process tests: a worker is bundled for Node once (better-sqlite3 stays
 * external and loads from node_modules), then each process is spawned with `node`; or, asked
 * for, the worker's source runs under Bun (bun:sqlite).
 */
import { mkdirSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const outdir = `${root}build/process-tests`

const built = new Map<string, Promise<string>>()

/** Bundles a worker of this folder (`gateWorker` unless named) for Node, once per test run, and returns its path. */
export const workerScript = (entry = "gateWorker"): Promise<string> => {
  let script = built.get(entry)
  if (script === undefined) {
    script = (async () => {
      mkdirSync(outdir, { recursive: true })
      const result = await Bun.build({
        entrypoints: [`${root}tests/process/support/${entry}.ts`],
        outdir,
        target: "node",
        format: "esm",
        // the workspace packages' TypeScript sources, not their built dist
        conditions: ["@tool-gate/source"],
        // the Bun driver is only imported under Bun; keep it (and its bun:sqlite) out of the Node bundle
        external: ["better-sqlite3", "@effect/sql-sqlite-bun", "bun:*"]
      })
      if (!result.success) throw new Error(result.logs.map(String).join("\n"))
      return result.outputs[0]!.path
    })()
    built.set(entry, script)
  }
  return script
}

/** Which worker to start (default `gateWorker`), and on which runtime (default Node, from the bundle). */
export interface WorkerOptions {
  readonly entry?: string
  readonly runtime?: "node" | "bun"
}

export interface Line {
  readonly event: string
  readonly at: number
  readonly [key: string]: unknown
}

/** A running worker: its JSON lines as they come, and its exit. */
export interface Worker {
  readonly lines: Array<Line>
  readonly next: (event: string, timeoutMs?: number) => Promise<Line>
  readonly exited: Promise<number>
  /** settles when the worker's output is read to its end (after `exited`, lines may still come) */
  readonly drained: Promise<void>
  readonly kill: (signal?: NodeJS.Signals) => void
  readonly stderr: () => string
}

export const spawnWorker = async (args: Array<string>, options: WorkerOptions = {}): Promise<Worker> => {
  const entry = options.entry ?? "gateWorker"
  const command = options.runtime === "bun"
    ? [process.execPath, "--conditions=@tool-gate/source", `${root}tests/process/support/${entry}.ts`]
    : ["node", await workerScript(entry)]
  const child = Bun.spawn([...command, ...args], { cwd: root, env: { ...process.env }, stdout: "pipe", stderr: "pipe" })
  const lines: Array<Line> = []
  const waiting: Array<() => void> = []
  let err = ""
  const stdout = (async () => {
    const decoder = new TextDecoder()
    let buffer = ""
    for await (const chunk of child.stdout) {
      buffer += decoder.decode(chunk)
      let newline: number
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const text = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        if (text.startsWith("{")) lines.push(JSON.parse(text))
        waiting.splice(0).forEach((wake) => wake())
      }
    }
    waiting.splice(0).forEach((wake) => wake())
  })()
  const stderr = (async () => {
    for await (const chunk of child.stderr) err += new TextDecoder().decode(chunk)
  })()
  // the worker's output read to its end: every line it printed is in `lines`, all of stderr in `err`
  const drained = Promise.all([stdout, stderr]).then(() => undefined)
  const exited = child.exited
  const next = async (event: string, timeoutMs = 20_000): Promise<Line> => {
    const deadline = Date.now() + timeoutMs
    let seen = 0
    while (Date.now() < deadline) {
      const found = lines.slice(seen).find((l) => l.event === event)
      if (found) return found
      seen = lines.length
      const exitedEarly = await Promise.race([
        new Promise<boolean>((resolve) => waiting.push(() => resolve(false))),
        drained.then(() => true),
        Bun.sleep(Math.max(1, deadline - Date.now())).then(() => false)
      ])
      if (exitedEarly && !lines.some((l) => l.event === event)) {
        throw new Error(`worker ${args.join(" ")} exited before "${event}": ${err}`)
      }
    }
    throw new Error(`timed out waiting for "${event}" from worker ${args.join(" ")}: ${err}`)
  }
  return { lines, next, exited, drained, kill: (signal = "SIGTERM") => child.kill(signal), stderr: () => err }
}

/**
 * Resolves once the machine's clock, the one SQLite's `julianday('now')` reads, is past
 * `expiresAt`, a deadline a worker printed: a request's TTL has passed without any process
 * running. (Waiting on the code's own deadline, not on a guessed margin.)
 */
export const pastDeadline = async (expiresAt: number): Promise<void> => {
  while (Date.now() <= expiresAt) await Bun.sleep(expiresAt + 1 - Date.now())
}

/** Runs a worker to its end and returns its last line. */
export const runWorker = async (args: Array<string>, options: WorkerOptions = {}): Promise<Line> => {
  const worker = await spawnWorker(args, options)
  const code = await worker.exited
  await worker.drained
  if (code !== 0) throw new Error(`worker ${args.join(" ")} exited ${code}: ${worker.stderr()}`)
  const last = worker.lines[worker.lines.length - 1]
  if (!last) throw new Error(`worker ${args.join(" ")} printed nothing: ${worker.stderr()}`)
  return last
}
