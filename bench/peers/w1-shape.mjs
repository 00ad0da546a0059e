/**
 * The W1 workload, written once as plain JavaScript for bench/w1.ts (Bun) and the Node scripts
 * here: 200 tool names, 50 rules (10 deny, 15 requireApproval, 25 allow, exact names, globs,
 * argument conditions), and calls drawn with a fixed-seed generator, so every run evaluates the
 * same calls.
 */
const random = (() => {
  let state = 0x2545f491
  return () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) / 0x1_0000_0000
  }
})()
const pick = (items) => items[Math.floor(random() * items.length)]

const range = (n, f) => Array.from({ length: n }, (_, i) => f(i))

export const toolNames = [
  ...range(40, (i) => `fs_read_${i}`),
  ...range(30, (i) => `fs_write_${i}`),
  ...range(40, (i) => `mcp__github__${["get", "list", "create", "update", "delete"][i % 5]}_${i}`),
  ...range(30, (i) => (i === 0 ? "bash" : `shell_${i}`)),
  ...range(30, (i) => `task-${i}`),
  ...range(30, (i) => `misc_${i}`)
]

export const policyInput = {
  default: "deny",
  deny: [
    { tool: "fs_write_*", args: { path: "/etc/*" }, reason: "system files" },
    { tool: "shell_*", args: { command: "rm -rf *" } },
    { tool: "bash", args: { command: "*sudo*" } },
    { tool: "fs_read_*", args: { path: "*.env" } },
    "mcp__github__delete_*",
    ...range(5, (i) => `misc_${i}`)
  ],
  requireApproval: [
    "fs_write_*",
    { tool: "shell_*", ttlMs: 60_000 },
    "mcp__github__create_*",
    { tool: "mcp__github__update_*", sessionScope: "tool" },
    "bash",
    { tool: "task-*", args: { "options.recursive": true } },
    ...range(9, (i) => `misc_${i + 5}`)
  ],
  allow: [
    "fs_read_*",
    "mcp__github__get_*",
    "mcp__github__list_*",
    "task-*",
    ...range(21, (i) => `misc_${i + 14}`)
  ]
}

export const makeCalls = (count) =>
  range(count, () => pick(toolNames)).map((name) => ({
    name,
    args: {
      path: pick(["/home/u/notes.txt", "/etc/hosts", "/srv/app/.env", "src/index.ts"]),
      command: pick(["ls -la", "rm -rf /tmp/x", "sudo reboot", "git status"]),
      options: { recursive: random() < 0.3, depth: 2 }
    }
  }))
