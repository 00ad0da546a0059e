/**
 * Preloaded by bunfig.toml for every `bun` run in this repository. Here Bun runs the workspace
 * packages' TypeScript sources, selected by the `@tool-gate/source` export condition; without it
 * the packages resolve to their built `dist/`, which may be missing or older than the sources, so
 * this stops at once rather than run stale code.
 */
const resolved = (() => {
  try {
    return import.meta.resolve("@tool-gate/core")
  } catch {
    return "nothing"
  }
})()

if (!resolved.endsWith("/packages/core/src/index.ts")) {
  process.stderr.write(
    `@tool-gate/core resolved to ${resolved}, not its sources: inside this repository run bun with ` +
      "--conditions=@tool-gate/source (npm test, npm run demo and npm run bench do)\n"
  )
  process.exit(2)
}
