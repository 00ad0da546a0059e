/**
 * The published `toolgate` bin, installed as a user installs it: `npm pack` of @tool-gate/cli
 * (its `prepack` builds the bundle), `npm i -g --prefix` of the tarball in a temp folder outside
 * the repository (its registry dependencies come from the registry), then the installed bin under
 * plain Node, with no Bun on the PATH and nothing of the repository in reach: `--help`, `policy
 * check` and `pending --db` as this user and, when this is root, as `nobody`, who can write neither
 * the install nor its folders; `serve` with its web console; `demo` in an empty folder.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { spawnSync } from "node:child_process"
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Fixture, fixture } from "./support/cli.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const cli = join(root, "packages/cli")

/** This environment without npm's and Bun's own variables and the user's TOOLGATE_* settings. */
const cleanEnv = (extra: Record<string, string> = {}) => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !/^(npm_|BUN_|TOOLGATE_)/i.test(key)) env[key] = value
  }
  return { ...env, ...extra }
}

const npm = (args: ReadonlyArray<string>, cwd: string, timeout = 120_000) =>
  spawnSync("npm", args, { cwd, env: cleanEnv(), encoding: "utf8", timeout })

const registry = npm(["ping"], tmpdir(), 30_000)
const offline = registry.status !== 0
if (offline) {
  console.warn(
    "!!! SKIPPED: the installed toolgate bin tests: the npm registry cannot be reached " +
      `(npm ping: ${(registry.stderr || String(registry.error)).trim()}) !!!`
  )
}

const isRoot = process.getuid?.() === 0

// Plain Node and the system's tools only: neither Bun nor the repository's node_modules/.bin.
const node = spawnSync("node", ["-p", "process.execPath"], { encoding: "utf8" }).stdout.trim()
const path = [dirname(node), "/usr/local/bin", "/usr/bin", "/bin"].join(":")

let dir: string
let prefix: string
let store: Fixture
let requestId: string

beforeAll(async () => {
  if (offline) return
  // world-readable, so `nobody` can reach the installed bin and its own folder below
  dir = mkdtempSync(join(tmpdir(), "toolgate-bin-"))
  chmodSync(dir, 0o755)
  prefix = join(dir, "prefix")
  const packed = npm(["pack", "--json", "--pack-destination", dir], cli)
  if (packed.status !== 0) throw new Error(`npm pack failed: ${packed.stderr}`)
  const tarball = join(dir, JSON.parse(packed.stdout)[0].filename)
  const installed = npm(["install", "--global", "--prefix", prefix, "--no-audit", "--no-fund", tarball], dir, 600_000)
  if (installed.status !== 0) throw new Error(`npm install --global failed: ${installed.stderr}`)
  store = await fixture()
  requestId = await store.pause({ id: "c1", name: "bash", sessionKey: "s1", args: { command: "ls" } })
}, 660_000)

afterAll(async () => {
  await store?.close()
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

/** Runs the installed `toolgate ARGS` under `node`, as `user` when given (this process is root). */
const installed = (args: ReadonlyArray<string>, options: { readonly cwd: string; readonly user?: string }) => {
  const command = ["env", "-i", `PATH=${path}`, `HOME=${options.cwd}`, "node", join(prefix, "bin", "toolgate"), ...args]
  const [file, ...rest] = options.user === undefined ? command : ["runuser", "-u", options.user, "--", ...command]
  const result = spawnSync(file!, rest, { cwd: options.cwd, encoding: "utf8", timeout: 60_000 })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

describe.skipIf(offline)("the installed toolgate bin", () => {
  test("the installed bin is the bundle, with the console's files beside it and the SQLite driver", () => {
    const pkg = join(prefix, "lib", "node_modules", "@tool-gate", "cli")
    expect(readdirSync(pkg).sort()).toEqual([
      "CHANGELOG.md",
      "LICENSE",
      "README.md",
      "dist",
      "node_modules",
      "package.json",
      "src"
    ])
    // every file the page loads (the page, its style and its modules), not the types beside them
    const shipped = readdirSync(join(root, "packages", "server", "src", "console"))
      .filter((name) => !name.endsWith(".d.ts"))
      .sort()
    expect(shipped).toEqual(expect.arrayContaining(["console.css", "console.js", "hiddenCharacters.js", "index.html"]))
    expect(readdirSync(join(pkg, "dist", "console")).sort()).toEqual(shipped)
    expect(statSync(join(prefix, "bin", "toolgate")).isFile()).toBe(true)
    // what the installed bin links to: the bundle itself, no launcher that could build
    const linked = spawnSync("readlink", ["-f", join(prefix, "bin", "toolgate")], { encoding: "utf8" }).stdout.trim()
    expect(linked).toBe(join(pkg, "dist", "toolgate.mjs"))
    // its registry dependency, the native SQLite driver, came with it
    const dependencies = readdirSync(join(pkg, "node_modules"))
    expect(dependencies).toContain("better-sqlite3")
    // and nothing else of tool-gate's: the bundle carries the workspace and Effect (the library
    // entry points' peers are optional, for apps that import @tool-gate/cli)
    expect(dependencies.filter((name) => name === "effect" || name.startsWith("@effect") || name === "@tool-gate"))
      .toEqual([])
    // and the runs below have Node on their PATH but no Bun
    const which = (name: string) =>
      spawnSync("sh", ["-c", `command -v ${name}`], { env: { PATH: path }, encoding: "utf8" }).status
    expect({ node: which("node") === 0, bun: which("bun") === 0 }).toEqual({ node: true, bun: false })
  })

  test("serve: the API over the store and the web console, from the files shipped beside the bundle", async () => {
    const tokens = JSON.stringify([{ name: "ana", token: "t-bin-0123456789abcdef0123456789", role: "approver" }])
    const command = ["env", "-i", `PATH=${path}`, `TOOLGATE_TOKENS=${tokens}`, "node", join(prefix, "bin", "toolgate")]
    const server = Bun.spawn([...command, "serve", "--db", store.db, "--port", "0"], {
      cwd: dir,
      stdout: "pipe",
      stderr: "pipe"
    })
    try {
      let text = ""
      const reader = server.stdout.pipeThrough(new TextDecoderStream()).getReader()
      while (!/serving (http:\S+)/.test(text)) {
        const { done, value } = await reader.read()
        if (done) throw new Error(`toolgate serve ended: ${await new Response(server.stderr).text()}`)
        text += value
      }
      const origin = text.match(/serving (http:\S+)/)![1]!
      const page = await fetch(`${origin}/console`)
      expect(page.status).toBe(200)
      expect(await page.text()).toStartWith("<!DOCTYPE html>")
      expect((await fetch(`${origin}/console/console.js`)).status).toBe(200)
    } finally {
      server.kill("SIGTERM")
      await server.exited
    }
  }, 60_000)

  test("demo: the agent pauses, is approved by another toolgate process and resumes, from the bundle alone", () => {
    // an empty folder outside the repository: the demo's agent ships inside the bundle
    const home = join(dir, "home-demo")
    mkdirSync(home)
    const demo = installed(["demo"], { cwd: home })
    expect({ code: demo.code, stderr: demo.stderr }).toEqual({ code: 0, stderr: "" })
    expect(demo.stdout).toMatch(/\$ npx toolgate approve req_[0-9a-f-]{36} --db \.toolgate\/demo\.db\napproved req_/)
    expect(demo.stdout).toContain("done after 2 model turns.")
    expect(readdirSync(join(home, ".toolgate"))).toContain("demo.db")
  }, 120_000)

  const users = isRoot ? [undefined, "nobody"] : [undefined]
  for (const user of users) {
    const who = user ?? (isRoot ? "root" : "this user")

    test(`as ${who}: --help, policy check, pending --db`, () => {
      // a folder of the user's own, outside the repository, with a copy of the example policy
      const home = join(dir, `home-${who}`)
      mkdirSync(home)
      copyFileSync(join(root, "examples/policy.yaml"), join(home, "policy.yaml"))
      if (user !== undefined) {
        const ids = spawnSync("id", ["-u", user], { encoding: "utf8" }).stdout.trim()
        const gid = spawnSync("id", ["-g", user], { encoding: "utf8" }).stdout.trim()
        chownSync(home, Number(ids), Number(gid))
        // the store: the user opens it for writing (SQLite's WAL), so it is theirs
        for (const name of readdirSync(store.dir)) chownSync(join(store.dir, name), Number(ids), Number(gid))
        chownSync(store.dir, Number(ids), Number(gid))
      }

      const help = installed(["--help"], { cwd: home, ...(user === undefined ? {} : { user }) })
      expect({ code: help.code, stderr: help.stderr }).toEqual({ code: 0, stderr: "" })
      expect(help.stdout).toContain("toolgate 0.1.0")
      expect(help.stdout).toContain("pending")

      const policy = installed(["policy", "check", "policy.yaml"], {
        cwd: home,
        ...(user === undefined ? {} : { user })
      })
      expect({ code: policy.code, stderr: policy.stderr }).toEqual({ code: 0, stderr: "" })
      expect(policy.stdout.trim()).toMatch(
        /^policy\.yaml: valid policy, \d+ rule\(s\), 0 warning\(s\), version [0-9a-f]{12}$/
      )

      const pending = installed(["pending", "--db", store.db, "--json"], {
        cwd: home,
        ...(user === undefined ? {} : { user })
      })
      expect({ code: pending.code, stderr: pending.stderr }).toEqual({ code: 0, stderr: "" })
      const listed = JSON.parse(pending.stdout)
      expect(listed.map((request: { readonly requestId: string }) => request.requestId)).toEqual([requestId])
    }, 120_000)
  }
})
