/**
 * W8 gateway overhead (issue 15's bench line): the added latency of `toolgate mcp` on an allowed
 * call, against the same call straight to the downstream server. The official SDK's client calls
 * `read_file` of a small real MCP server (tests/mcp/support/filesServer.mjs, a Node process over a
 * temp folder), one call at a time, in three ways:
 *
 * - direct: the client starts the server itself, over stdio;
 * - gateway, stdio: the client starts `toolgate mcp --policy P --db F -- node filesServer.mjs DIR`
 *   (the CLI's bundle under Node, on a SQLite file; the policy allows `read_file`), which starts the
 *   server as its downstream;
 * - gateway, Streamable HTTP: `toolgate mcp --http 0` on 127.0.0.1, its downstream over stdio.
 *
 * Every way is started and warmed up first, then measured in blocks taken in turn (a, b, c, then
 * b, c, a, ...) so a busy machine slows every side alike. Figures per way: p50/p99 ms of a call,
 * sequential calls per second, and CPU ms per call: the server processes' (from /proc/<pid>/stat,
 * every thread; the gateway's main thread, which runs its JavaScript, alone too; its downstream's)
 * and this client's (`process.cpuUsage`). The gateway lines add `addedP50ms` / `addedP99ms`:
 * their p50 and p99 minus the direct ones of the same run. No goal is set for W8; it is reported.
 *
 *   bun bench/mcp.ts     W8_CALLS=2000 measured calls per way, W8_WARMUP=500, W8_BLOCK=100 calls per
 *                        turn, W8_HTTP=0 without the HTTP gateway, W8_DEADLINE_S=300 in all,
 *                        W8_GATEWAY_FLAGS for the gateways' Node (e.g. --cpu-prof --cpu-prof-dir=DIR)
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"

const CALLS = Number(process.env.W8_CALLS ?? 2000)
const WARMUP = Number(process.env.W8_WARMUP ?? 500)
const BLOCK = Number(process.env.W8_BLOCK ?? 100)
const HTTP = process.env.W8_HTTP !== "0"
const DEADLINE_S = Number(process.env.W8_DEADLINE_S ?? 300)
/** one call, or a server's start, that takes longer than this fails the bench */
const CALL_TIMEOUT_MS = 30_000

const toolgate = join(import.meta.dir, "..", "packages", "cli", "bin", "toolgate.mjs")
const filesServer = join(import.meta.dir, "..", "tests", "mcp", "support", "filesServer.mjs")
/** the gateway as users run it: the CLI's bundle under Node */
const node = "node"

/** CPU time (user + system) in ms, from a `stat` file of /proc. */
const statCpuMs = (path: string) => {
  // the fields after the command (which may hold spaces), from `state`: utime and stime are 12th and 13th
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 1000 / 100
}

/** The pids whose parent is `pid` (the gateway's downstream server). */
const childrenOf = (pid: number) =>
  readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((child) => {
    try {
      return Number(readFileSync(`/proc/${child}/stat`, "utf8").split(") ")[1]!.split(" ")[1]) === pid
    } catch {
      return false // ended meanwhile
    }
  })

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!
}

const round = (x: number) => Math.round(x * 1000) / 1000

/** One way of calling `read_file`: a connected client and the server processes behind it. */
interface Way {
  readonly workload: string
  readonly client: Client
  /** the process the client talks to: the downstream server, or the gateway */
  readonly pid: number
  /** the gateway's downstream server */
  readonly downstreamPid: number | undefined
  readonly close: () => Promise<void>
  readonly latencies: Array<number>
  /** totals over the measured blocks */
  wallMs: number
  clientCpuUs: number
  cpuMs: number
  mainThreadCpuMs: number
  downstreamCpuMs: number
}

const CONTENT = "x".repeat(1024)

const call = async (way: Way) => {
  const result = await way.client.callTool({ name: "read_file", arguments: { path: "hello.txt" } }, undefined, {
    timeout: CALL_TIMEOUT_MS
  })
  const content = result.content as Array<{ readonly type: string; readonly text?: string }>
  if (result.isError === true || content[0]?.text !== CONTENT) {
    throw new Error(`${way.workload}: read_file did not return the file: ${JSON.stringify(result).slice(0, 500)}`)
  }
}

/** The last few KB a process wrote to stderr, shown when it fails (read, so a full pipe never blocks it). */
const stderrTail = (stream: NodeJS.ReadableStream | null) => {
  let tail = ""
  stream?.on("data", (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-4000)
  })
  return () => tail
}

const way = (
  workload: string,
  client: Client,
  pid: number,
  downstreamPid: number | undefined,
  close: () => Promise<void>
): Way => ({
  workload,
  client,
  pid,
  downstreamPid,
  close,
  latencies: [],
  wallMs: 0,
  clientCpuUs: 0,
  cpuMs: 0,
  mainThreadCpuMs: 0,
  downstreamCpuMs: 0
})

const newClient = () => new Client({ name: "toolgate-bench", version: "1.0.0" })

/** A client over stdio to `command`; the process's stderr kept for errors. */
const stdioWay = async (workload: string, args: Array<string>, gateway: boolean): Promise<Way> => {
  const transport = new StdioClientTransport({ command: node, args, stderr: "pipe" })
  const tail = stderrTail(transport.stderr as NodeJS.ReadableStream | null)
  const client = newClient()
  try {
    await client.connect(transport, { timeout: CALL_TIMEOUT_MS })
  } catch (error) {
    throw new Error(`${workload}: cannot connect: ${String(error)}\n${tail()}`)
  }
  const pid = transport.pid!
  return way(workload, client, pid, gateway ? childrenOf(pid)[0] : undefined, () => client.close())
}

/** the HTTP gateways started, for the deadline to end them even before they serve */
const httpGateways: Array<ChildProcess> = []

/** `toolgate mcp --http 0` started here, and a client over Streamable HTTP to the URL it prints. */
const httpWay = async (workload: string, args: Array<string>): Promise<Way> => {
  const child: ChildProcess = spawn(node, args, { stdio: ["ignore", "ignore", "pipe"] })
  // its stdin is not ours: it would outlive this process
  httpGateways.push(child)
  const tail = stderrTail(child.stderr)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  // (not serving in time: the gateway is ended, not left behind)
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${workload}: not serving after ${CALL_TIMEOUT_MS} ms`)),
      CALL_TIMEOUT_MS
    )
    child.stderr!.on("data", () => {
      const served = /serving (http:\/\/\S+?),/.exec(tail())
      if (served !== null) {
        clearTimeout(timer)
        resolve(served[1]!)
      }
    })
    child.once("exit", (code) => reject(new Error(`${workload}: the gateway ended (${code})\n${tail()}`)))
  }).catch((error: unknown) => {
    child.kill("SIGTERM")
    throw error
  })
  const client = newClient()
  const close = async () => {
    await client.close().catch(() => undefined)
    child.kill("SIGTERM")
    await exited
  }
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)), { timeout: CALL_TIMEOUT_MS })
  } catch (error) {
    await close()
    throw new Error(`${workload}: cannot connect: ${String(error)}\n${tail()}`)
  }
  return way(workload, client, child.pid!, childrenOf(child.pid!)[0], close)
}

/** `BLOCK` measured calls of one way, their time and CPU added to its totals. */
const block = async (way: Way, calls: number) => {
  const cpu = process.cpuUsage()
  const serverCpu = statCpuMs(`/proc/${way.pid}/stat`)
  const mainThreadCpu = statCpuMs(`/proc/${way.pid}/task/${way.pid}/stat`)
  const downstreamCpu = way.downstreamPid === undefined ? 0 : statCpuMs(`/proc/${way.downstreamPid}/stat`)
  const start = performance.now()
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now()
    await call(way)
    way.latencies.push(performance.now() - t0)
  }
  way.wallMs += performance.now() - start
  const used = process.cpuUsage(cpu)
  way.clientCpuUs += used.user + used.system
  way.cpuMs += statCpuMs(`/proc/${way.pid}/stat`) - serverCpu
  way.mainThreadCpuMs += statCpuMs(`/proc/${way.pid}/task/${way.pid}/stat`) - mainThreadCpu
  if (way.downstreamPid !== undefined) {
    way.downstreamCpuMs += statCpuMs(`/proc/${way.downstreamPid}/stat`) - downstreamCpu
  }
}

/** the ways started, for the deadline to end their processes */
const ways: Array<Way> = []

export const runW8 = async (dir: string): Promise<Array<object>> => {
  const folder = join(dir, "files")
  mkdirSync(folder)
  writeFileSync(join(folder, "hello.txt"), CONTENT)
  const policy = join(dir, "policy.json")
  writeFileSync(policy, JSON.stringify({ default: "deny", allow: ["read_file"] }))
  // a checkout builds the CLI's bundle when a source is newer: before anything is timed
  const built = spawnSync(node, [toolgate, "--version"], { encoding: "utf8", timeout: 120_000 })
  if (built.status !== 0) throw new Error(`toolgate --version failed: ${built.stderr}`)

  const downstream = ["--", node, filesServer, folder]
  // e.g. W8_GATEWAY_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the gateways
  const flags = (process.env.W8_GATEWAY_FLAGS ?? "").split(" ").filter((flag) => flag !== "")
  ways.length = 0
  try {
    ways.push(await stdioWay("W8 MCP direct, stdio", [filesServer, folder], false))
    ways.push(
      await stdioWay(
        "W8 MCP gateway, stdio, SQLite",
        [...flags, toolgate, "mcp", "--policy", policy, "--db", join(dir, "stdio.db"), ...downstream],
        true
      )
    )
    if (HTTP) {
      ways.push(
        await httpWay("W8 MCP gateway, Streamable HTTP, SQLite", [
          ...flags,
          toolgate,
          "mcp",
          "--policy",
          policy,
          "--db",
          join(dir, "http.db"),
          "--http",
          "0",
          ...downstream
        ])
      )
    }
    for (const each of ways) {
      for (let i = 0; i < WARMUP; i++) await call(each)
    }
    const loadAvg1m = loadavg()[0]!
    const rounds = Math.ceil(CALLS / BLOCK)
    for (let r = 0; r < rounds; r++) {
      const calls = Math.min(BLOCK, CALLS - r * BLOCK)
      // in turn, each way first once in every few rounds
      for (let i = 0; i < ways.length; i++) await block(ways[(r + i) % ways.length]!, calls)
    }

    const [direct] = ways
    const p50 = (way: Way) => percentile(way.latencies, 0.5)
    const p99 = (way: Way) => percentile(way.latencies, 0.99)
    return ways.map((way) => {
      const perCall = (ms: number) => round(ms / way.latencies.length)
      const gateway = way !== direct
      return {
        workload: way.workload,
        calls: way.latencies.length,
        p50ms: round(p50(way)),
        p99ms: round(p99(way)),
        ...(gateway ? { addedP50ms: round(p50(way) - p50(direct!)), addedP99ms: round(p99(way) - p99(direct!)) } : {}),
        callsPerSec: Math.round(way.latencies.length / (way.wallMs / 1000)),
        ...(gateway
          ? {
            gatewayCpuMsPerCall: perCall(way.cpuMs),
            gatewayMainThreadCpuMsPerCall: perCall(way.mainThreadCpuMs),
            downstreamCpuMsPerCall: perCall(way.downstreamCpuMs)
          }
          : { downstreamCpuMsPerCall: perCall(way.cpuMs) }),
        clientCpuMsPerCall: perCall(way.clientCpuUs / 1000),
        ...(gateway ? {} : { loadAvg1m: round(loadAvg1m) })
      }
    })
  } finally {
    await Promise.all(ways.map((each) => each.close().catch(() => undefined)))
  }
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-bench-"))
  // bounded in time whatever happens
  const deadline = setTimeout(() => {
    console.error(`W8: not done after ${DEADLINE_S} s`)
    for (const each of ways) {
      for (const pid of [each.pid, each.downstreamPid]) {
        try {
          if (pid !== undefined) process.kill(pid, "SIGKILL")
        } catch {
          // ended already
        }
      }
    }
    // SIGTERM: the gateway then ends its downstream server
    for (const child of httpGateways) child.kill("SIGTERM")
    rmSync(dir, { recursive: true, force: true })
    process.exit(1)
  }, DEADLINE_S * 1000)
  try {
    for (const line of await runW8(dir)) console.log(JSON.stringify(line))
  } finally {
    clearTimeout(deadline)
    rmSync(dir, { recursive: true, force: true })
  }
  process.exit(0)
}
