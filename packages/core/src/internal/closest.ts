/**
 * "Did you mean ...?": the known word closest to a misspelt one, by edit distance, when it is
 * close enough to be the likely intent (a typo, not another word).
 */

/**
 * The edit distance between `a` and `b` (insertions, deletions, substitutions and swaps of two
 * neighbours, the usual typos), or `limit + 1` when it is above `limit`.
 */
const distance = (a: string, b: string, limit: number): number => {
  if (Math.abs(a.length - b.length) > limit) return limit + 1
  let before: Array<number> = []
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    let best = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1)
      current[j] = d
      best = Math.min(best, d)
    }
    if (best > limit) return limit + 1
    before = previous
    previous = current
  }
  return previous[b.length]!
}

/**
 * The candidate closest to `word` (case ignored), or `undefined` when none is within a third of
 * its length (at least one edit), or when two are equally close.
 */
export const closest = (word: string, candidates: Iterable<string>): string | undefined => {
  const lower = word.toLowerCase()
  const limit = Math.max(1, Math.floor(word.length / 3))
  let best: string | undefined
  let bestDistance = limit + 1
  let tie = false
  for (const candidate of new Set(candidates)) {
    const d = distance(lower, candidate.toLowerCase(), limit)
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
      tie = false
    } else if (d === bestDistance && best !== undefined && best.toLowerCase() !== candidate.toLowerCase()) tie = true
  }
  return best === undefined || tie || best === word ? undefined : best
}

/** ` (did you mean "deny"?)`, or nothing. */
export const didYouMean = (word: string, candidates: Iterable<string>): string => {
  const found = closest(word, candidates)
  return found === undefined ? "" : ` (did you mean ${JSON.stringify(found)}?)`
}
