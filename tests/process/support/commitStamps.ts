/**
 * For the W4 bench: with `TOOLGATE_STAMP_COMMITS=1`, a worker on Node stamps the instant each
 * `COMMIT` of its connections returns (better-sqlite3: the statement's `run`; pg: the query's
 * callback), on the machine's clock, so the bench measures from the commit itself. Imported
 * before anything opens a connection; without the variable it changes nothing.
 */
declare global {
  /** when the last `COMMIT` returned (`performance.timeOrigin + performance.now()`) */
  var toolgateLastCommit: number | undefined
}

const stamp = () => {
  globalThis.toolgateLastCommit = performance.timeOrigin + performance.now()
}

const isCommit = (text: unknown) => typeof text === "string" && text.trim().toUpperCase() === "COMMIT"

type Method = (...args: Array<any>) => any

// (imported here only: under Bun, better-sqlite3 does not load)
if (process.env["TOOLGATE_STAMP_COMMITS"] === "1" && typeof Bun === "undefined") {
  // external to the bundle (and untyped here): Node loads the copy the SQLite client does
  const driver: string = "better-sqlite3"
  const { default: Sqlite } = await import(driver)
  const { default: pg } = await import("pg")
  const database = Sqlite.prototype as unknown as Record<string, Method>
  const prepare = database["prepare"]!
  database["prepare"] = function(this: unknown, text: string, ...args: Array<unknown>) {
    const statement = prepare.call(this, text, ...args)
    if (isCommit(text)) {
      const run = statement.run as Method
      statement.run = (...params: Array<unknown>) => {
        const result = run.apply(statement, params)
        stamp()
        return result
      }
    }
    return statement
  }
  const client = pg.Client.prototype as unknown as Record<string, Method>
  const query = client["query"]!
  client["query"] = function(this: unknown, config: unknown, values: unknown, callback: unknown) {
    const text = typeof config === "string" ? config : (config as { text?: unknown } | null)?.text
    if (isCommit(text) && typeof callback === "function") {
      return query.call(this, config, values, (...results: Array<unknown>) => {
        stamp()
        return (callback as Method)(...results)
      })
    }
    return query.call(this, config, values, callback)
  }
}
