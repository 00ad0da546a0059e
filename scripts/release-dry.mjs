#!/usr/bin/env node
/**
 * `npm run release:dry`: what a release would publish, publishing nothing.
 *
 * 1. The pending changesets and the versions `changeset version` would give (all @tool-gate/*
 *    packages move in step: a `fixed` group in .changeset/config.json).
 * 2. Each workspace package as `npm publish --dry-run` packs it (its `prepack` builds it first):
 *    name, version, files and size.
 * 3. Whether that version is already on the registry (`changeset publish` skips those).
 *
 * Exit code: 0 when every step ran, 1 when packing failed (a release would fail too).
 */
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const npm = process.platform === "win32" ? "npm.cmd" : "npm"

const run = (command, args) => spawnSync(command, args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })

console.log("## Pending changesets (changeset status --verbose)\n")
// `npm run` puts node_modules/.bin on the PATH
const status = run("changeset", ["status", "--verbose"])
if (status.error !== undefined) {
  console.error(`release:dry: cannot run changeset (${status.error.message}); run it with npm run release:dry`)
  process.exit(1)
}
if (status.status === 0) process.stdout.write(status.stdout + status.stderr)
else {
  // `status` compares with the base branch: it fails when packages changed since then without a
  // changeset, or when the clone has no base branch. The changesets themselves are still here.
  const reason = `${status.stdout}${status.stderr}`.split("\n").find((line) => line.includes("error")) ?? ""
  console.log(`changeset status failed (it compares with the base branch): ${reason.replace(/^.*?error\s+/, "")}`)
  const dir = join(root, ".changeset")
  const pending = readdirSync(dir).filter((file) => file.endsWith(".md") && file !== "README.md")
  if (pending.length === 0) {
    console.log("No pending changesets: the packages would be published at their current versions.")
  }
  for (const file of pending) {
    const front = /^---\n([\s\S]*?)\n---/.exec(readFileSync(join(dir, file), "utf8"))?.[1] ?? ""
    console.log(`.changeset/${file}: ${front.split("\n").join(", ")}`)
  }
}

console.log("\n## What npm would publish (npm publish --dry-run --workspaces)\n")
const publish = run(npm, ["publish", "--dry-run", "--json", "--workspaces"])
// one pretty-printed object for all packages, or one per package when they run a prepack
let packed
try {
  const objects = [...publish.stdout.matchAll(/^\{\n[\s\S]*?\n\}$/gm)].map(([text]) => JSON.parse(text))
  packed = objects.length === 0 ? undefined : Object.assign({}, ...objects)
} catch {
  packed = undefined
}
if (publish.status !== 0 || packed === undefined) {
  process.stdout.write(publish.stdout)
  process.stderr.write(publish.stderr)
  console.error("\nrelease:dry: npm publish --dry-run failed; a release would fail too")
  process.exit(1)
}

const kB = (bytes) => `${(bytes / 1000).toFixed(1)} kB`
for (const item of Object.values(packed)) {
  const onRegistry = run(npm, ["view", `${item.id}`, "version", "--json"])
  const where = onRegistry.status === 0 && onRegistry.stdout.trim() !== ""
    ? "already on the registry: changeset publish skips it"
    : /E404|404 Not Found/.test(onRegistry.stderr)
    ? "new: would be published"
    : "registry not reachable: cannot tell whether it is published"
  console.log(
    `${item.id}  ${item.entryCount} files, ${kB(item.size)} packed, ${kB(item.unpackedSize)} unpacked  (${where})`
  )
  for (const file of item.files) console.log(`    ${file.path}`)
}
const warnings = new Set(
  publish.stderr.split("\n").filter((line) => line.startsWith("npm warn") && !line.includes("logged in"))
)
if (warnings.size > 0) console.log(`\nnpm's warnings while packing:\n${[...warnings].join("\n")}`)
console.log("\nNothing was published. To release: `npx changeset version`, commit, then `npx changeset publish`.")
