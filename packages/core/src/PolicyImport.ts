/**
 * Policies from the permission rules people already have: `fromClaudeSettings` turns a Claude Code
 * settings file's `permissions.allow`, `ask` and `deny` into a policy document (`allow`,
 * `requireApproval`, `deny`; anything else asks a human). A rule a tool-gate matcher cannot say
 * exactly is imported on the safe side (an allow narrower or left out, a deny or ask broader) with
 * a warning naming it; nothing is dropped silently. `docs/policy-import.md` has the mapping.
 *
 * @example
 * import { Policy, PolicyImport } from "@tool-gate/core"
 * import { Effect } from "effect"
 *
 * const imported = Effect.runSync(PolicyImport.fromClaudeSettings(
 *   { permissions: { allow: ["Bash(npm run test *)", "Read(/src/**)"], deny: ["WebFetch"] } },
 *   { projectRoot: "/repo" }
 * ))
 * for (const warning of imported.warnings) console.warn(`${warning.path}: ${warning.message}`)
 *
 * const policy = Policy.unsafeMake(imported.policy)
 * policy.evaluate({ name: "Bash", args: { command: "npm run test -- --watch" } })._tag // "Allow"
 * policy.evaluate({ name: "Bash", args: { command: "npm run test; rm -rf /" } })._tag // "RequireApproval"
 * console.log(PolicyImport.toText(imported.policy, "yaml"))
 *
 * @since 0.1.0
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Effect, Either, Schema } from "effect"
import * as YAML from "yaml"
import * as ClaudeRules from "./internal/claudeRules.js"
import * as PolicyText from "./internal/policyText.js"
import * as Policy from "./Policy.js"
import { Problem } from "./ToolGateError.js"

/**
 * Where relative path rules lead. Claude Code reads `/path` from the project folder (for
 * `.claude/settings.json`, the folder holding `.claude`) and `~/path` from the home folder; a path
 * rule whose folder is not given is imported only on the deny side (an allow is left out).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** the project folder, absolute: `/path`, `./path` and `path` rules are under it */
  readonly projectRoot?: string | undefined
  /** the home folder, absolute: `~/path` rules are under it */
  readonly home?: string | undefined
  /** the settings file's name, for errors */
  readonly source?: string | undefined
}

/**
 * A Claude permission list.
 *
 * @since 0.1.0
 * @category models
 */
export type List = ClaudeRules.List

/**
 * A rule or setting the policy does not say exactly: `path` is where it is in the settings
 * (`permissions.allow[3]`, `permissions.defaultMode`), `list` and `rule` the Claude rule if it is one.
 *
 * @since 0.1.0
 * @category models
 */
export interface Warning {
  readonly path: string
  readonly list?: List
  readonly rule?: string
  readonly message: string
}

/**
 * An imported policy document (it passes `Policy.make`) and the warnings about it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Imported {
  readonly policy: Policy.PolicyInput
  readonly warnings: ReadonlyArray<Warning>
}

/**
 * The settings are not a Claude Code settings document: not JSON, no `permissions` object, a
 * list that is not a list of strings. Each problem names its path.
 *
 * @since 0.1.0
 * @category errors
 */
export class SettingsInvalid extends Schema.TaggedError<SettingsInvalid>()(
  "SettingsInvalid",
  { problems: Schema.Array(Problem), source: Schema.optional(Schema.String) },
  HttpApiSchema.annotations({ status: 400 })
) {
  override get message(): string {
    const problems = this.problems.map((p) => p.path === "" ? p.message : `${p.path}: ${p.message}`).join("; ")
    return `Invalid Claude Code settings${this.source === undefined ? "" : ` ${this.source}`}: ${problems}`
  }
}

const lists: ReadonlyArray<readonly [List, "allow" | "requireApproval" | "deny"]> = [
  ["deny", "deny"],
  ["ask", "requireApproval"],
  ["allow", "allow"]
]

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** What a `defaultMode` makes of the policy default, and why it is not exact. */
const defaultModes: Readonly<Record<string, { readonly default: Policy.Verdict; readonly warning?: string }>> = {
  default: { default: "requireApproval" },
  dontAsk: { default: "deny" },
  acceptEdits: {
    default: "requireApproval",
    warning: "acceptEdits lets file edits run unasked; the imported policy asks for them (add Edit, Write... to allow)"
  },
  plan: { default: "requireApproval", warning: "plan mode (nothing that changes anything runs) has no tool-gate form" },
  bypassPermissions: {
    default: "requireApproval",
    warning: "bypassPermissions allows everything; the imported policy asks for what no rule allows"
  },
  auto: {
    default: "requireApproval",
    warning: "auto mode's background safety check has no tool-gate form; what no rule allows asks"
  }
}

const otherKey = (key: string): string =>
  key === "hooks"
    ? "not imported: hooks (a PreToolUse hook that allows or blocks calls) are not rules; write what they decide as rules"
    : `not imported: only permissions become policy rules`

const problemsOf = (settings: unknown): Array<Problem> => {
  if (!isRecord(settings)) return [{ path: "", message: "expected a JSON object" }]
  const permissions = settings.permissions
  if (permissions === undefined) return [{ path: "permissions", message: "missing: there are no rules to import" }]
  if (!isRecord(permissions)) return [{ path: "permissions", message: "expected an object" }]
  return lists.flatMap(([list]) => {
    const rules = permissions[list]
    if (rules === undefined) return []
    if (!Array.isArray(rules)) return [{ path: `permissions.${list}`, message: "expected a list of rules" }]
    return rules.flatMap((rule, i) =>
      typeof rule === "string" ? [] : [{ path: `permissions.${list}[${i}]`, message: "expected a rule string" }]
    )
  })
}

const build = (settings: Record<string, unknown>, options: Options): Imported => {
  const permissions = settings.permissions as Record<string, unknown>
  const warnings: Array<Warning> = []
  const out = {
    deny: [] as Array<Policy.Matcher>,
    requireApproval: [] as Array<Policy.Matcher>,
    allow: [] as Array<Policy.Matcher>
  }
  const guarded = new Map<string, ClaudeRules.PathTool>()
  for (const [list, into] of lists) {
    const rules = (permissions[list] ?? []) as ReadonlyArray<string>
    rules.forEach((rule, index) => {
      const path = `permissions.${list}[${index}]`
      const mapped = ClaudeRules.map(rule, list, options)
      for (const message of mapped.warnings) warnings.push({ path, list, rule, message })
      for (const tool of mapped.guarded) guarded.set(tool.tool, tool)
      mapped.matchers.forEach((matcher, k) => {
        const id = `claude.${list}[${index}]${k === 0 ? "" : `#${k + 1}`}`
        const object = typeof matcher === "string" ? { tool: matcher } : matcher
        out[into].push(
          into === "allow" ? { id, ...object } : { id, ...object, reason: `Claude Code ${path}: ${rule}` }
        )
      })
    })
  }
  let verdict: Policy.Verdict = "requireApproval"
  for (const key of Object.keys(permissions)) {
    if (key === "allow" || key === "ask" || key === "deny") continue
    const path = `permissions.${key}`
    if (key === "defaultMode") {
      const mode = typeof permissions[key] === "string" ? defaultModes[permissions[key]] : undefined
      if (mode === undefined) {
        warnings.push({ path, message: `unknown mode ${JSON.stringify(permissions[key])}: what no rule allows asks` })
      } else {
        verdict = mode.default
        if (mode.warning !== undefined) warnings.push({ path, message: mode.warning })
      }
    } else if (key === "additionalDirectories") {
      warnings.push({
        path,
        message: "not imported: tool-gate has no working folders; allow paths under them with Read(//...) rules"
      })
    } else warnings.push({ path, message: "not imported: this setting has no tool-gate form" })
  }
  for (const key of Object.keys(settings)) {
    if (key !== "permissions" && key !== "$schema") warnings.push({ path: key, message: otherKey(key) })
  }
  return {
    policy: {
      default: verdict,
      deny: out.deny,
      requireApproval: [...out.requireApproval, ...ClaudeRules.guards([...guarded.values()])],
      allow: out.allow
    },
    warnings
  }
}

// Constructors -----------------------------------------------------------------------------------

/**
 * Imports a Claude Code settings document (the parsed JSON of `.claude/settings.json`,
 * `settings.local.json` or `~/.claude/settings.json`): `permissions.allow` becomes `allow`,
 * `ask` becomes `requireApproval`, `deny` becomes `deny`, and the default asks (`deny` with
 * `defaultMode: "dontAsk"`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromClaudeSettings = (
  settings: unknown,
  options: Options = {}
): Effect.Effect<Imported, SettingsInvalid> => {
  const problems = problemsOf(settings)
  if (problems.length > 0) {
    return Effect.fail(
      new SettingsInvalid({ problems, ...(options.source === undefined ? {} : { source: options.source }) })
    )
  }
  const imported = build(settings as Record<string, unknown>, options)
  // every matcher above is made to be valid: a policy that does not load is a bug here
  return Effect.as(Effect.orDie(Policy.make(imported.policy)), imported)
}

/**
 * Like `fromClaudeSettings`, from the file's text (strict JSON; a duplicated key is an error).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromClaudeSettingsText = (text: string, options: Options = {}): Effect.Effect<Imported, SettingsInvalid> =>
  Either.match(PolicyText.parseJson(text), {
    onLeft: (messages) =>
      Effect.fail(
        new SettingsInvalid({
          problems: messages.map((message) => ({ path: "", message: `not JSON: ${message}` })),
          ...(options.source === undefined ? {} : { source: options.source })
        })
      ),
    onRight: (settings) => fromClaudeSettings(settings, options)
  })

/**
 * An imported policy as a file's text: YAML (the form `docs/policy.md` writes) or JSON.
 *
 * @since 0.1.0
 * @category utils
 */
export const toText = (policy: Policy.PolicyInput, format: "yaml" | "json"): string =>
  format === "json" ? `${JSON.stringify(policy, null, 2)}\n` : YAML.stringify(policy, { lineWidth: 0 })
