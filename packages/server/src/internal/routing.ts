/**
 * What the router cannot say about a request it does not route, said as the API's other 4xx are:
 * a known path with another method (405 and the methods it has), a path parameter the router
 * could not read (400 naming it), or no route at all (404); and the two things about a request
 * every endpoint would misread, found before routing: a query parameter given more than once
 * (the endpoint's schema would see an array), and a JSON body nested deeper than any argument
 * may be (its decode error would be formatted recursively, past the stack).
 */

/** A route the server serves: its method and its path, `:name` for a parameter. */
export interface Route {
  readonly method: string
  readonly path: string
}

/** Why a request matched no route. */
export type Unrouted =
  | { readonly _tag: "MethodNotAllowed"; readonly allow: ReadonlyArray<string> }
  | { readonly _tag: "BadPathParameter"; readonly name: string; readonly problem: string }
  | { readonly _tag: "NotFound" }

// find-my-way's `maxParamLength`: a longer parameter matches no route.
const maxParamLength = 100

interface Template {
  readonly method: string
  readonly pattern: RegExp
  readonly names: ReadonlyArray<string>
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const template = (route: Route): Template => {
  const names: Array<string> = []
  const source = route.path.split("/").map((segment) => {
    if (!segment.startsWith(":")) return escape(segment)
    names.push(segment.slice(1))
    return "([^/]+)"
  }).join("/")
  return { method: route.method, pattern: new RegExp(`^${source}$`), names }
}

/** Why a parameter as it stands in the path could not be read, if it could not. */
const paramProblem = (raw: string): string | undefined => {
  let decoded: string
  try {
    decoded = decodeURIComponent(raw)
  } catch {
    return "is not valid percent-encoding"
  }
  return decoded.length > maxParamLength || raw.length > maxParamLength
    ? `is longer than ${maxParamLength} characters`
    : undefined
}

/**
 * The diagnosis of requests no route took, over `routes`: called only then, so it may take its
 * time (a scan of every route).
 */
export const make = (routes: ReadonlyArray<Route>) => {
  const templates = routes.map(template)
  return (method: string, url: string): Unrouted => {
    const path = url.split("?")[0]!
    const matching = templates.flatMap((t) => {
      const match = t.pattern.exec(path)
      return match === null ? [] : [{ template: t, values: match.slice(1) }]
    })
    if (matching.length === 0) return { _tag: "NotFound" }
    const same = matching.filter(({ template }) => template.method === method)
    if (same.length === 0) {
      const methods = new Set(matching.map(({ template }) => template.method))
      // the router answers HEAD wherever it answers GET
      if (methods.has("GET")) methods.add("HEAD")
      return { _tag: "MethodNotAllowed", allow: [...methods].sort() }
    }
    for (const { template, values } of same) {
      for (let i = 0; i < values.length; i++) {
        const problem = paramProblem(values[i]!)
        if (problem !== undefined) return { _tag: "BadPathParameter", name: template.names[i]!, problem }
      }
    }
    return { _tag: "NotFound" }
  }
}

/** The first query parameter of `url` given more than once, and how many times. */
export const repeatedParameter = (url: string): { readonly name: string; readonly times: number } | undefined => {
  const query = url.indexOf("?")
  // a parameter given twice needs two: most requests have none or one
  if (query === -1 || url.indexOf("&", query) === -1) return undefined
  const counts = new Map<string, number>()
  for (const key of new URLSearchParams(url.slice(query + 1)).keys()) counts.set(key, (counts.get(key) ?? 0) + 1)
  for (const [name, times] of counts) {
    if (times > 1) return { name, times }
  }
  return undefined
}

/**
 * Whether JSON `text` nests arrays and objects more than `max` deep: one pass, brackets inside
 * strings skipped. Text that is not JSON is left to the parser.
 */
export const nestsDeeperThan = (text: string, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: the next character is escaped
      else if (c === 34) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 || c === 123) {
      if (++depth > max) return true
    } else if (c === 93 || c === 125) {
      depth--
    }
  }
  return false
}
