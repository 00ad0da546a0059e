/**
 * Claude Code permission rules (`Bash(npm run test *)`, `Read(./src/**)`, `mcp__github`,
 * `WebFetch(domain:example.com)`) as tool-gate matchers. The one idea everything here rests on:
 * an imported `allow` never matches a call its Claude rule would not allow, and an imported `deny`
 * or `ask` never misses a call its Claude rule would catch. Where a tool-gate glob cannot say
 * exactly what the Claude rule says, an allow is narrowed (or left out) and a deny or ask is
 * broadened, and a warning says how.
 */
import type * as Policy from "../Policy.js"

/** The Claude list a rule comes from. */
export type List = "allow" | "ask" | "deny"

/** What one Claude rule becomes: its matchers (none when it is left out) and why it is not exact. */
export interface Mapped {
  readonly matchers: ReadonlyArray<Policy.Matcher>
  readonly warnings: ReadonlyArray<string>
  /** file tools whose path arguments an allow matcher constrains (they get a `..` guard) */
  readonly guarded: ReadonlyArray<PathTool>
}

/** Where relative path rules lead: `/path` is under `projectRoot`, `~/path` under `home`. */
export interface Roots {
  readonly projectRoot?: string | undefined
  readonly home?: string | undefined
}

/** A built-in file tool and the argument holding its path. */
export interface PathTool {
  readonly tool: string
  readonly arg: string
}

const read: ReadonlyArray<PathTool> = [{ tool: "Read", arg: "file_path" }]
const edit: ReadonlyArray<PathTool> = [
  { tool: "Edit", arg: "file_path" },
  { tool: "MultiEdit", arg: "file_path" },
  { tool: "Write", arg: "file_path" },
  { tool: "NotebookEdit", arg: "notebook_path" }
]

/** Claude's path-scoped tools: `Edit(...)` covers every built-in tool that changes a file. */
const pathTools: Readonly<Record<string, ReadonlyArray<PathTool>>> = {
  Read: read,
  Edit: edit,
  MultiEdit: [edit[1]!],
  Write: [edit[2]!],
  NotebookEdit: [edit[3]!]
}

/** Makes every character of `text` literal in a tool-gate glob. */
export const literal = (text: string): string => text.replace(/[\\*?]/g, "\\$&")

const rule = /^([A-Za-z0-9_-]+)(?:\(([^]*)\))?$/
const hostname = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/

const skipped = (warning: string): Mapped => ({ matchers: [], warnings: [warning], guarded: [] })
const exact = (matchers: ReadonlyArray<Policy.Matcher>, warnings: ReadonlyArray<string> = []): Mapped => ({
  matchers,
  warnings,
  guarded: []
})

/**
 * A specifier this importer cannot read: an allow is left out; a deny or ask is widened to the
 * whole tool, the broader side being the safe one.
 */
const unreadable = (tool: string, list: List, why: string): Mapped =>
  list === "allow"
    ? skipped(`not imported: ${why}`)
    : exact([literal(tool)], [`${why}; imported as every call of ${tool} (broader than the Claude rule)`])

// Bash ---------------------------------------------------------------------------------------------

/** The number of `*` in a Claude Bash pattern (only `*` is a wildcard there). */
const stars = (pattern: string) => pattern.split("*").length - 1

const bash = (specifier: string, list: List): Mapped => {
  if (specifier === "*") return exact(["Bash"])
  if (specifier.trim() === "") return unreadable("Bash", list, "an empty command pattern")
  // the legacy `prefix:*` means `prefix *`: the prefix as a whole word, then anything
  const legacy = specifier.endsWith(":*")
  const pattern = legacy ? `${specifier.slice(0, -2)} *` : specifier
  const glob = pattern.split("*").map(literal).join("*")
  // `ls *` also matches `ls` alone: a single trailing ` *` is optional
  const globs = pattern.endsWith(" *") && stars(pattern) === 1 ? [glob.slice(0, -2), glob] : [glob]
  const side = list === "allow" ? {} : { caseInsensitive: true }
  const warnings = legacy && stars(pattern) > 1
    ? [`the legacy ":*" suffix after a pattern that has "*" already: read as "${pattern}"`]
    : []
  return exact(globs.map((g) => ({ tool: "Bash", args: { command: { shell: g, ...side } } })), warnings)
}

// Paths ----------------------------------------------------------------------------------------------

/** A path rule's anchor: the absolute folder it is relative to, or why it is unknown. */
const anchor = (specifier: string, roots: Roots): { base?: string; rest: string; note?: string } => {
  if (specifier.startsWith("//")) return { base: "", rest: specifier.slice(2) }
  if (specifier.startsWith("~/")) {
    return roots.home === undefined
      ? { rest: specifier.slice(2), note: "the home folder is not known" }
      : { base: trimSlash(roots.home), rest: specifier.slice(2) }
  }
  const rest = specifier.startsWith("/") ? specifier.slice(1) : specifier.replace(/^(\.\/)+/, "")
  if (roots.projectRoot === undefined) return { rest, note: "the project folder is not known" }
  const relative = !specifier.startsWith("/")
  return {
    base: trimSlash(roots.projectRoot),
    rest,
    ...(relative
      ? {
        note: `a relative path is relative to the folder Claude Code runs in; taken as the project folder ${
          trimSlash(roots.projectRoot)
        }`
      }
      : {})
  }
}

/** A folder without its trailing slashes (the root folder becomes "", as `//` rules have it). */
const trimSlash = (path: string) => path.replace(/\/+$/, "")

/**
 * An allow's globs: anchored at `base`, case-sensitive, and only where the tool-gate `*` (which
 * crosses `/`) cannot reach further than the gitignore pattern. A pattern also covers everything
 * under a folder it names, as in gitignore.
 */
const allowPaths = (base: string, rest: string): { globs?: Array<string>; warning?: string; why?: string } => {
  if (/[?[\\]/.test(rest) || rest.startsWith("!")) {
    return { why: "the path pattern uses ?, [...], \\ or !, which a tool-gate glob cannot narrow to one folder level" }
  }
  const segments = rest.split("/")
  if (segments.some((s) => s === ".." || s === ".")) return { why: "the path pattern has a . or .. segment" }
  const folder = segments.at(-1) === "" || segments.at(-1) === "**" || segments.at(-1) === "*"
  const body = folder ? segments.slice(0, -1) : segments
  if (body.some((s) => s.includes("*") && s !== "**")) {
    return {
      why: "a * inside a path segment stays in one folder in Claude Code, but a tool-gate * also crosses /, " +
        "so no glob allows only what the rule allows (allow the folder with /** instead, or list the files)"
    }
  }
  let narrowed = false
  const parts = body.map((s) => {
    if (s !== "**") return literal(s)
    narrowed = true
    return "*"
  })
  const path = [literal(base), ...parts].join("/")
  const warning = narrowed
    ? "** between folders is imported as * between two slashes, which needs at least one folder there " +
      "(\"a/**/b\" does not allow \"a/b\"): narrower than the Claude rule"
    : undefined
  const globs = folder ? [`${path}/*`] : [path, `${path}/*`]
  return warning === undefined ? { globs } : { globs, warning }
}

/**
 * A deny's (or ask's) glob: the pattern without its anchor, anywhere in the path, in any case,
 * so that `..`, a relative path, `//` or another spelling on a case-insensitive disk does not
 * step around it.
 */
const denyPath = (rest: string): string => {
  let tail = rest.replace(/^(\*\*\/)+/, "").replace(/\[[^\]]*\]/g, "?").replace(
    /\\(.)/g,
    (_, c: string) => c === "*" || c === "?" ? `\\${c}` : c
  )
  tail = tail.replace(/\/\*\*\//g, "*").replace(/(?<!\\)\*\*+/g, "*").replace(/\/$/, "").replace(/(?<!\\)\\$/, "")
  const glob = tail.startsWith("*") ? tail : `*${tail}`
  return glob.endsWith("*") ? glob : `${glob}*`
}

const paths = (tool: string, specifier: string, list: List, roots: Roots): Mapped => {
  const tools = pathTools[tool]!
  const { base, note, rest } = anchor(specifier, roots)
  if (rest === "" || rest.startsWith("~")) return unreadable(tool, list, `the path pattern "${specifier}"`)
  const covers = tools.length > 1 ? ` (Claude's ${tool} rules cover ${tools.map((t) => t.tool).join(", ")})` : ""
  if (list !== "allow") {
    const glob = denyPath(rest)
    const warnings = [
      `imported as any ${tools.map((t) => t.arg).filter((a, i, all) => all.indexOf(a) === i).join(" or ")} ` +
      `matching "${glob}" in any case${covers}: broader than the Claude rule, so that "..", a relative path ` +
      "or another spelling of the path does not escape it",
      ...(tool === "Read"
        ? ["Claude Code also applies Read rules to Grep and Glob; this rule covers the Read tool only"]
        : [])
    ]
    return exact(tools.map((t) => ({ tool: t.tool, args: { [t.arg]: { glob, caseInsensitive: true } } })), warnings)
  }
  if (base === undefined) return skipped(`not imported: ${note}`)
  const allowed = allowPaths(base, rest)
  if (allowed.globs === undefined) return skipped(`not imported: ${allowed.why}`)
  const matchers = tools.flatMap((t) => allowed.globs!.map((glob) => ({ tool: t.tool, args: { [t.arg]: glob } })))
  return {
    matchers,
    warnings: [
      ...(note === undefined ? [] : [note]),
      ...(allowed.warning === undefined ? [] : [allowed.warning])
    ],
    guarded: tools
  }
}

// WebFetch -------------------------------------------------------------------------------------------

const webFetch = (specifier: string, list: List): Mapped => {
  if (!specifier.startsWith("domain:")) {
    return unreadable("WebFetch", list, `"${specifier}" is not a domain:HOST specifier`)
  }
  const host = specifier.slice("domain:".length).toLowerCase()
  if (list !== "allow") {
    const bare = host.replace(/^(\*\.)+/, "")
    if (!hostname.test(bare)) return unreadable("WebFetch", list, `"${host}" is not a host name`)
    const glob = `*${literal(bare)}*`
    return exact([{ tool: "WebFetch", args: { url: { glob, caseInsensitive: true } } }], [
      `imported as any url containing "${bare}" in any case (also subdomains, ports, and the name anywhere in ` +
      "the url): broader than the Claude rule; a url that spells the host otherwise (percent-encoded, " +
      "Unicode dots, an IP address) is not matched"
    ])
  }
  if (!hostname.test(host)) {
    return skipped(
      `not imported: "${host}" is not a plain host name (a wildcard host cannot be allowed with a glob ` +
        "that a url such as https://evil.example/x.example.com/ does not also match)"
    )
  }
  const h = literal(host)
  return exact(
    [`https://${h}`, `https://${h}/*`, `http://${h}`, `http://${h}/*`].map((url) => ({
      tool: "WebFetch",
      args: { url }
    })),
    [
      `allows urls of exactly ${host} over http or https, in lower case, with no port or user info: ` +
      "subdomains and other spellings of the url ask instead"
    ]
  )
}

// MCP and other tools ---------------------------------------------------------------------------------

const mcp = (name: string, list: List, specifier: string | undefined): Mapped => {
  if (specifier !== undefined) return unreadable(name, list, "an MCP tool rule takes no (...) specifier")
  const parts = name.split("__")
  // mcp__server (every tool of the server) or mcp__server__*
  if (parts.length === 2 || (parts.length === 3 && parts[2] === "*")) {
    return parts[1] === "" ? unreadable(name, list, "no server name") : exact([`mcp__${literal(parts[1]!)}__*`])
  }
  return exact([literal(name)])
}

/** The matchers one Claude rule becomes. */
export const map = (text: string, list: List, roots: Roots): Mapped => {
  if (text.startsWith("mcp__")) {
    const open = text.indexOf("(")
    return open === -1 ? mcp(text, list, undefined) : mcp(text.slice(0, open), list, text.slice(open))
  }
  const parsed = rule.exec(text)
  if (parsed === null) return skipped("not imported: not a rule of the form Tool or Tool(specifier)")
  const [, tool, specifier] = parsed as unknown as [string, string, string | undefined]
  if (specifier === undefined) return exact([literal(tool)])
  if (tool === "Bash") return bash(specifier, list)
  if (tool in pathTools) return paths(tool, specifier, list, roots)
  if (tool === "WebFetch") return webFetch(specifier, list)
  if (specifier === "*") return exact([literal(tool)])
  return unreadable(tool, list, `the specifier of ${tool}(...) is not one this importer knows`)
}

/**
 * The requireApproval rules that stop a path with a `..` segment from riding on an imported
 * path allow: the allow globs match the path as written (`/repo/src/../../etc/passwd` starts
 * with `/repo/src/`), so such a path asks a human.
 */
export const guards = (tools: ReadonlyArray<PathTool>): Array<Policy.Matcher> =>
  tools.flatMap(({ arg, tool }) =>
    ["*/../*", "*/.."].map((glob, i) => ({
      id: `claude.dotdot.${tool}${i === 0 ? "" : ".end"}`,
      tool,
      args: { [arg]: glob },
      reason: `the ${arg} has a .. segment, which the imported path rules cannot judge`
    }))
  )
