/**
 * The bounded collections of `internal/newest.ts` (a gate's recently paused calls, its own answers,
 * the session approvals it holds, the evaluator's candidates per tool name): whatever is added,
 * used again or deleted, in whatever order, they hold exactly the newest entries up to their bound,
 * in the order they were last added.
 */
import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import * as Newest from "../../../packages/core/src/internal/newest.js"

type Step = { readonly op: "use" | "delete"; readonly key: number }

const step = fc.record({
  op: fc.constantFrom<Step["op"]>("use", "use", "use", "delete"),
  key: fc.integer({ min: 0, max: 40 })
})

describe("Newest.keeper", () => {
  test("keeps exactly the newest keys up to its bound, in the order last used", () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 50, maxLength: 400 }), fc.integer({ min: 1, max: 12 }), (steps, max) => {
        const set = new Set<number>()
        const map = new Map<number, number>()
        const keepSet = Newest.keeper(set, max)
        const keepMap = Newest.keeper(map, max)
        const model: Array<number> = []
        steps.forEach(({ key, op }, i) => {
          set.delete(key)
          map.delete(key)
          const at = model.indexOf(key)
          if (at >= 0) model.splice(at, 1)
          if (op === "use") {
            set.add(key)
            map.set(key, i)
            model.push(key)
            keepSet()
            keepMap()
            if (model.length > max) model.shift()
          }
          expect([...set]).toEqual(model)
          expect([...map.keys()]).toEqual(model)
        })
      })
    )
  })

  test("a map keeps the values of the entries it keeps", () => {
    const map = new Map<string, number>()
    const keep = Newest.keeper(map, 10)
    for (let i = 0; i < 25; i++) {
      map.set(`k${i}`, i)
      keep()
    }
    expect([...map]).toEqual(Array.from({ length: 10 }, (_, j) => [`k${15 + j}`, 15 + j]))
  })
})
