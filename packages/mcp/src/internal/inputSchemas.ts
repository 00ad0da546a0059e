/**
 * The downstream tools' input schemas, compiled once per tool list: a call's arguments are judged
 * only after they validate against their tool's JSON Schema, and what is forwarded is exactly the
 * value that was validated (no defaults filled in, no coercion, nothing removed).
 *
 * The dialect follows `$schema`: none means JSON Schema 2020-12 (MCP's default), draft-07 and
 * draft-06 go to Ajv's draft-07 class, 2019-09 to its own. A schema's `pattern`s run on RE2
 * (re2js), in time linear in the argument: the model chooses the text, and a backtracking pattern
 * of a server's schema must not let it stall the gateway. A schema that does not compile (a
 * pattern RE2 cannot run, such as a lookahead, included), or names a dialect Ajv has no class for,
 * makes its tool refuse every call: what cannot be validated is not forwarded.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv"
import addFormats from "ajv-formats"
import { Ajv2019 } from "ajv/dist/2019.js"
import { Ajv2020 } from "ajv/dist/2020.js"
import type { RegExpEngine } from "ajv/dist/types/index.js"
import { RE2JS } from "re2js"

/** What a tool's schema gives a call's arguments. */
export type Check =
  | { readonly _tag: "Valid" }
  | { readonly _tag: "Invalid"; readonly problems: ReadonlyArray<string> }

/** A tool's compiled input schema, or why its calls are refused. */
export type Validator =
  | { readonly _tag: "Compiled"; readonly check: (args: unknown) => Check }
  | { readonly _tag: "Unusable"; readonly reason: string }

type AjvClass = typeof Ajv | typeof Ajv2019 | typeof Ajv2020

const dialects: ReadonlyArray<readonly [RegExp, AjvClass]> = [
  [/^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/, Ajv2020],
  [/^https?:\/\/json-schema\.org\/draft\/2019-09\/schema#?$/, Ajv2019],
  [/^https?:\/\/json-schema\.org\/draft-0[67]\/schema#?$/, Ajv]
]

/** Ajv's hook for compiling `pattern` and `patternProperties`: RE2, which never backtracks. */
const linearRegExp: RegExpEngine = Object.assign(
  (pattern: string) => {
    const compiled = RE2JS.compile(pattern)
    // Ajv keeps one compiled pattern per toString()
    return { test: (text: string) => compiled.test(text), toString: () => `RE2JS(${JSON.stringify(pattern)})` }
  },
  { code: "RE2JS.compile" }
)

// One instance per dialect, options chosen so that validation never changes the value it checks.
const instances = new Map<AjvClass, InstanceType<AjvClass>>()
const instanceOf = (Class: AjvClass) => {
  let instance = instances.get(Class)
  if (instance === undefined) {
    instance = new Class({
      strict: false,
      allErrors: false,
      useDefaults: false,
      coerceTypes: false,
      removeAdditional: false,
      validateFormats: true,
      // schemas of different servers may reuse ids: each compiles on its own
      addUsedSchema: false,
      code: { regExp: linearRegExp }
    })
    addFormats.default(instance)
    instances.set(Class, instance)
  }
  return instance
}

const describe = (error: ErrorObject): string => {
  const where = error.instancePath === "" ? "arguments" : `arguments${error.instancePath.replace(/\//g, ".")}`
  const extra = error.keyword === "additionalProperties"
    ? ` (${String((error.params as { additionalProperty?: unknown }).additionalProperty)})`
    : ""
  return `${where} ${error.message ?? "is invalid"}${extra}`
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Compiles one tool's input schema. */
export const compile = (schema: unknown): Validator => {
  if (!isRecord(schema)) return { _tag: "Unusable", reason: "the tool's input schema is not a JSON object" }
  const dialect = schema.$schema
  let Class: AjvClass = Ajv2020
  if (dialect !== undefined) {
    const found = dialects.find(([pattern]) => typeof dialect === "string" && pattern.test(dialect))
    if (found === undefined) {
      return { _tag: "Unusable", reason: `the tool's input schema uses an unsupported dialect: ${String(dialect)}` }
    }
    Class = found[1]
  }
  let validate: ValidateFunction
  try {
    validate = instanceOf(Class).compile(schema)
  } catch (error) {
    return {
      _tag: "Unusable",
      reason: `the tool's input schema does not compile: ${error instanceof Error ? error.message : String(error)}`
    }
  }
  return {
    _tag: "Compiled",
    check: (args) =>
      validate(args) ? { _tag: "Valid" } : { _tag: "Invalid", problems: (validate.errors ?? []).map(describe) }
  }
}
