/**
 * A SQLite store keeps its temporary files in memory (`PRAGMA temp_store = MEMORY`). A statement
 * inside a transaction keeps the pages it rewrites in a statement journal, so that it alone can be
 * undone; past 64 KiB SQLite spills that journal to a file it creates (and deletes) in the
 * temporary directory, for every such transaction. A batch of answers is such a transaction: under
 * W7 each one created, wrote and deleted a file beside its commit.
 */
import { describe, expect, it } from "bun:test"
import { mkdtempSync, rmSync, watch } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const worker = join(import.meta.dir, "tempFilesWorker.ts")

describe("temporary files (SQLite)", () => {
  it("a batch of answers rewriting many pages creates no file in the temporary directory", async () => {
    const home = mkdtempSync(join(tmpdir(), "toolgate-temp-files-"))
    const temp = mkdtempSync(join(tmpdir(), "toolgate-sqlite-tmp-"))
    const created: Array<string> = []
    const watcher = watch(temp, (_event, name) => created.push(String(name)))
    try {
      const child = Bun.spawn(
        [process.execPath, "--conditions=@tool-gate/source", worker, join(home, "gate.db"), "48"],
        { env: { ...process.env, TMPDIR: temp, SQLITE_TMPDIR: temp }, stdout: "pipe", stderr: "pipe" }
      )
      const [out, err, code] = await Promise.all([
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
        child.exited
      ])
      expect({ code, err }).toEqual({ code: 0, err: "" })
      expect(JSON.parse(out.trim())).toEqual({ event: "done", answered: 48 })
      // the watch's last events arrive on the event loop
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(created).toEqual([])
    } finally {
      watcher.close()
      rmSync(home, { recursive: true, force: true })
      rmSync(temp, { recursive: true, force: true })
    }
  }, 60_000)
})
