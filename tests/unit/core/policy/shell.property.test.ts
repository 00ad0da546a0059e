import * as Policy from "@tool-gate/core/Policy"
import { describe, expect, it } from "bun:test"
import { FastCheck as fc } from "effect"
import * as ShellCommand from "../../../../packages/core/src/internal/shellCommand.js"

const word = fc.constantFrom("rm", "-rf", "/", "ls", "git", "status", "x", "build", "-la", "push", "--force")
const words = fc.array(word, { minLength: 1, maxLength: 5 })
const operator = fc.constantFrom(";", "&&", "||", "|", "&", "\n", " ;\n ", "\n\n")
const blank = fc.constantFrom("", " ", "  ", "\t")

const deny = Policy.unsafeMake({ deny: [{ tool: "bash", args: { command: { shell: "rm -rf*" } } }] })
const allow = Policy.unsafeMake({ default: "deny", allow: [{ tool: "bash", args: { command: { shell: "git *" } } }] })
const tag = (policy: Policy.Policy, command: string) => policy.evaluate({ name: "bash", args: { command } })._tag

describe("{ shell } matcher properties", () => {
  it("a denied command stays denied wherever it is put in a line", () => {
    fc.assert(
      fc.property(words, words, operator, operator, blank, (rest, other, op1, op2, pad) => {
        const denied = ["rm", "-rf", ...rest].join(pad === "" ? " " : pad)
        const x = other.join(" ")
        for (
          const line of [
            denied,
            `${pad}${denied}${pad}`,
            `${x}${op1}${denied}`,
            `${denied}${op1}${x}`,
            `${x}${op1}${denied}${op2}${x}`,
            `(${denied})`,
            `{ ${denied}; }`,
            `sudo ${denied}`,
            `env A=1 ${denied}`,
            `/usr/bin/${denied}`,
            `bash -c '${denied}'`,
            `sh -c "${x}${op1 === "\n" ? ";" : op1}${denied}"`
          ]
        ) expect([line, tag(deny, line)]).toEqual([line, "Deny"])
      }),
      { numRuns: 300 }
    )
  })

  it("an allow rule allows a line exactly when it allows each of its commands", () => {
    const command = fc.oneof(words, words.map((w) => ["git", ...w]))
    let allowed = 0
    fc.assert(
      fc.property(command, command, operator, (a, b, op) => {
        const left = a.join(" ")
        const right = b.join(" ")
        const line = `${left}${op}${right}`
        const each = tag(allow, left) === "Allow" && tag(allow, right) === "Allow"
        expect([line, tag(allow, line)]).toEqual([line, each ? "Allow" : "Deny"])
        if (each) allowed++
      }),
      { numRuns: 2000 }
    )
    expect(allowed).toBeGreaterThan(200)
  })
})

describe("{ shell } matcher on arbitrary input", () => {
  const piece = fc.oneof(
    fc.constantFrom(
      "'",
      "\"",
      "\\",
      "$",
      "(",
      ")",
      "`",
      "#",
      "\n",
      ";",
      "&",
      "|",
      "<",
      ">",
      "{",
      "}",
      "*",
      "?",
      "=",
      " "
    ),
    fc.constantFrom(
      "\ud800",
      "\udc00",
      "\u0000",
      "\u202e",
      "\u00a0",
      "$'",
      "<<",
      "${",
      "$((",
      "sh -c",
      "sudo",
      "rm -rf /"
    ),
    fc.string({ unit: "binary", minLength: 1, maxLength: 3 })
  )
  const line = fc.array(piece, { maxLength: 30 }).map((pieces) => pieces.join(""))

  it("never throws, and a deny matcher tries every command an allow matcher would", () => {
    fc.assert(
      fc.property(fc.oneof(line, fc.array(line, { minLength: 1, maxLength: 4 })), (input) => {
        const analysis = typeof input === "string" ? ShellCommand.analyze(input) : ShellCommand.analyzeArgv(input)
        for (const command of analysis.commands) expect(analysis.candidates).toContain(command)
        const same = (pattern: string) => {
          const denyTag = Policy.unsafeMake({ deny: [{ tool: "t", args: { c: { shell: pattern } } }] })
            .evaluate({ name: "t", args: { c: input } })._tag
          const allowTag =
            Policy.unsafeMake({ default: "deny", allow: [{ tool: "t", args: { c: { shell: pattern } } }] })
              .evaluate({ name: "t", args: { c: input } })._tag
          // whatever the allow side accepts, the deny side catches
          if (allowTag === "Allow") expect(denyTag).toBe("Deny")
        }
        same("*")
        same("*rm*")
      }),
      { numRuns: 2000 }
    )
  })
})
