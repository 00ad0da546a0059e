/**
 * What this process holds of a file, from Linux's /proc: its POSIX locks (SQLite's own among
 * them) and its open descriptors. Closing any descriptor of a file drops every POSIX lock the
 * process holds on it, so tests of code that opens SQLite's files beside SQLite check both.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs"

/** POSIX locks this process holds on `file` (from /proc/locks). */
export const locksHeldOn = (file: string) => {
  const inode = `:${statSync(file).ino} `
  return readFileSync("/proc/locks", "utf8").split("\n")
    .filter((line) => line.includes(" POSIX ") && line.includes(` ${process.pid} `) && line.includes(inode)).length
}

/** Descriptors this process has open on `target` (a path, or `path (deleted)`). */
export const descriptorsOf = (target: string) =>
  readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === target
    } catch {
      return false // closed since it was listed
    }
  }).length
