/**
 * The OpenAPI document's schemas as a strict JSON Schema 2020-12 validator reads them. Effect's
 * generator writes a refinement of a named schema as a `$ref` with the refinement's keywords
 * beside it (`{ $ref: ".../Trimmed", minLength: 1 }`): valid 2020-12, but a keyword that applies
 * to one type stands there with no `type`, which strict validators (Ajv's `strictTypes`) refuse,
 * and generated clients read as "any type". Each such schema gets the type of what it refers to,
 * which it has anyway: the document means the same, and says it plainly.
 */

type Json = unknown

const typeKeywords: Record<string, string> = {
  minLength: "string",
  maxLength: "string",
  pattern: "string",
  format: "string",
  minimum: "number",
  maximum: "number",
  exclusiveMinimum: "number",
  exclusiveMaximum: "number",
  multipleOf: "number",
  minItems: "array",
  maxItems: "array",
  uniqueItems: "array",
  items: "array",
  prefixItems: "array",
  minProperties: "object",
  maxProperties: "object",
  required: "object",
  properties: "object",
  additionalProperties: "object",
  patternProperties: "object",
  propertyNames: "object"
}

const componentPrefix = "#/components/schemas/"

const isObject = (value: Json): value is Record<string, Json> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** `spec` with the type of each `$ref` that has type-specific keywords beside it written out. */
export const typedRefs = (spec: Record<string, any>): Record<string, any> => {
  const components: Record<string, Json> = spec.components?.schemas ?? {}
  /** The `type` a reference's target has, following references, if it has one. */
  const typeOf = (ref: string, seen: Set<string>): Json => {
    if (!ref.startsWith(componentPrefix) || seen.has(ref)) return undefined
    seen.add(ref)
    const target = components[ref.slice(componentPrefix.length)]
    if (!isObject(target)) return undefined
    if (target.type !== undefined) return target.type
    return typeof target.$ref === "string" ? typeOf(target.$ref, seen) : undefined
  }
  const visit = (value: Json): Json => {
    if (Array.isArray(value)) return value.map(visit)
    if (!isObject(value)) return value
    const out: Record<string, Json> = {}
    for (const [key, child] of Object.entries(value)) out[key] = visit(child)
    if (typeof out.$ref === "string" && out.type === undefined && Object.keys(out).some((k) => k in typeKeywords)) {
      const type = typeOf(out.$ref, new Set())
      if (type !== undefined) out.type = type
    }
    return out
  }
  return visit(spec) as Record<string, any>
}
