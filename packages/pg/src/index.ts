/**
 * @tool-gate/pg: tool-gate on PostgreSQL, for many processes on many hosts.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as ToolGatePg from "./ToolGatePg.js"
