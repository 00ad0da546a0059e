/**
 * Type-checks every `@example` block of the packages' JSDoc (packages/<name>/src), so that no
 * example in the API docs fails to compile. Each example is a module of its own, importing the
 * packages by their names as a user does; they resolve to the declarations `tsc -b` wrote
 * (packages/<name>/build/dts), so run it after `tsc -b`. Nothing is written to disk: the examples
 * live in a compiler host's memory.
 *
 *   node scripts/check-examples.mjs    exit 1, with each error at its file and line, if any fails
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const packages = join(root, "packages")

const sourcesUnder = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sourcesUnder(path) : name.endsWith(".ts") ? [path] : []
  })

/**
 * The `@example` blocks of a file's JSDoc comments: the lines after the tag up to the next tag or
 * the end of the comment, with the comment's ` * ` margin removed, and the line the example's
 * code starts on (for error messages). A fenced block (```ts ... ```) gives its content.
 */
const examplesOf = (text) => {
  const out = []
  for (const comment of text.matchAll(/\/\*\*[\s\S]*?\*\//g)) {
    const firstLine = text.slice(0, comment.index).split("\n").length
    const lines = comment[0].split("\n").map((line) => line.replace(/^\s*\/?\*\*?\/?( ?)/, "").replace(/\s*\*\/$/, ""))
    for (let i = 0; i < lines.length; i++) {
      const tag = /^@example\b\s*(.*)$/.exec(lines[i])
      if (tag === null) continue
      let end = i + 1
      while (end < lines.length && !lines[end].startsWith("@")) end++
      let body = [tag[1], ...lines.slice(i + 1, end)]
      let offset = i
      const open = body.findIndex((line) => line.startsWith("```"))
      if (open >= 0) {
        const close = body.findIndex((line, at) => at > open && line.startsWith("```"))
        body = body.slice(open + 1, close < 0 ? body.length : close)
        offset += open + 1
      }
      out.push({ line: firstLine + offset, code: body.join("\n").trim() })
      i = end - 1
    }
  }
  return out
}

const examples = new Map()
for (const name of readdirSync(packages)) {
  const src = join(packages, name, "src")
  if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) continue
  for (const file of sourcesUnder(src)) {
    examplesOf(readFileSync(file, "utf8")).forEach((example, n) => {
      if (example.code === "") return
      // beside its module, so an error names where the example is; `export {}` makes it a module
      examples.set(`${file.slice(0, -3)}.example-${n}.ts`, {
        ...example,
        source: file,
        text: `${example.code}\nexport {}\n`
      })
    })
  }
}

const options = {
  strict: true,
  exactOptionalPropertyTypes: true,
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  moduleDetection: ts.ModuleDetectionKind.Force,
  types: ["node"],
  skipLibCheck: true,
  noEmit: true,
  baseUrl: root,
  // the declarations `tsc -b` wrote, as a user's compiler sees the published packages
  paths: Object.fromEntries(
    readdirSync(packages).flatMap((dir) => {
      const manifest = join(packages, dir, "package.json")
      if (!statSync(manifest, { throwIfNoEntry: false })) return []
      const { name } = JSON.parse(readFileSync(manifest, "utf8"))
      return [
        [name, [`packages/${dir}/build/dts/index.d.ts`]],
        [`${name}/*`, [`packages/${dir}/build/dts/*.d.ts`]]
      ]
    })
  )
}

const host = ts.createCompilerHost(options)
const { fileExists, getSourceFile, readFile } = host
host.fileExists = (path) => examples.has(path) || fileExists.call(host, path)
host.readFile = (path) => examples.get(path)?.text ?? readFile.call(host, path)
host.getSourceFile = (path, language, ...rest) => {
  const example = examples.get(path)
  return example !== undefined
    ? ts.createSourceFile(path, example.text, language)
    : getSourceFile.call(host, path, language, ...rest)
}

const program = ts.createProgram([...examples.keys()], options, host)
const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) =>
  d.file === undefined || examples.has(d.file.fileName)
)
for (const d of diagnostics) {
  const message = ts.flattenDiagnosticMessageText(d.messageText, "\n")
  const example = d.file !== undefined ? examples.get(d.file.fileName) : undefined
  if (example === undefined) {
    console.error(message)
    continue
  }
  const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0)
  console.error(`${relative(root, example.source)}:${example.line + line}: @example: ${message}`)
}
if (diagnostics.length > 0) {
  console.error(`${diagnostics.length} error(s) in the @example blocks`)
  process.exit(1)
}
console.log(`${examples.size} @example blocks type-check`)
