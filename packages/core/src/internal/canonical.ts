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
