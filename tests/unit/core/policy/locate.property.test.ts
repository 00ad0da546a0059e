/**
 * The positions `Policy.check` reports come from the located parsers: for any JSON document (as
 * written by `JSON.stringify`, compact or indented, and as YAML by the `yaml` package), the line
 * and column found for each value's path is where that value's text starts, and an object key's
 * position is where the key is written.
 */
import { describe, expect, it } from "bun:test"
import { Either, FastCheck } from "effect"
import * as YAML from "yaml"
import * as PolicyText from "../../../../packages/core/src/internal/policyText.js"

type Path = ReadonlyArray<string | number>

/** Every path of a value, the root's first. */
const paths = (value: unknown, at: Path = []): Array<Path> => {
  if (Array.isArray(value)) return [at, ...value.flatMap((item, i) => paths(item, [...at, i]))]
  if (typeof value === "object" && value !== null) {
    return [at, ...Object.entries(value).flatMap(([key, item]) => paths(item, [...at, key]))]
  }
  return [at]
}

const valueAt = (value: unknown, path: Path): unknown =>
  path.reduce<unknown>((current, segment) => (current as Record<string | number, unknown>)[segment], value)

const offsetOf = (text: string, { column, line }: PolicyText.Position) => {
  const lines = text.split("\n")
  return lines.slice(0, line - 1).reduce((sum, l) => sum + l.length + 1, 0) + column - 1
}

const documents = FastCheck.dictionary(
  FastCheck.string({ minLength: 1, maxLength: 6 }).filter((key) => key !== "__proto__"),
  FastCheck.jsonValue({ maxDepth: 3 }),
  { minKeys: 1, maxKeys: 5 }
)

/** Documents whose scalars YAML writes on one line, unquoted or quoted. */
const word = FastCheck.string({ unit: FastCheck.constantFrom(..."abcxyz019_-"), minLength: 1, maxLength: 6 })
const scalar = FastCheck.oneof(word, FastCheck.integer(), FastCheck.boolean(), FastCheck.constant(null))
const yamlDocuments = FastCheck.letrec((tie) => ({
  value: FastCheck.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    FastCheck.array(tie("value"), { maxLength: 3 }),
    FastCheck.dictionary(word, tie("value"), { maxKeys: 3 })
  )
})).value

describe("located parsers", () => {
  it("JSON: each value's position is where its text starts; each key's where the key is", () => {
    FastCheck.assert(
      FastCheck.property(documents, FastCheck.boolean(), (document, indent) => {
        const text = JSON.stringify(document, null, indent ? 2 : 0)
        const { locate, value } = Either.getOrThrow(PolicyText.parseJsonLocated(text))
        for (const path of paths(value)) {
          const at = offsetOf(text, locate(path)!)
          const expected = valueAt(value, path)
          if (typeof expected === "object" && expected !== null) {
            expect(text[at]).toBe(Array.isArray(expected) ? "[" : "{")
          } else {
            const parsed = PolicyText.parseJson(text.slice(at, at + JSON.stringify(expected).length))
            expect(parsed).toEqual(Either.right(expected))
          }
          const last = path.at(-1)
          if (typeof last === "string") {
            const key = offsetOf(text, locate(path, true)!)
            expect(text.slice(key, key + JSON.stringify(last).length)).toBe(JSON.stringify(last))
          }
        }
      }),
      { numRuns: 200 }
    )
  })

  it("YAML: each scalar's position is where its text starts", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.dictionary(word, yamlDocuments, { minKeys: 1, maxKeys: 4 }), (document) => {
        const text = YAML.stringify(document)
        const { locate, value } = Either.getOrThrow(PolicyText.parseYamlLocated(text))
        expect(value).toEqual(JSON.parse(JSON.stringify(document)))
        for (const path of paths(value)) {
          const expected = valueAt(value, path)
          if (typeof expected === "object" && expected !== null) continue
          const at = offsetOf(text, locate(path)!)
          // the rest of the line from there is the scalar's text (a flow collection's item ends at `,` or `]`)
          const rest = text.slice(at).split("\n")[0]!.replace(/\s*[,\]}].*$/, "")
          expect(YAML.parse(rest)).toEqual(expected)
        }
      }),
      { numRuns: 100 }
    )
  })
})
