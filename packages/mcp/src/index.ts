/**
 * @tool-gate/mcp: an MCP gateway that puts tool-gate's policy, pause and audit in front of any
 * MCP server's tools.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as McpGateway from "./McpGateway.js"
