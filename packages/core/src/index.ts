/**
 * @tool-gate/core: allow / deny / requireApproval for every tool call an AI agent makes.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as ApprovalRequest from "./ApprovalRequest.js"
/** @since 0.1.0 */
export * as ApprovalStore from "./ApprovalStore.js"
/** @since 0.1.0 */
export * as AuditChain from "./AuditChain.js"
/** @since 0.1.0 */
export * as AuditEvent from "./AuditEvent.js"
/** @since 0.1.0 */
export * as Checkpoint from "./Checkpoint.js"
/** @since 0.1.0 */
export * as CheckpointStore from "./CheckpointStore.js"
/** @since 0.1.0 */
export * as Decision from "./Decision.js"
/** @since 0.1.0 */
export * as GatedTool from "./GatedTool.js"
/** @since 0.1.0 */
export * as Glob from "./Glob.js"
/** @since 0.1.0 */
export * as Limits from "./Limits.js"
/** @since 0.1.0 */
export * as PauseSignal from "./PauseSignal.js"
/** @since 0.1.0 */
export * as Policy from "./Policy.js"
/** @since 0.1.0 */
export * as PolicyImport from "./PolicyImport.js"
/** @since 0.1.0 */
export * as SessionApproval from "./SessionApproval.js"
/** @since 0.1.0 */
export * as SqlApprovalStore from "./SqlApprovalStore.js"
/** @since 0.1.0 */
export * as SqlChangeFeed from "./SqlChangeFeed.js"
/** @since 0.1.0 */
export * as SqlCheckpointStore from "./SqlCheckpointStore.js"
/** @since 0.1.0 */
export * as ToolCall from "./ToolCall.js"
/** @since 0.1.0 */
export * as ToolGate from "./ToolGate.js"
/** @since 0.1.0 */
export * as ToolGateError from "./ToolGateError.js"
/** @since 0.1.0 */
export * as ToolGateMetrics from "./ToolGateMetrics.js"
/** @since 0.1.0 */
export * as ToolGateSql from "./ToolGateSql.js"
