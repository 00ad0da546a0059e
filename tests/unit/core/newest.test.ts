/**
 * The bounded collections of `internal/newest.ts` (a gate's recently paused calls, its own answers,
 * the evaluator's candidates per tool name): whatever is added, in whatever order, they hold at
 * most their bound, and always the newest entries, in the order they were last added.
 */
import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import * as Newest from "../../../packages/core/src/internal/newest.js"

/** Adds (or refreshes, as a gate's `remember` does) each key in turn; the model keeps them all. */
const replay = (keys: ReadonlyArray<number>, max: number) => {
  let set = new Set<number>()
  let map = new Map<number, number>()
  const model: Array<number> = []
  const checks: Array<{ set: Array<number>; map: Array<number>; model: Array<number> }> = []
  keys.forEach((key, i) => {
    set.delete(key)
    set.add(key)
    set = Newest.setOf(set, max)
    map.delete(key)
    map.set(key, i)
    map = Newest.mapOf(map, max)
    const at = model.indexOf(key)
    if (at >= 0) model.splice(at, 1)
    model.push(key)
    checks.push({ set: [...set], map: [...map.keys()], model: [...model] })
  })
  return checks
}

describe("Newest", () => {
  test("holds at most its bound, always the newest keys in the order last added", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 300 }),
        fc.integer({ min: 1, max: 20 }),
        (keys, max) => {
          for (const { map, model, set } of replay(keys, max)) {
            expect(set.length).toBeLessThanOrEqual(max)
            // never fewer than the newest half of the bound (or all there are)
            expect(set.length).toBeGreaterThanOrEqual(Math.min(model.length, Math.max(1, Math.floor(max / 2))))
            expect(set).toEqual(model.slice(model.length - set.length))
            expect(map).toEqual(set)
          }
        }
      )
    )
  })

  test("a map keeps the values of the entries it keeps", () => {
    let map = new Map<string, number>()
    for (let i = 0; i < 25; i++) {
      map.set(`k${i}`, i)
      map = Newest.mapOf(map, 10)
    }
    expect(map.size).toBeLessThanOrEqual(10)
    expect([...map]).toEqual(Array.from({ length: map.size }, (_, j) => [`k${25 - map.size + j}`, 25 - map.size + j]))
  })
})
