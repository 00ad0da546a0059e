/**
 * @tool-gate/cli: the `toolgate` command line, on the SQLite file or against a server.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Backend from "./Backend.js"
/** @since 0.1.0 */
export * as Cli from "./Cli.js"
