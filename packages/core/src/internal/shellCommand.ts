/**
 * The `{ shell: pattern }` argument matcher: a command line is split into its simple commands
 * (`;`, `&&`, `||`, `|`, `&`, `( )`, newlines) by `shell-quote`, each command's words are joined
 * by single spaces, and the glob is matched against each. What the split cannot see is
 * "opaque": command and process substitution, unterminated quotes, a command name that is a
 * variable or a shell glob, commands piped into a shell, nesting deeper than `maxDepth`, and
 * lines longer than `maxLength`. A deny or requireApproval matcher matches an opaque line (fail
 * closed); an allow matcher does not.
 */
import { parse, type ParseEntry } from "shell-quote"
import type * as Glob from "./glob.js"

/** Longer command lines are not parsed (the parser costs about a microsecond a character). */
export const maxLength = 16 * 1024

/** How deep `bash -c "..."` and `eval` are followed. */
export const maxDepth = 2

/** Command positions tried per simple command (each after a wrapper such as `sudo`). */
const maxStarts = 16

/** Words after a wrapper where the wrapped command may start (past its options). */
const wrapperWindow = 8

/** Commands that run the command given in their arguments. */
const wrappers = new Set([
  "sudo",
  "doas",
  "command",
  "builtin",
  "exec",
  "env",
  "nohup",
  "nice",
  "ionice",
  "time",
  "timeout",
  "xargs",
  "stdbuf",
  "setsid",
  "chrt",
  "taskset",
  "flock",
  "busybox",
  "unbuffer",
  "watch"
])

/** Shells: `-c` gives a command line to follow; with no operand they read commands from stdin. */
const shells = new Set(["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "su"])

/** Words that may precede a command without being one. */
const reserved = new Set([
  "!",
  "{",
  "}",
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "case",
  "esac",
  "select",
  "function",
  "coproc",
  "[[",
  "]]"
])

/** Operators that end a simple command; the redirections (`>`, `2>&1`...) stay as its words. */
const separators = new Set(["||", "&&", ";", ";;", ";;&", ";&", "|", "|&", "&", "(", ")"])

const assignment = /^[A-Za-z_][A-Za-z0-9_]*\+?=/
const shellOption = /^-[A-Za-z]*c[A-Za-z]*$/

/** A simple command: its words, and which are unquoted shell globs (`/bin/r?`). */
interface Command {
  readonly words: Array<string>
  readonly globs: Array<boolean>
}

/** What a command line is made of. */
export interface Analysis {
  /** the simple commands, words joined by single spaces */
  readonly commands: Array<string>
  /** the texts a deny matcher tries: each command from each command position, names without a directory */
  readonly candidates: Array<string>
  /** part of the line cannot be seen (substitution, unterminated quote, dynamic command name...) */
  opaque: boolean
}

/**
 * Splits the text at unquoted newlines, drops comments, and escapes the other unquoted `#` (which
 * `shell-quote` would take as a comment even inside a word). One pass; flags substitutions and
 * unterminated quotes.
 */
const lines = (text: string, analysis: Analysis): Array<string> => {
  const out: Array<string> = []
  let line = ""
  let quote = ""
  let wordStart = true
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    const n = text[i + 1]
    if (quote === "'") {
      if (c === "'") quote = ""
      line += c
      continue
    }
    if (quote === "$'") {
      // bash's ANSI-C quoting, $'...': a backslash escapes any character, `'` included
      if (c === "\\" && n !== undefined) {
        line += c + n
        i++
      } else {
        if (c === "'") quote = ""
        line += c
      }
      continue
    }
    if (quote === "\"") {
      if (c === "\\" && n !== undefined) {
        line += c + n
        i++
        continue
      }
      if (c === "\"") quote = ""
      else if (c === "`" || (c === "$" && n === "(")) analysis.opaque = true
      line += c
      continue
    }
    if (c === "\\") {
      // a backslash-newline joins lines; any other escaped character is part of a word
      if (n !== "\n" && n !== undefined) line += c + n
      i++
      wordStart = false
      continue
    }
    if (c === "\n") {
      out.push(line)
      line = ""
      wordStart = true
      continue
    }
    if (c === "#") {
      if (wordStart) {
        while (i + 1 < text.length && text[i + 1] !== "\n") i++
        continue
      }
      line += "\\#"
      continue
    }
    if (c === "$" && n === "'") {
      quote = "$'"
      line += c + n
      i++
      wordStart = false
      continue
    }
    if (c === "'" || c === "\"") quote = c
    else if (c === "`" || ((c === "$" || c === "<" || c === ">") && n === "(")) analysis.opaque = true
    line += c
    wordStart = c === " " || c === "\t" || ";&|()<>".includes(c)
  }
  if (quote !== "") analysis.opaque = true
  out.push(line)
  return out
}

/** Keeps `$VAR` and `${VAR}` literal: the gate does not know the agent's environment. */
const keepVariable = (key: string) => `$${key}`

/** `shell-quote`'s reading of a line, or `undefined` when it refuses it (`${` unclosed...). */
const tokens = (line: string): Array<ParseEntry> | undefined => {
  try {
    return parse(line, keepVariable)
  } catch {
    return undefined
  }
}

const commandsOf = (line: string, analysis: Analysis): Array<Command> => {
  const commands: Array<Command> = [{ words: [], globs: [] }]
  const entries = tokens(line)
  if (entries === undefined) {
    analysis.opaque = true
    return []
  }
  for (const entry of entries) {
    const current = commands[commands.length - 1]!
    if (typeof entry === "string") {
      current.words.push(entry)
      current.globs.push(false)
    } else if ("comment" in entry) analysis.opaque = true
    else if (entry.op === "glob") {
      current.words.push((entry as { pattern: string }).pattern)
      current.globs.push(true)
    } else if (separators.has(entry.op)) commands.push({ words: [], globs: [] })
    else if (entry.op === "<(" || entry.op === ">(") analysis.opaque = true
    else {
      current.words.push(entry.op)
      current.globs.push(false)
    }
  }
  return commands.filter((command) => command.words.length > 0)
}

const basename = (word: string): string => word.slice(word.lastIndexOf("/") + 1)

/** A command name the gate cannot know: a variable, a shell glob, a brace expansion. */
const dynamic = (command: Command, at: number): boolean => {
  const word = command.words[at]!
  return command.globs[at]! || word.includes("$") || (word.startsWith("{") && /,|\.\./.test(word))
}

/** Adds the candidates of one simple command, following wrappers and `sh -c`. */
const follow = (command: Command, depth: number, analysis: Analysis): void => {
  const { words } = command
  // the command as written first: a deny matcher tries everything an allow matcher would
  analysis.candidates.push(words.join(" "))
  const starts = [0]
  const seen = new Set(starts)
  for (let s = 0; s < starts.length; s++) {
    let p = starts[s]!
    while (p < words.length && (assignment.test(words[p]!) || reserved.has(words[p]!))) p++
    if (p >= words.length) continue
    if (dynamic(command, p)) {
      analysis.opaque = true
      continue
    }
    const name = basename(words[p]!)
    const rest = words.slice(p + 1)
    if (p > 0) analysis.candidates.push([words[p]!, ...rest].join(" "))
    if (name !== words[p]) analysis.candidates.push([name, ...rest].join(" "))
    if (wrappers.has(name)) {
      for (let q = p + 1; q < words.length && q <= p + wrapperWindow; q++) {
        if (!seen.has(q)) {
          seen.add(q)
          starts.push(q)
        }
      }
      if (starts.length > maxStarts) {
        analysis.opaque = true
        return
      }
    }
    if (shells.has(name)) {
      const option = rest.findIndex((word) => shellOption.test(word))
      if (option !== -1 && option + 1 < rest.length) nested(rest[option + 1]!, depth, analysis)
      // no operand (or -s): the shell reads its commands from stdin, which the gate cannot see
      else if (!rest.some((word) => !word.startsWith("-")) || rest.includes("-s")) analysis.opaque = true
    }
    if (name === "eval") nested(rest.join(" "), depth, analysis)
  }
}

const nested = (line: string, depth: number, analysis: Analysis): void => {
  if (depth >= maxDepth) analysis.opaque = true
  else addLine(line, depth + 1, analysis)
}

const addLine = (line: string, depth: number, analysis: Analysis): void => {
  for (const part of lines(line, analysis)) {
    for (const command of commandsOf(part, analysis)) {
      if (depth === 0) analysis.commands.push(command.words.join(" "))
      follow(command, depth, analysis)
    }
  }
}

/** The simple commands of a command line. */
export const analyze = (line: string): Analysis => {
  const analysis: Analysis = { commands: [], candidates: [], opaque: false }
  if (line.length > maxLength) analysis.opaque = true
  else addLine(line, 0, analysis)
  return analysis
}

/**
 * The last line analysed and its analysis: every shell rule on the same argument reads the same
 * line, so a call is parsed once however many rules look at it.
 */
let last: { readonly line: string; readonly analysis: Analysis } | undefined

const analyzeOnce = (line: string): Analysis => {
  if (last?.line !== line) last = { line, analysis: analyze(line) }
  return last.analysis
}

/** An argument vector (`["rm", "-rf", "/"]`) is one simple command, already split into words. */
export const analyzeArgv = (argv: ReadonlyArray<string>): Analysis => {
  const analysis: Analysis = { commands: [argv.join(" ")], candidates: [], opaque: false }
  let length = 0
  for (const word of argv) length += word.length + 1
  if (length > maxLength) analysis.opaque = true
  else follow({ words: [...argv], globs: argv.map(() => false) }, 0, analysis)
  return analysis
}

/**
 * The test a `{ shell }` matcher runs on an argument value (a command line, or an argument
 * vector of strings). `deny`-side (deny and requireApproval rules): some command matches, or
 * the line is opaque. `allow`-side: the line is not opaque and every command matches as written.
 */
export const matcher = (
  glob: Glob.Glob,
  caseInsensitive: boolean,
  side: "deny" | "allow"
): (value: unknown) => boolean => {
  const test = caseInsensitive ? (text: string) => glob.test(text.toLowerCase()) : glob.test
  return (value) => {
    const analysis = typeof value === "string"
      ? analyzeOnce(value)
      : Array.isArray(value) && value.length > 0 && value.every((word) => typeof word === "string")
      ? analyzeArgv(value as ReadonlyArray<string>)
      : undefined
    if (analysis === undefined) return false
    if (side === "deny") return analysis.opaque || analysis.candidates.some(test)
    return !analysis.opaque && analysis.commands.length > 0 && analysis.commands.every(test)
  }
}
