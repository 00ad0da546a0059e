/**
 * `BENCH_CHECKPOINTS=background` (or `inline`) runs a SQLite bench with WAL checkpoints in a worker
 * thread (or in the commits), so one build measures both ways (default: the store's default,
 * SQLite's own checkpoint in the commits).
 */
export const checkpointsFromEnv = (): "background" | "inline" | undefined => {
  const value = process.env.BENCH_CHECKPOINTS
  if (value === undefined || value === "") return undefined
  if (value === "background" || value === "inline") return value
  throw new Error(`BENCH_CHECKPOINTS must be background or inline, not ${JSON.stringify(value)}`)
}
