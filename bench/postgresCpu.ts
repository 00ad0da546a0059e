/**
 * CPU time of the PostgreSQL server on this machine, in ms: every process named `postgres` in
 * `/proc` (the backends and the server's helpers), so that a bench against a local server says
 * how much work the database did beside the client's. Linux only (`undefined` elsewhere); counts
 * every local server, so run one at a time.
 */
import { readdirSync, readFileSync } from "node:fs"

const MS_PER_TICK = 1000 / 100 // USER_HZ, 100 on Linux

export const postgresCpuMs = (): number | undefined => {
  let pids: Array<string>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name))
  } catch {
    return undefined
  }
  let ticks = 0
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) !== "postgres") continue
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // a process that ended between the listing and the read
    }
  }
  return ticks * MS_PER_TICK
}

/** ms of the server's CPU per operation since `since` (a `postgresCpuMs()` reading). */
export const postgresCpuMsPer = (since: number | undefined, operations: number): number | undefined => {
  const now = postgresCpuMs()
  return since === undefined || now === undefined ? undefined : Math.round((now - since) / operations * 1000) / 1000
}
