import { createHash } from "node:crypto"

/**
 * Canonical JSON: object keys sorted at every depth, no whitespace. Two argument objects that are
 * deep-equal regardless of key order produce the same text, and so the same digest.
 * Returns `undefined` for values JSON cannot carry (undefined, functions, symbols, bigints,
 * non-finite numbers, cycles) so callers can reject them with their own typed error.
 */
export const canonicalJson = (value: unknown): string | undefined => {
  const seen = new Set<object>()
  const write = (v: unknown): string | undefined => {
    switch (typeof v) {
      case "string":
        return JSON.stringify(v)
      case "boolean":
        return v ? "true" : "false"
      case "number":
        return Number.isFinite(v) ? JSON.stringify(v) : undefined
      case "object": {
        if (v === null) return "null"
        if (seen.has(v)) return undefined
        seen.add(v)
        let out: string | undefined
        if (Array.isArray(v)) {
          const parts: Array<string> = []
          for (const item of v) {
            const s = write(item)
            if (s === undefined) return undefined
            parts.push(s)
          }
          out = `[${parts.join(",")}]`
        } else {
          const proto = Object.getPrototypeOf(v)
          if (proto !== Object.prototype && proto !== null) return undefined
          const keys = Object.keys(v).sort()
          const parts: Array<string> = []
          for (const key of keys) {
            const s = write((v as Record<string, unknown>)[key])
            if (s === undefined) return undefined
            parts.push(`${JSON.stringify(key)}:${s}`)
          }
          out = `{${parts.join(",")}}`
        }
        seen.delete(v)
        return out
      }
      default:
        return undefined
    }
  }
  return write(value)
}

/** SHA-256 (hex) of a text: collision-resistant, because an approval is bound to it. */
export const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

/**
 * A cheap, allocation-free check that a value is plain JSON (the hot path's guard). Depth-limited
 * instead of cycle-tracking: anything deeper is left to `canonicalJson` to judge.
 */
export const isPlainJson = (value: unknown, depth = 0): boolean => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value)
    case "object": {
      if (value === null) return true
      if (depth > 32) return false
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i], depth + 1)) return false
        return true
      }
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) return false
      for (const key in value) {
        if (!isPlainJson((value as Record<string, unknown>)[key], depth + 1)) return false
      }
      return true
    }
    default:
      return false
  }
}
