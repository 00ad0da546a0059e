import { describe, expect, test } from "bun:test"
import { fileURLToPath } from "node:url"
import { runToEnd } from "../support/processes.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

describe("examples/opentelemetry.ts", () => {
  test(
    "exports the gate's spans, as a tree under the caller's span, and its metrics through @effect/opentelemetry",
    async () => {
      const { code, stderr, stdout } = await runToEnd(
        [process.execPath, "--conditions=@tool-gate/source", "examples/opentelemetry.ts"],
        { cwd: root }
      )
      expect(stderr).toBe("")
      expect(code).toBe(0)
      const lines = stdout.trimEnd().split("\n")
      const tree = lines.filter((line) => !line.startsWith("toolgate.") || line === "toolgate.sweep")
      expect(tree).toEqual([
        "toolgate.sweep",
        "agent step",
        "  toolgate.gate  read_file allow reads",
        "    toolgate.authorize  read_file allow reads",
        "  toolgate.authorize  bash deny no-rm",
        "  toolgate.respond  deploy approved deploys",
        "  toolgate.gate  deploy approved deploys",
        "    toolgate.authorize  deploy pending deploys",
        "    toolgate.awaitDecision  deploy approved deploys",
        "    toolgate.authorize  deploy approved deploys",
        "  toolgate.authorize  deploy pending deploys"
      ])
      expect(lines).toEqual(expect.arrayContaining([
        "toolgate.decisions{operation=authorize,outcome=allow} 1",
        "toolgate.decisions{operation=authorize,outcome=deny} 1",
        "toolgate.decisions{operation=authorize,outcome=pending} 2",
        "toolgate.decisions{operation=authorize,outcome=approved} 1",
        "toolgate.requests.time_to_answer{status=approved} count 1",
        "toolgate.requests.pending 1",
        "toolgate.store.duration{operation=recordDecision} count 2"
      ]))
    },
    60_000
  )
})
