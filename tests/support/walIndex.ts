/**
 * What SQLite's WAL index (the `-shm` file beside a database in WAL mode) says of the log, from its
 * documented header (https://www.sqlite.org/walformat.html): `frames`, the last valid frame of the
 * log (`mxFrame`, byte 16), and `backfilled`, how many of them a checkpoint has copied back into
 * the database (`nBackfill`, byte 96), both in native byte order. A restarted log counts from 0.
 */
import { closeSync, openSync, readSync } from "node:fs"
import { endianness } from "node:os"

export interface WalIndex {
  readonly frames: number
  readonly backfilled: number
}

/**
 * Closing its descriptor drops this process's POSIX locks on `-shm`, SQLite's too: for tests where
 * no other process opens the database while this one's connections are open.
 */
export const walIndex = (filename: string): WalIndex => {
  const header = Buffer.alloc(100)
  const fd = openSync(`${filename}-shm`, "r")
  try {
    readSync(fd, header, 0, 100, 0)
  } finally {
    closeSync(fd)
  }
  const u32 = (at: number) => endianness() === "LE" ? header.readUInt32LE(at) : header.readUInt32BE(at)
  return { frames: u32(16), backfilled: u32(96) }
}
