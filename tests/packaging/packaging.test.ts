/**
 * tool-gate as a new user gets it: every workspace package packed with `npm pack` (which builds it),
 * the tarballs installed into a scratch app in a temp folder outside the repository together with
 * the registry packages the README's Install section names, and nothing else. Then, from that app:
 * the README quick start as plain `.mjs` under Node; a TypeScript consumer compiled with strict
 * settings (NodeNext and Bundler resolution, `skipLibCheck: false`) and run under Node, and run
 * under Bun; the `@tool-gate/mcp` README example gating a small MCP server for the SDK's client;
 * the installed `toolgate` bin (`--help`, `policy check`, `pending --db`, `mcp`) under Node with
 * no Bun on the PATH. Skipped, loudly, only when the npm registry cannot be reached. The install
 * uses npm's cache (`--prefer-offline`), so a second run does not download again.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Exit, Scope } from "effect"
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { postgresUrl } from "../support/postgresSuite.js"
import { pgSchema, pgUrl } from "../support/sqlStores.js"

/**
 * The registry packages the README's Install section tells a user to add, per line; the scratch
 * app installs exactly these beside the tarballs. Keep the two in step.
 */
export const installLines = {
  /** the library on Node (SQLite through better-sqlite3) */
  node: ["effect@^3.22.0", "@effect/platform@^0.97.0", "@effect/sql@^0.52.0", "@effect/sql-sqlite-node@^0.53.0"],
  /** what the Bun line adds to the Node one (`bun add`; see the Bun test for how npm places it) */
  bun: [],
  /** Bun's SQLite driver, which `bun add` installs beside the Node line */
  bunDriver: ["@effect/sql-sqlite-bun@^0.50.2"],
  /** with PostgreSQL */
  postgres: ["@effect/sql-pg@^0.53.0"],
  /** with PostgreSQL in TypeScript with `skipLibCheck` off: `@effect/sql-pg`'s declarations import `pg` */
  postgresTypes: ["@types/pg@^8.11.0"],
  /** with @effect/ai */
  ai: ["@effect/ai@^0.37.0"]
} as const satisfies Record<string, ReadonlyArray<string>>

/** npm 11 runs install scripts only for the packages an app allows; the SQLite driver needs its own. */
const allowScripts = { "better-sqlite3": true }

const root = fileURLToPath(new URL("../..", import.meta.url))
const bun = process.execPath
const node = Bun.which("node")
const npm = Bun.which("npm")
const fixtures = join(root, "tests", "packaging", "app")
const tsc = join(root, "node_modules", "typescript", "bin", "tsc")
const nodeTypes = join(root, "node_modules", "@types")

/** Commands run with no trace of the repository's npm run (its npm_* settings, its node_modules/.bin). */
const cleanEnv = (extra: Record<string, string> = {}): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.toLowerCase().startsWith("npm_") && key !== "INIT_CWD") env[key] = value
  }
  // Node and npm, but no bun: the published packages and the bin must not need it.
  env.PATH = [...new Set([dirname(node ?? "/usr/bin/node"), dirname(npm ?? "/usr/bin/npm"), "/usr/bin", "/bin"])].join(
    ":"
  )
  return { ...env, ...extra }
}

interface Result {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const run = async (
  command: ReadonlyArray<string>,
  cwd: string,
  env: Record<string, string> = cleanEnv()
): Promise<Result> => {
  const child = Bun.spawn([...command], { cwd, env, stdout: "pipe", stderr: "pipe", stdin: "ignore" })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { code, stdout, stderr }
}

/** Fails with everything the command printed, so a red step says why. */
const succeeded = (what: string, result: Result): Result => {
  if (result.code !== 0) {
    throw new Error(`${what} exited ${result.code}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`)
  }
  return result
}

const registryReachable = async (): Promise<boolean> => {
  if (node === null || npm === null) return false
  const ping = Bun.spawn([npm, "ping"], { env: cleanEnv(), stdout: "ignore", stderr: "ignore", stdin: "ignore" })
  const timer = setTimeout(() => ping.kill(), 30_000)
  const code = await ping.exited
  clearTimeout(timer)
  return code === 0
}

const reachable = await registryReachable()
if (!reachable) {
  const line = "!".repeat(96)
  console.warn(
    `${line}\n!!! WARNING: the npm registry cannot be reached (npm ping failed): the packaging tests are SKIPPED !!!\n${line}`
  )
}

/**
 * better-sqlite3 downloads its binary from GitHub, which this machine cannot reach, and then
 * compiles SQLite (two minutes). The binary it built here is kept where its installer looks for
 * local prebuilds, under npm's cache, per version, Node ABI and platform, so that later installs
 * unpack it as a download would be; the repository's own copy seeds it.
 */
const prebuilds = async () => {
  const cache = succeeded("npm config get cache", await run([npm!, "config", "get", "cache"], root)).stdout.trim()
  const abi = succeeded("node -p", await run([node!, "-p", "process.versions.modules"], root)).stdout.trim()
  const dir = join(cache, "_prebuilds-tool-gate")
  const keep = async (packageDir: string) => {
    const binary = join(packageDir, "build", "Release", "better_sqlite3.node")
    if (!existsSync(binary)) return
    const { version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version: string }
    const file = join(dir, `better-sqlite3-v${version}-node-v${abi}-${process.platform}-${process.arch}.tar.gz`)
    if (existsSync(file)) return
    mkdirSync(dir, { recursive: true })
    succeeded(
      "tar",
      await run(["tar", "czf", `${file}.tmp`, "-C", packageDir, "build/Release/better_sqlite3.node"], root)
    )
    renameSync(`${file}.tmp`, file)
  }
  return { dir, keep }
}

const workspaceNames = (): Array<string> => {
  const workspace = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { workspaces: Array<string> }
  const dirs = workspace.workspaces.flatMap((pattern) =>
    [...new Bun.Glob(`${pattern}/package.json`).scanSync({ cwd: root })].map((file) => join(root, dirname(file)))
  )
  return dirs
    .map((dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; private?: boolean })
    .filter((manifest) => manifest.private !== true)
    .map((manifest) => manifest.name)
    .sort()
}

const strict = {
  strict: true,
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  skipLibCheck: false,
  target: "ES2022",
  // The user's own toolchain (TypeScript and Node's types) is not part of what they install for us.
  typeRoots: [nodeTypes],
  types: ["node"]
}

describe.skipIf(!reachable)("the packages as a user installs them", () => {
  let scratch = ""
  let app = ""
  let database = ""
  let requestId = ""
  let files: Array<string> = []
  const scope = Effect.runSync(Scope.make())

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "toolgate-packaging-"))
    expect(relative(root, scratch).startsWith("..")).toBe(true)
    const tarballs = join(scratch, "tarballs")
    app = join(scratch, "app")
    mkdirSync(tarballs)
    mkdirSync(app)
    database = join(scratch, "data", "toolgate.db")

    const names = workspaceNames()
    expect(names).toEqual([
      "@tool-gate/ai",
      "@tool-gate/cli",
      "@tool-gate/core",
      "@tool-gate/mcp",
      "@tool-gate/pg",
      "@tool-gate/server",
      "@tool-gate/sqlite"
    ])
    // Each package's prepack builds it; what it prints may share stdout with npm's, so the tarballs
    // are read from the folder rather than from `--json`.
    succeeded(
      "npm pack",
      await run([npm!, "pack", ...names.flatMap((name) => ["-w", name]), "--pack-destination", tarballs], root)
    )
    files = readdirSync(tarballs).filter((file) => file.endsWith(".tgz")).map((file) => join(tarballs, file))
    expect(files).toHaveLength(names.length)

    const local = await prebuilds()
    await local.keep(join(root, "node_modules", "better-sqlite3"))
    // The user's files: tests/packaging/app (the quick start, a TypeScript consumer, policies, and an
    // MCP client, a downstream MCP server and the @tool-gate/mcp README example).
    cpSync(fixtures, app, { recursive: true })
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "scratch-app", private: true, type: "module", allowScripts }, null, 2)
    )
    succeeded(
      "npm install",
      await run(
        [
          npm!,
          "install",
          "--prefer-offline",
          "--no-audit",
          "--no-fund",
          ...files,
          ...Object.entries(installLines).flatMap(([line, specs]) => line === "bunDriver" ? [] : specs)
        ],
        app,
        cleanEnv({ npm_config_better_sqlite3_local_prebuilds: local.dir })
      )
    )
    await local.keep(join(app, "node_modules", "better-sqlite3"))
  }, 600_000)

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    if (scratch !== "") rmSync(scratch, { recursive: true, force: true })
  })

  test("every tarball carries its build, README and LICENSE, exports built files only, and no tsconfig", async () => {
    for (const file of files) {
      const entries = succeeded("tar tzf", await run(["tar", "tzf", file], scratch)).stdout.trim().split("\n")
      const manifest = JSON.parse(
        succeeded("tar xzf", await run(["tar", "xzfO", file, "package/package.json"], scratch)).stdout
      ) as {
        name: string
        license?: string
        engines?: { node?: string }
        repository?: unknown
        exports?: Record<string, unknown>
      }
      const name = manifest.name
      expect({ name, readme: entries.includes("package/README.md"), license: entries.includes("package/LICENSE") })
        .toEqual({
          name,
          readme: true,
          license: true
        })
      expect({ name, tsconfig: entries.filter((entry) => /\/tsconfig[^/]*\.json$/.test(entry)) }).toEqual({
        name,
        tsconfig: []
      })
      expect({
        name,
        license: manifest.license,
        node: manifest.engines?.node,
        repository: manifest.repository !== undefined
      }).toEqual({
        name,
        license: "MIT",
        node: ">=20",
        repository: true
      })
      // What a consumer resolves (every condition but the repository's own source one) is built JavaScript and declarations.
      const targets = JSON.stringify(
        manifest.exports ?? {},
        (key, value) => (key === "@tool-gate/source" ? undefined : value)
      )
      expect({ name, sources: targets.match(/"[^"]*\.ts"/g)?.filter((target) => !target.endsWith(".d.ts\"")) ?? [] })
        .toEqual({
          name,
          sources: []
        })
    }
  }, 60_000)

  test("the README quick start runs as plain .mjs under Node", async () => {
    const result = succeeded("node quickstart.mjs", await run([node!, "quickstart.mjs", database], app))
    const [ran, allow, deny, paused] = result.stdout.trim().split("\n")
    expect([ran, allow, deny]).toEqual(["ran npm test", "Allow", "Deny"])
    expect(paused).toMatch(/^paused req_[0-9a-f-]{36}$/)
    requestId = paused!.slice("paused ".length)
    expect(result.stderr).toBe("")
  }, 120_000)

  const expected = (postgres: boolean) =>
    [
      "memory: Allow Deny pending allowed",
      "sqlite: Allow Deny pending allowed",
      ...(postgres ? ["postgres: Allow Deny pending allowed"] : []),
      "ai: deploy",
      "mcp: DownstreamUnavailable"
    ].join("\n")

  /** A fresh PostgreSQL schema for the consumer when the suite has a server (`TOOLGATE_PG_URL`). */
  const consumerEnv = async (): Promise<Record<string, string>> =>
    pgUrl === undefined
      ? cleanEnv()
      : cleanEnv({ CONSUMER_PG_URL: await Effect.runPromise(Scope.extend(pgSchema(pgUrl), scope)) })

  test(
    "a strict TypeScript consumer type-checks (NodeNext and Bundler, skipLibCheck off) and runs under Node",
    async () => {
      writeFileSync(
        join(app, "tsconfig.nodenext.json"),
        JSON.stringify({
          compilerOptions: { ...strict, module: "NodeNext", moduleResolution: "NodeNext", outDir: "out" },
          files: ["consumer.ts"]
        })
      )
      writeFileSync(
        join(app, "tsconfig.bundler.json"),
        JSON.stringify({
          compilerOptions: { ...strict, module: "ESNext", moduleResolution: "Bundler", noEmit: true },
          files: ["consumer.ts"]
        })
      )
      succeeded("tsc (Bundler)", await run([node!, tsc, "-p", "tsconfig.bundler.json"], app))
      succeeded("tsc (NodeNext)", await run([node!, tsc, "-p", "tsconfig.nodenext.json"], app))
      postgresUrl("step of the packaged consumer")
      const env = await consumerEnv()
      const result = succeeded("node out/consumer.js", await run([node!, "out/consumer.js"], app, env))
      expect(result.stdout.trim()).toBe(expected(pgUrl !== undefined))
    },
    180_000
  )

  test("the same consumer runs under Bun", async () => {
    const env = await consumerEnv()
    // Bun's installer puts one copy of the driver beside the app's Effect packages, though its
    // peer ranges name an older Effect 3 minor; npm refuses that (ERESOLVE), so the test places
    // the driver's tarball the way `bun add` does.
    for (const spec of installLines.bunDriver) {
      const packed = succeeded(
        `npm pack ${spec}`,
        await run([npm!, "pack", spec, "--pack-destination", scratch], scratch)
      )
      const tarball = join(scratch, packed.stdout.trim().split("\n").at(-1)!)
      const target = join(app, "node_modules", spec.slice(0, spec.lastIndexOf("@")))
      mkdirSync(target, { recursive: true })
      succeeded("tar xzf", await run(["tar", "xzf", tarball, "-C", target, "--strip-components=1"], scratch))
    }
    const result = succeeded("bun consumer.ts", await run([bun, "consumer.ts"], app, env))
    expect(result.stdout.trim()).toBe(expected(pgUrl !== undefined))
  }, 120_000)

  test("the installed @tool-gate/sqlite checkpoints in its worker thread, under Node and under Bun", async () => {
    for (const runtime of [node!, bun]) {
      const db = join(scratch, `checkpoints-${basename(runtime)}.db`)
      const result = succeeded(`${runtime} checkpoints.mjs`, await run([runtime, "checkpoints.mjs", db], app))
      expect(result.stdout.trim()).toBe("checkpointed")
      expect(result.stderr).toBe("")
    }
  }, 60_000)

  /**
   * What tests/packaging/app/mcp-client.mjs printed: the tools it listed, the two calls' results,
   * and its transport's errors (a line on the gateway's stdout that is not an MCP message is one).
   */
  interface McpRun {
    readonly tools: ReadonlyArray<string>
    readonly allowed: CallToolResult
    readonly denied: CallToolResult
    readonly errors: ReadonlyArray<string>
  }
  interface CallToolResult {
    readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
    readonly isError?: boolean
  }

  /**
   * The SDK's client (mcp-client.mjs, under Node with no Bun) through the gateway that `gateway`
   * starts; with what it got, the calls notes-server.mjs ran (it logs them to `log`).
   */
  const throughGateway = async (gateway: ReadonlyArray<string>, log: string) => {
    const result = succeeded("node mcp-client.mjs", await run([node!, "mcp-client.mjs", ...gateway], app))
    const ran = existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").map((line) => JSON.parse(line)) : []
    return { got: JSON.parse(result.stdout) as McpRun, ran }
  }

  const read = { content: [{ type: "text", text: "note groceries: buy milk" }] }

  test("the @tool-gate/mcp README example gates an MCP server for the SDK's client under Node", async () => {
    const log = join(scratch, "mcp-example-calls.log")
    const { got, ran } = await throughGateway(
      [node!, "mcp-gateway.mjs", join(scratch, "mcp-example.db"), log],
      log
    )
    expect(got.tools).toEqual(["delete_note", "read_note"])
    expect(got.allowed).toEqual(read)
    expect(got.denied.isError).toBe(true)
    expect(got.denied.content[0]?.text).toContain("the policy default is deny")
    expect(ran).toEqual([{ name: "read_note", args: { name: "groceries" } }])
    expect(got.errors).toEqual([])
  }, 120_000)

  describe("the installed toolgate bin, on Node with no Bun", () => {
    const toolgate = () => join(app, "node_modules", ".bin", "toolgate")

    test("--help lists the commands", async () => {
      const result = succeeded("toolgate --help", await run([toolgate(), "--help"], app))
      for (const command of ["serve", "pending", "approve", "deny", "audit", "policy", "mcp"]) {
        expect(result.stdout).toMatch(new RegExp(`^ *- ${command}\\b`, "m"))
      }
    }, 120_000)

    test("policy check: 0 for a valid policy, 1 with every problem for an invalid one", async () => {
      succeeded("toolgate policy check", await run([toolgate(), "policy", "check", "policy.yaml"], app))
      const bad = await run([toolgate(), "policy", "check", "bad-policy.yaml"], app)
      expect(bad.code).toBe(1)
      expect(`${bad.stdout}${bad.stderr}`).toContain("bogus")
    }, 120_000)

    test("pending --db lists the request the quick start left in its SQLite file", async () => {
      if (requestId === "") throw new Error("the quick start left no pending request: see its own test")
      const result = succeeded("toolgate pending --db", await run([toolgate(), "pending", "--db", database], app))
      expect(result.stdout).toContain(requestId)
      expect(result.stdout).toContain("deploy")
    }, 120_000)

    test("mcp gates an MCP server for the SDK's client: its tools listed, an allowed call, a denied one", async () => {
      const log = join(scratch, "mcp-bin-calls.log")
      const db = join(scratch, "mcp-bin.db")
      const { got, ran } = await throughGateway(
        [toolgate(), "mcp", "--policy", "mcp-policy.yaml", "--db", db, "--", "node", "notes-server.mjs", log],
        log
      )
      expect(got.tools).toEqual(["delete_note", "read_note"])
      expect(got.allowed).toEqual(read)
      expect(got.denied.isError).toBe(true)
      expect(got.denied.content).toHaveLength(1)
      expect(got.denied.content[0]?.text).toContain("keep-notes")
      expect(got.denied.content[0]?.text).toContain("notes are never deleted")
      expect(ran).toEqual([{ name: "read_note", args: { name: "groceries" } }])
      expect(got.errors).toEqual([])
      // the CLI's own store: its audit trail has both decisions
      const audit = succeeded("toolgate audit --db", await run([toolgate(), "audit", "--db", db, "--json"], app))
      const events = audit.stdout.trim().split("\n").map((line) =>
        JSON.parse(line) as { toolName: string; outcome: string; rule: string }
      )
      expect(events.map(({ outcome, rule, toolName }) => [toolName, outcome, rule])).toEqual([
        ["read_note", "allow", "allow[0]"],
        ["delete_note", "deny", "keep-notes"]
      ])
    }, 120_000)

    test.skipIf(process.getuid?.() !== 0 || !existsSync("/usr/sbin/runuser"))(
      "--help as an ordinary user (nobody), who cannot write the install",
      async () => {
        chmodSync(scratch, 0o755)
        const result = await run(
          ["/usr/sbin/runuser", "-u", "nobody", "--", toolgate(), "--help"],
          app,
          cleanEnv({ HOME: "/nonexistent" })
        )
        succeeded("toolgate --help as nobody", result)
        expect(result.stdout).toContain("pending")
      },
      120_000
    )
  })
})
