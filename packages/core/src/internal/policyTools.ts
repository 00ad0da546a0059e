/**
 * The checks that need the tools a policy is written for. A rule whose tool glob names no known
 * tool, or whose `args` name a path that no parameter of its tools has, never matches: on a deny
 * rule that typo fails open (`args: { comand: "rm*" }` denies nothing). Parameters are read as
 * JSON Schemas: from files, from an Effect Schema (`JSONSchema.make`), or from an `@effect/ai`
 * Toolkit's parameter schemas.
 */
import type { Schema } from "effect"
import { Either, JSONSchema } from "effect"
import { didYouMean } from "./closest.js"
import { asMatcher, splitPath, valueTest } from "./evaluator.js"
import * as Glob from "./glob.js"
import type { LintRule, Warning } from "./policyLint.js"
import { fieldPath, label } from "./policyLint.js"

/** A tool as the checks know it: its name and, when known, its parameters' JSON Schema. */
export interface KnownTool {
  readonly name: string
  /** `undefined`: the parameters are not known, so no argument path is checked */
  readonly parameters: unknown
}

/** An Effect Schema's JSON Schema, or `undefined` when it has none (a `declare` without one). */
export const jsonSchemaOf = (schema: Schema.Schema.All): unknown => {
  try {
    return JSONSchema.make(schema as Schema.Schema<unknown, unknown>)
  } catch {
    return undefined
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** How deep `$ref`s and combinators are followed (a recursive schema stops here, as "open"). */
const maxExpand = 32

/**
 * The schema nodes `node` stands for: `$ref`s resolved against `root` (`#/$defs/X`,
 * `#/definitions/X`), `anyOf` / `oneOf` / `allOf` branches listed. `"open"` when anything may be
 * there (a ref that cannot be followed, or too deep).
 */
const expand = (root: unknown, node: unknown, depth = 0): Array<unknown> | "open" => {
  if (depth > maxExpand) return "open"
  if (!isRecord(node)) return [node]
  const out: Array<unknown> = []
  if (typeof node.$ref === "string") {
    if (!node.$ref.startsWith("#/")) return "open"
    let target: unknown = root
    for (const part of node.$ref.slice(2).split("/")) {
      const key = decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~")
      target = isRecord(target) ? target[key] : undefined
    }
    if (target === undefined) return "open"
    const more = expand(root, target, depth + 1)
    if (more === "open") return "open"
    out.push(...more)
  }
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    const branches = node[key]
    if (!Array.isArray(branches)) continue
    for (const branch of branches) {
      const more = expand(root, branch, depth + 1)
      if (more === "open") return "open"
      out.push(...more)
    }
  }
  const structural = ["type", "properties", "additionalProperties", "patternProperties", "items", "prefixItems"]
  const combinedOnly = out.length > 0 && !structural.some((key) => key in node)
  return combinedOnly ? out : [node, ...out]
}

/** One step into a schema node: the nodes at `segment`, or `"open"` when anything may be there. */
interface Step {
  readonly next: Array<unknown>
  readonly open: boolean
  /** the property names this node declares, for a suggestion */
  readonly names: Array<string>
  /** the node is a string, number, boolean or null: nothing is inside it */
  readonly scalar: boolean
}

const arrayIndex = /^(?:0|[1-9][0-9]*)$/

const step = (node: unknown, segment: string): Step => {
  const none = { next: [], open: false, names: [], scalar: false }
  if (node === false) return none
  if (!isRecord(node)) return { ...none, open: true }
  const types = typeof node.type === "string" ? [node.type] : Array.isArray(node.type) ? node.type : undefined
  const next: Array<unknown> = []
  const names: Array<string> = []
  let open = false
  let container = false
  const properties = isRecord(node.properties) ? node.properties : undefined
  const patterns = isRecord(node.patternProperties) ? node.patternProperties : undefined
  if (types === undefined || types.includes("object")) {
    if (properties !== undefined || patterns !== undefined || node.additionalProperties !== undefined) {
      container = true
      if (properties !== undefined) {
        names.push(...Object.keys(properties))
        if (Object.hasOwn(properties, segment)) next.push(properties[segment])
      }
      // keys by pattern: not tested here (a tool file's regular expression could take exponential
      // time on a key), so any key may be one of them
      if (patterns !== undefined && Object.keys(patterns).length > 0) open = true
      // declared properties and no additionalProperties: the declared ones are the parameters
      const additional = node.additionalProperties
      if (additional === true || isRecord(additional)) next.push(additional)
      else if (additional === undefined && properties === undefined && patterns === undefined) open = true
    } else if (types !== undefined) open = true
  }
  if (types === undefined || types.includes("array")) {
    const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : Array.isArray(node.items) ? node.items : []
    const rest = Array.isArray(node.items) ? node.additionalItems : node.items
    if (prefix.length > 0 || rest !== undefined) {
      container = true
      if (arrayIndex.test(segment)) {
        const index = Number(segment)
        if (index < prefix.length) next.push(prefix[index])
        else if (rest === true || isRecord(rest)) next.push(rest)
        else if (rest === undefined && prefix.length === 0) open = true
      }
    } else if (types !== undefined) open = true
  }
  // no type and no structure: a description, a const, an enum; or anything at all
  if (types === undefined && !container) {
    open = !("const" in node) && !("enum" in node)
    return { next, open, names, scalar: !open }
  }
  return { next, open, names, scalar: !container && !open }
}

/** Where a path leaves a tool's parameters, or `undefined` when the path may be there. */
interface Miss {
  /** the segments that were found */
  readonly depth: number
  readonly names: Array<string>
  readonly scalar: boolean
}

/** The schema nodes at a path (`"open"` when anything may be there), or where the path leaves them. */
const walk = (root: unknown, segments: ReadonlyArray<string>): Miss | { readonly nodes: Array<unknown> } | "open" => {
  let nodes: Array<unknown> = [root]
  for (let depth = 0; depth < segments.length; depth++) {
    const next: Array<unknown> = []
    const names: Array<string> = []
    let scalar = true
    for (const node of nodes) {
      const expanded = expand(root, node)
      if (expanded === "open") return "open"
      for (const one of expanded) {
        const result = step(one, segments[depth]!)
        if (result.open) return "open"
        next.push(...result.next)
        names.push(...result.names)
        scalar &&= result.scalar
      }
    }
    if (next.length === 0) return { depth, names, scalar }
    nodes = next
  }
  const leaves: Array<unknown> = []
  for (const node of nodes) {
    const expanded = expand(root, node)
    if (expanded === "open") return "open"
    leaves.push(...expanded)
  }
  return { nodes: leaves }
}

const jsonType = (value: unknown): string => value === null ? "null" : Array.isArray(value) ? "array" : typeof value

/**
 * Whether a value the schema node allows can match the pattern: `false` when none can (the
 * node's `enum` / `const` values all fail it, or its `type` is one the pattern never matches),
 * `undefined` when the node does not say.
 */
const canMatch = (node: unknown, test: (value: unknown) => boolean, pattern: unknown): boolean | undefined => {
  if (!isRecord(node)) return node === false ? false : undefined
  const values = Array.isArray(node.enum) ? node.enum : "const" in node ? [node.const] : undefined
  if (values !== undefined) return values.some(test)
  const types = typeof node.type === "string" ? [node.type] : Array.isArray(node.type) ? node.type : undefined
  if (types === undefined) return undefined
  const matcher = asMatcher(pattern)
  const exact = typeof pattern === "string" || (matcher !== undefined && !("equals" in matcher))
    ? undefined
    : matcher !== undefined && "equals" in matcher
    ? matcher.equals
    : pattern
  // a glob sees strings, and numbers and booleans as their JSON text
  const wanted = exact === undefined
    ? ["string", "number", "integer", "boolean"]
    : jsonType(exact) === "number"
    ? Number.isInteger(exact) ? ["number", "integer"] : ["number"]
    : [jsonType(exact)]
  return types.some((type) => wanted.includes(type as string))
}

const describeValues = (nodes: ReadonlyArray<unknown>): string => {
  const parts = nodes.map((node) => {
    if (!isRecord(node)) return "nothing"
    const values = Array.isArray(node.enum) ? node.enum : "const" in node ? [node.const] : undefined
    if (values !== undefined) return `one of ${values.slice(0, 8).map((value) => JSON.stringify(value)).join(", ")}`
    return `of type ${Array.isArray(node.type) ? node.type.join(" | ") : String(node.type)}`
  })
  return [...new Set(parts)].join(", or ")
}

const quoteList = (names: ReadonlyArray<string>, max = 12): string => {
  const unique = [...new Set(names)]
  const shown = unique.slice(0, max).map((name) => JSON.stringify(name)).join(", ")
  return unique.length > max ? `${shown}, ...` : shown
}

const consequence = (rule: LintRule): string =>
  rule.source === "deny"
    ? "so this deny rule never denies anything"
    : rule.source === "requireApproval"
    ? "so this rule never asks for approval"
    : "so this rule never allows anything"

/**
 * Warnings for rules that name no known tool (`unknownTool`) and argument paths that no
 * parameter of the rule's tools has (`unknownArgument`). `rules` in precedence order.
 */
export const lint = (rules: ReadonlyArray<LintRule>, tools: ReadonlyArray<KnownTool>): Array<Warning> => {
  const warnings: Array<Warning> = []
  const names = tools.map((tool) => tool.name)
  for (const rule of rules) {
    const glob = Glob.compile(rule.tool, true)
    const matched = tools.filter((tool) => glob.test(tool.name.toLowerCase()))
    const path = `${rule.source}[${rule.index}]`
    if (matched.length === 0) {
      const hint = glob.literal === undefined ? "" : didYouMean(rule.tool, names)
      warnings.push({
        ruleId: rule.id,
        path,
        kind: "unknownTool",
        message: `${label(rule)}: tool ${JSON.stringify(rule.tool)} matches none of the known tools${hint}, ${
          consequence(rule)
        } (known: ${quoteList(names)})`
      })
      continue
    }
    const described = matched.filter((tool) => tool.parameters !== undefined)
    if (described.length < matched.length) continue
    for (const argument of Object.keys(rule.args ?? {})) {
      const segments = splitPath(argument)
      const walked = described.map((tool) => walk(tool.parameters, segments))
      if (walked.some((result) => result === "open")) continue
      // a path any of the tools has is fine; its values must still be able to match
      const found = walked.flatMap((result) => typeof result === "object" && "nodes" in result ? result.nodes : [])
      if (found.length > 0) {
        const pattern = rule.args![argument]
        const test = valueTest(pattern, rule.source === "allow" ? "allow" : "deny")
        if (found.every((node) => canMatch(node, test, pattern) === false)) {
          warnings.push({
            ruleId: rule.id,
            path: fieldPath(rule, "args", argument),
            kind: "neverMatches",
            message:
              `${label(rule)}: never matches: args ${JSON.stringify(argument)} is ${describeValues(found)} for ${
                described.length === 1 ? `tool ${JSON.stringify(described[0]!.name)}` : "the tools it matches"
              }, ` +
              `and ${JSON.stringify(pattern)} matches no such value; ${consequence(rule)}`
          })
        }
        continue
      }
      const misses = walked as Array<Miss>
      const deepest = Math.max(...misses.map((miss) => miss!.depth))
      const at = misses.filter((miss) => miss!.depth === deepest)
      const parent = segments.slice(0, deepest).join(".")
      const missing = segments[deepest]!
      const owners = described.length === 1
        ? `tool ${JSON.stringify(described[0]!.name)}`
        : `any of the tools it matches (${quoteList(described.map((tool) => tool.name), 5)})`
      const where = parent === "" ? "" : ` at ${JSON.stringify(parent)}`
      const known = at.flatMap((miss) => miss!.names)
      const detail = at.every((miss) => miss!.scalar) && parent !== ""
        ? `${JSON.stringify(parent)} is a single value, with nothing inside`
        : known.length === 0
        ? `no parameter${where} is named ${JSON.stringify(missing)}`
        : `no parameter${where} is named ${JSON.stringify(missing)}${didYouMean(missing, known)}; parameters${where}: ${
          quoteList(known)
        }`
      warnings.push({
        ruleId: rule.id,
        path: fieldPath(rule, "args", argument),
        kind: "unknownArgument",
        message: `${label(rule)}: args ${JSON.stringify(argument)} is not a parameter of ${owners}: ${detail}; ` +
          `the condition never holds, ${consequence(rule)}`
      })
    }
  }
  return warnings
}

// Tool definitions ------------------------------------------------------------------------------

/**
 * The tools in a JSON value: a tool definition, a list of them, or `{ tools: [...] }` (an MCP
 * `tools/list` result). A definition is `{ name, parameters }` (OpenAI functions and most
 * frameworks), `{ name, inputSchema }` (MCP), `{ name, input_schema }` (Anthropic) or
 * `{ type: "function", function: { name, parameters } }` (OpenAI chat tools). A value that is
 * none of these but a JSON Schema is the parameters of the tool `fallbackName` (a file
 * `bash.json` holding the schema of bash's parameters), when there is one.
 */
export const fromJson = (value: unknown, fallbackName?: string): Either.Either<Array<KnownTool>, string> => {
  const definition = (u: unknown, where: string): Either.Either<KnownTool, string> => {
    if (!isRecord(u)) return Either.left(`${where}: expected a tool definition object`)
    const inner = u.type === "function" && isRecord(u.function) ? u.function : u
    if (typeof inner.name !== "string" || inner.name === "") {
      return Either.left(`${where}: a tool definition needs a "name"`)
    }
    const parameters = inner.parameters ?? inner.inputSchema ?? inner.input_schema
    if (parameters !== undefined && !isRecord(parameters) && typeof parameters !== "boolean") {
      return Either.left(`${where}: the parameters of ${JSON.stringify(inner.name)} are not a JSON Schema`)
    }
    // a tool declared without parameters takes none
    return Either.right({ name: inner.name, parameters: parameters ?? { type: "object", properties: {} } })
  }
  const list = (items: ReadonlyArray<unknown>, where: string) =>
    Either.all(items.map((item, index) => definition(item, `${where}[${index}]`)))
  if (Array.isArray(value)) return list(value, "")
  if (isRecord(value) && Array.isArray(value.tools)) return list(value.tools, "tools")
  if (isRecord(value) && (typeof value.name === "string" || value.type === "function")) {
    return Either.map(definition(value, "the definition"), (tool) => [tool])
  }
  if (isRecord(value) && fallbackName !== undefined) return Either.right([{ name: fallbackName, parameters: value }])
  return Either.left("expected a tool definition, a list of them, { tools: [...] } or a JSON Schema")
}
