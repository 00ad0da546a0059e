/**
 * A policy file's diagnostics, as an editor or a CI annotation shows them: every problem and
 * every warning with its severity, its path in the document, and the line and column where it is
 * written (a syntax error's own position; a problem's value, or its key when the key is the
 * problem: an unknown key, an argument path no tool has).
 */
import { Either } from "effect"
import type * as Policy from "../Policy.js"
import { PolicyInvalid, type Problem } from "../ToolGateError.js"
import * as PolicyText from "./policyText.js"
import { parsePath } from "./policyValidate.js"

export interface Diagnostic {
  readonly severity: "error" | "warning"
  /** where in the document (`deny[0].args.comand`); `""` for the whole document */
  readonly path: string
  readonly message: string
  /** a warning's kind */
  readonly kind?: Policy.LintWarning["kind"]
  /** the rule a warning is about */
  readonly ruleId?: string
  readonly line?: number
  readonly column?: number
}

export interface CheckResult {
  /** the compiled policy when it is valid */
  readonly policy?: Policy.Policy
  /** errors first, then warnings, each in document order */
  readonly diagnostics: ReadonlyArray<Diagnostic>
}

const at = (position: PolicyText.Position | undefined) =>
  position === undefined ? {} : { line: position.line, column: position.column }

/** Where a problem is written: its value, or its key when the key is the problem (an unknown key). */
export const positionOf = (locate: PolicyText.Locate, problem: Problem): PolicyText.Position | undefined =>
  locate(parsePath(problem.path), problem.message.startsWith("unknown key"))

/** The problems of a policy read from text, each with the line and column where it is written. */
export const located = (error: PolicyInvalid, locate: PolicyText.Locate): PolicyInvalid =>
  new PolicyInvalid({
    problems: error.problems.map((problem) => ({ ...problem, ...at(positionOf(locate, problem)) })),
    ...(error.source !== undefined ? { source: error.source } : {})
  })

export const check = (
  text: string,
  format: "json" | "yaml",
  build: (raw: unknown) => Either.Either<Policy.Policy, PolicyInvalid>,
  warningsOf: (policy: Policy.Policy) => ReadonlyArray<Policy.LintWarning>
): CheckResult => {
  const parsed = format === "json" ? PolicyText.parseJsonLocated(text) : PolicyText.parseYamlLocated(text)
  if (Either.isLeft(parsed)) {
    return {
      diagnostics: parsed.left.map((problem): Diagnostic => {
        const { message, position } = PolicyText.splitPosition(problem)
        return { severity: "error", path: "", message, ...at(position) }
      })
    }
  }
  const { locate, value } = parsed.right
  const built = build(value)
  if (Either.isLeft(built)) {
    return {
      diagnostics: built.left.problems.map((problem): Diagnostic => ({
        severity: "error",
        path: problem.path,
        message: problem.message,
        ...at(positionOf(locate, problem))
      }))
    }
  }
  const policy = built.right
  // the tool checks' warnings come after the policy's own: put them all in document order
  const byPosition = (a: Diagnostic, b: Diagnostic) =>
    (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0)
  return {
    policy,
    diagnostics: warningsOf(policy).map((warning): Diagnostic => ({
      severity: "warning",
      path: warning.path,
      message: warning.message,
      kind: warning.kind,
      ruleId: warning.ruleId,
      ...at(locate(parsePath(warning.path), warning.kind === "unknownArgument"))
    })).sort(byPosition)
  }
}
