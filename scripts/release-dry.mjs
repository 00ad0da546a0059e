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
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const npm = process.platform === "win32" ? "npm.cmd" : "npm"

const run = (command, args) =>
  spawnSync(command, args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })

console.log("## Pending changesets (changeset status --verbose)\n")
// `npm run` puts node_modules/.bin on the PATH
const status = run("changeset", ["status", "--verbose"])
process.stdout.write(status.stdout ?? "")
process.stdout.write(status.stderr ?? "")
if (status.error !== undefined) {
  console.error(`release:dry: cannot run changeset (${status.error.message}); run it with npm run release:dry`)
  process.exit(1)
}
if (status.status !== 0) {
  // `status` fails when packages changed since the base branch without a changeset: a release
  // would publish the current versions as they are, so go on and show them.
  console.log("\n(changeset status failed: add a changeset with `npx changeset` before releasing these changes)")
}

console.log("\n## What npm would publish (npm publish --dry-run --workspaces)\n")
const publish = run(npm, ["publish", "--dry-run", "--json", "--workspaces"])
const start = publish.stdout.search(/^\{$/m)
let packed
try {
  packed = start === -1 ? undefined : JSON.parse(publish.stdout.slice(start))
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
  console.log(`${item.id}  ${item.entryCount} files, ${kB(item.size)} packed, ${kB(item.unpackedSize)} unpacked  (${where})`)
  for (const file of item.files) console.log(`    ${file.path}`)
}
console.log("\nNothing was published. To release: `npx changeset version`, commit, then `npx changeset publish`.")
