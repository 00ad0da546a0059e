/**
 * Stable call ids for MCP calls (the same call, the same id, until it finished) and the agent id
 * a client's self-description becomes.
 */
import { describe, expect, test } from "bun:test"
import * as CallIds from "../../../packages/mcp/src/internal/callIds.js"
import { agentIdOf } from "../../../packages/mcp/src/internal/sessions.js"

describe("MCP call ids", () => {
  test("the digest names the call: key order and the tool name's case do not change it; arguments and the policy do", () => {
    const key = CallIds.digest("write_file", { path: "a", content: "b" }, "v1")
    expect(CallIds.digest("Write_File", { content: "b", path: "a" }, "v1")).toBe(key)
    expect(CallIds.digest("write_file", { path: "a", content: "c" }, "v1")).not.toBe(key)
    expect(CallIds.digest("read_file", { path: "a", content: "b" }, "v1")).not.toBe(key)
    expect(CallIds.digest("write_file", { path: "a", content: "b" }, "v2")).not.toBe(key)
    expect(CallIds.idOf(key, 0)).toBe(`mcp-${key}-0`)
  })

  test("an occurrence keeps its id until it finished; finishing an older one does not move back", () => {
    const occurrences: CallIds.Occurrences = new Map()
    expect(CallIds.current(occurrences, "k")).toBe(0)
    CallIds.finished(occurrences, "k", 0)
    expect(CallIds.current(occurrences, "k")).toBe(1)
    CallIds.finished(occurrences, "k", 3)
    expect(CallIds.current(occurrences, "k")).toBe(4)
    CallIds.finished(occurrences, "k", 1)
    expect(CallIds.current(occurrences, "k")).toBe(4)
    expect(CallIds.current(occurrences, "other")).toBe(0)
  })
})

describe("agent ids from clientInfo", () => {
  test("name@version, hidden characters escaped, at most 200 characters, none for nothing", () => {
    expect(agentIdOf({ name: "claude-desktop", version: "1.2.3" })).toBe("claude-desktop@1.2.3")
    expect(agentIdOf({ name: "evil\u202etxt.exe", version: "1\u0000" })).toBe("evil\\u202etxt.exe@1\\u0000")
    expect(agentIdOf({ name: "x".repeat(500), version: "1" })).toHaveLength(200)
    expect(agentIdOf(undefined)).toBeUndefined()
  })
})
