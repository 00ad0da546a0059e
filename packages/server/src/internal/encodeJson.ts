/**
 * A JSON encoder compiled from a schema whose encoding changes no value: what the handlers send
 * back (the gate's own requests, read from its store) was checked when it was written, so the
 * answer need not run every field through `Schema.encode` again (its checks and its `Either` per
 * field were a third of a pending-list read). The compiled encoder keeps exactly the keys the
 * schema's encoded side names, in its order, as `Schema.encode` does, so the JSON is the same.
 *
 * It compiles only what it can encode so: structs, unions of literals and keywords with at most
 * one struct among them, arrays, declarations (kept as they are) and transformations between
 * structs that only make a field optional on one side (a default). Anything else (a transformation
 * that changes a value, records, unions of structs) makes `compile` give back `Schema.encode`'s
 * own JSON; the tests hold the two equal on arbitrary values.
 */
import type { SchemaAST } from "effect"
import { Schema } from "effect"

/** A value as the JSON its schema encodes it to (before `JSON.stringify`). */
type Project = (value: unknown) => unknown

const same: Project = (value) => value

/** `undefined` when the schema's encoding may change a value somewhere. */
const projectOf = (ast: SchemaAST.AST): Project | undefined => {
  switch (ast._tag) {
    case "Declaration":
    case "Literal":
    case "StringKeyword":
    case "NumberKeyword":
    case "BooleanKeyword":
    case "UndefinedKeyword":
      return same
    case "Refinement":
      return projectOf(ast.from)
    case "Transformation": {
      const { from, to, transformation } = ast
      if (transformation._tag !== "TypeLiteralTransformation" || from._tag !== "TypeLiteral") return undefined
      if (to._tag !== "TypeLiteral") return undefined
      const names = (literal: SchemaAST.TypeLiteral) => literal.propertySignatures.map((p) => p.name).join("\u0000")
      const renames = transformation.propertySignatureTransformations.some((p) => p.from !== p.to)
      return !renames && names(from) === names(to) ? projectOf(from) : undefined
    }
    case "Union": {
      const structs = ast.types.filter((type) => !isScalar(type))
      if (structs.length === 0) return same
      if (structs.length > 1) return undefined
      const struct = projectOf(structs[0]!)
      if (struct === undefined) return undefined
      return (value) => (typeof value === "object" && value !== null ? struct(value) : value)
    }
    case "TypeLiteral": {
      if (ast.indexSignatures.length > 0) return undefined
      const fields: Array<readonly [string, Project]> = []
      for (const property of ast.propertySignatures) {
        const project = projectOf(property.type)
        if (project === undefined || typeof property.name !== "string") return undefined
        fields.push([property.name, project])
      }
      return (value) => {
        const record = value as Record<string, unknown>
        const out: Record<string, unknown> = {}
        for (const [name, project] of fields) {
          const field = record[name]
          if (field !== undefined) out[name] = project(field)
        }
        return out
      }
    }
    case "TupleType": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
      const element = projectOf(ast.rest[0]!.type)
      if (element === undefined) return undefined
      return (value) => (value as ReadonlyArray<unknown>).map(element)
    }
    default:
      return undefined
  }
}

const isScalar = (ast: SchemaAST.AST): boolean =>
  ast._tag === "Literal" || ast._tag === "StringKeyword" || ast._tag === "NumberKeyword" ||
  ast._tag === "BooleanKeyword" || ast._tag === "UndefinedKeyword" ||
  (ast._tag === "Union" && ast.types.every(isScalar))

/**
 * The JSON text of a value of `schema`, as `JSON.stringify(Schema.encodeSync(schema)(value))`
 * gives it for a valid value.
 */
export const compile = <A, I>(schema: Schema.Schema<A, I>): (value: A) => string => {
  const project = projectOf(schema.ast)
  if (project !== undefined) return (value) => JSON.stringify(project(value))
  const encode = Schema.encodeSync(schema)
  return (value) => JSON.stringify(encode(value))
}
