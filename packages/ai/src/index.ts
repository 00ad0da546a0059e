/**
 * @tool-gate/ai: tool-gate for `@effect/ai` agents.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as AgentLoop from "./AgentLoop.js"
/** @since 0.1.0 */
export * as GatedToolkit from "./GatedToolkit.js"
/** @since 0.1.0 */
export * as ScriptedModel from "./ScriptedModel.js"
