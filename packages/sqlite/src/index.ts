/**
 * @tool-gate/sqlite: tool-gate on an embedded SQLite file, on Node or Bun.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as ToolGateSqlite from "./ToolGateSqlite.js"
