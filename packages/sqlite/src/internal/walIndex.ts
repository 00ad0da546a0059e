/**
 * SQLite's WAL index (the `-shm` file beside a database in WAL mode), read beside SQLite through
 * descriptors that are never closed while the file exists, and what its documented header says of
 * the log (https://www.sqlite.org/walformat.html).
 */
import { closeSync, fstatSync, openSync, readSync, type Stats, statSync } from "node:fs"
import { endianness } from "node:os"

/**
 * The descriptors of `-shm` files read beside SQLite (by the checkpoint workers, by the log's
 * flushes), opened and owned by the main thread: a descriptor a worker opened is closed when its
 * thread ends (Node does that), and closing any descriptor of a file drops every POSIX lock the
 * process holds on it, SQLite's own included (any connection of this process to the database, on
 * any thread): another process would then find the index unlocked and rebuild it under those
 * connections (a SIGBUS, or a torn index). So one is closed only once its file is deleted, which
 * SQLite does when the last connection to the database closes (no lock of ours is left on it then),
 * and every reader of that file reads through it.
 */
const opened = new Set<number>()

/**
 * The descriptor of `file` to read: the one already open for this file (the same file, not
 * another at its path), else a new one; `undefined` when there is no such file yet. Closes the
 * open descriptors whose file is deleted.
 */
export const shmDescriptor = (file: string): number | undefined => {
  let current: Stats | undefined
  try {
    current = statSync(file)
  } catch {
    current = undefined // no index yet
  }
  let found: number | undefined
  for (const fd of opened) {
    try {
      const stats = fstatSync(fd)
      if (found === undefined && current !== undefined && stats.ino === current.ino && stats.dev === current.dev) {
        found = fd
        continue
      }
      if (stats.nlink > 0) continue
      closeSync(fd)
    } catch {
      // closed already: nothing to do
    }
    opened.delete(fd)
  }
  if (found !== undefined || current === undefined) return found
  try {
    const fd = openSync(file, "r")
    opened.add(fd)
    return fd
  } catch {
    return undefined
  }
}

const header = Buffer.alloc(20)
const u32 = endianness() === "LE" ? (at: number) => header.readUInt32LE(at) : (at: number) => header.readUInt32BE(at)

/**
 * The log's last valid frame (`mxFrame`, byte 16, native byte order) read through `fd`, a
 * descriptor from `shmDescriptor`; a log started over counts from 0. `undefined` when the header
 * cannot be read (a file just created).
 */
export const lastFrame = (fd: number): number | undefined => {
  try {
    return readSync(fd, header, 0, 20, 0) < 20 ? undefined : u32(16)
  } catch {
    return undefined
  }
}
