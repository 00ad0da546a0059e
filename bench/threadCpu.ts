/**
 * CPU time of this process's main thread (the one that runs JavaScript and, on synchronous SQLite,
 * its statements), in ms, from `/proc/self/task/<pid>/stat` (Linux; `undefined` elsewhere).
 * `process.cpuUsage` counts every thread, so the difference is what other threads did: the
 * runtime's (garbage collection, JIT) and SQLite's checkpoint worker.
 */
import { readFileSync } from "node:fs"

const TICKS_PER_MS = 100 / 1000 // USER_HZ, 100 on Linux

export const mainThreadCpuMs = (): number | undefined => {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_MS
  } catch {
    return undefined
  }
}

/** ms of main-thread CPU per operation since `since` (a `mainThreadCpuMs()` reading). */
export const mainThreadCpuMsPer = (since: number | undefined, operations: number): number | undefined => {
  const now = mainThreadCpuMs()
  return since === undefined || now === undefined ? undefined : Math.round((now - since) / operations * 1000) / 1000
}
