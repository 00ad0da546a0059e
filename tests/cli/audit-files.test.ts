/**
 * The recipe of docs/audit.md that keeps the audit trail as JSON Lines files with rotation, run
 * as written (the script is read from the page): `toolgate audit --follow --json` into GNU
 * `split`, stopped and started again while events keep coming; every event lands in exactly one
 * file, in order, no file holds more than its share, and every line is valid under the
 * published JSON Schema.
 */
import addFormats from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { afterAll, beforeAll, expect, test } from "bun:test"
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { bin, type Fixture, fixture, run } from "./support/cli.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const page = readFileSync(join(root, "docs/audit.md"), "utf8")
const script = page.match(/```sh\n(#!\/bin\/sh\n[\s\S]*?)```/)![1]!

const schema = JSON.parse(readFileSync(join(root, "packages/core/audit-event.schema.json"), "utf8"))
const ajv = new Ajv2020({ strict: true })
addFormats.default(ajv)
const validate = ajv.compile(schema)

let f: Fixture
let dir: string
let pidFile: string
let recipe: string
let shims: string

beforeAll(async () => {
  f = await fixture()
  dir = join(f.dir, "audit")
  recipe = join(f.dir, "toolgate-audit-files")
  writeFileSync(recipe, script)
  chmodSync(recipe, 0o755)
  // `toolgate` on the PATH, as installed: the repository's launcher, noting its process id so the
  // test can stop it (and only it) as a service manager would
  shims = join(f.dir, "bin")
  pidFile = join(f.dir, "toolgate.pid")
  mkdirSync(shims)
  writeFileSync(join(shims, "toolgate"), `#!/bin/sh\necho $$ > "${pidFile}"\nexec node "${bin}" "$@"\n`)
  chmodSync(join(shims, "toolgate"), 0o755)
}, 60_000)

afterAll(async () => {
  await f.close()
})

/** The files in name order, and their lines. */
const files = () =>
  (existsSync(dir) ? readdirSync(dir) : []).filter((name) => name.endsWith(".jsonl")).sort().map((name) => ({
    name,
    lines: readFileSync(join(dir, name), "utf8").split("\n").filter((line) => line !== "")
  }))

const lineCount = () => files().reduce((sum, file) => sum + file.lines.length, 0)

/** Waits (up to 30 s) until the files hold `count` lines. */
const until = async (count: number) => {
  const deadline = Date.now() + 30_000
  while (lineCount() < count) {
    if (Date.now() > deadline) throw new Error(`the files hold ${lineCount()} lines, not ${count}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const startRecipe = (): { readonly child: ChildProcess; readonly exited: Promise<number | null> } => {
  writeFileSync(pidFile, "")
  const child = spawn(recipe, ["--db", f.db], {
    env: { ...process.env, PATH: `${shims}:${process.env["PATH"]}`, AUDIT_DIR: dir, AUDIT_LINES: "3" },
    stdio: ["ignore", "ignore", "pipe"]
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, exited }
}

/** Stops the run as a service manager's SIGTERM to toolgate would: split writes what it has and ends. */
const stopRecipe = async (running: ReturnType<typeof startRecipe>) => {
  const deadline = Date.now() + 30_000
  while (readFileSync(pidFile, "utf8").trim() === "" && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  process.kill(Number(readFileSync(pidFile, "utf8").trim()), "SIGTERM")
  expect(await running.exited).toBe(0)
}

const evaluate = async (ids: ReadonlyArray<string>) => {
  for (const id of ids) await run(f.gate.evaluate({ id, name: "ls", sessionKey: "files", args: { id } }))
}

test("the rotation recipe: stopped and started again, every event in exactly one file, in order", async () => {
  await evaluate(["a1", "a2", "a3", "a4", "a5"])
  const first = startRecipe()
  await until(5)
  await evaluate(["b1", "b2", "b3", "b4"])
  await until(9)
  await stopRecipe(first)

  // committed while nothing was reading the log
  await evaluate(["c1", "c2", "c3", "c4"])
  const second = startRecipe()
  await until(13)
  await evaluate(["d1"])
  await until(14)
  await stopRecipe(second)

  const all = files()
  const events = all.flatMap((file) => file.lines.map((line) => JSON.parse(line)))
  expect(events.map((event) => event.seq)).toEqual(Array.from({ length: 14 }, (_, i) => i + 1))
  expect(events.map((event) => event.args.id)).toEqual([
    "a1",
    "a2",
    "a3",
    "a4",
    "a5",
    "b1",
    "b2",
    "b3",
    "b4",
    "c1",
    "c2",
    "c3",
    "c4",
    "d1"
  ])
  for (const file of all) {
    expect({ name: file.name, lines: file.lines.length <= 3 }).toEqual({ name: file.name, lines: true })
  }
  // two runs, each its own series named by the first seq it could hold
  expect(new Set(all.map((file) => file.name.slice(0, "audit-000000000001".length)))).toEqual(
    new Set(["audit-000000000001", "audit-000000000010"])
  )
  for (const event of events) expect(validate(event)).toBe(true)
}, 120_000)
