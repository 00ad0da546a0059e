/**
 * A statement spy for bun:sqlite, loaded with `bun --preload bench/sqliteSpy.ts ...`: counts each
 * statement's runs and the time spent in them (wall, on the calling thread, which bun:sqlite
 * blocks), and prints the 20 costliest to stderr when the process exits. A bench may reset the
 * counts at the start of what it measures (`globalThis.sqliteSpy?.reset()`) and read them
 * (`globalThis.sqliteSpy?.stats`). Used to say how many statements an answer costs and which:
 *
 *   bun --preload bench/sqliteSpy.ts --conditions=@tool-gate/source bench/w7InProcess.ts
 *   LOAD_SERVER_FLAGS="--preload bench/sqliteSpy.ts" bun ... bench/w7Routes.ts    (the server's)
 */
import { Database } from "bun:sqlite"

export interface SqliteSpy {
  /** per statement (the method and its SQL): runs and nanoseconds */
  readonly stats: Map<string, { runs: number; ns: number }>
  readonly reset: () => void
}

declare global {
  var sqliteSpy: SqliteSpy | undefined
}

const stats = new Map<string, { runs: number; ns: number }>()
globalThis.sqliteSpy = { stats, reset: () => stats.clear() }

const timed = <A>(key: string, run: () => A): A => {
  const started = Bun.nanoseconds()
  try {
    return run()
  } finally {
    const entry = stats.get(key) ?? { runs: 0, ns: 0 }
    entry.runs++
    entry.ns += Bun.nanoseconds() - started
    stats.set(key, entry)
  }
}

const oneLine = (sql: string) => sql.replace(/\s+/g, " ").slice(0, 200)

type Method = (...args: Array<unknown>) => unknown

// A statement's run methods are its own properties, not its prototype's: each is wrapped once.
const spied = new WeakSet<object>()
const spy = (statement: Record<string, Method>, sql: string) => {
  if (spied.has(statement)) return statement
  spied.add(statement)
  for (const method of ["all", "run", "values", "get"]) {
    const original = statement[method]!
    statement[method] = (...args) => timed(`${method} ${oneLine(sql)}`, () => original.apply(statement, args))
  }
  return statement
}

const database = Database.prototype as unknown as Record<string, Method>
for (const method of ["query", "prepare"]) {
  const original = database[method]!
  database[method] = function(this: unknown, sql, ...args) {
    return spy(original.call(this, sql, ...args) as Record<string, Method>, String(sql))
  }
}
for (const method of ["run", "exec"]) {
  const original = database[method]!
  database[method] = function(this: unknown, sql, ...args) {
    return timed(`db.${method} ${oneLine(String(sql))}`, () => original.call(this, sql, ...args))
  }
}

process.on("exit", () => {
  for (const [key, { ns, runs }] of [...stats].sort((a, b) => b[1].ns - a[1].ns).slice(0, 20)) {
    console.error(`sqlite: ${runs} runs, ${Math.round(ns / runs / 1000)} µs each, ${Math.round(ns / 1e6)} ms: ${key}`)
  }
})
