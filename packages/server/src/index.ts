/**
 * @tool-gate/server: the HTTP approval API (HttpApi contract, handlers, bearer-token auth), the
 * web console and its Node server.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Api from "./Api.js"
/** @since 0.1.0 */
export * as Auth from "./Auth.js"
/** @since 0.1.0 */
export * as WebConsole from "./WebConsole.js"
/** @since 0.1.0 */
export * as Http from "./Http.js"
/** @since 0.1.0 */
export * as Server from "./Server.js"
