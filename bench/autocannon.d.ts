/**
 * The part of autocannon 9's programmatic API the load test uses (the package ships no types).
 */
declare module "autocannon" {
  namespace autocannon {
    interface Request {
      readonly method?: string
      readonly path?: string
      readonly body?: string
      readonly headers?: Record<string, string>
      /** builds each request; `context` belongs to one connection (one request in flight) */
      readonly setupRequest?: (request: Request, context: Record<string, unknown>) => Request
      readonly onResponse?: (status: number, body: string, context: Record<string, unknown>) => void
    }
    interface Options {
      readonly url: string
      readonly connections?: number
      /** total requests over all connections; overrides `duration` */
      readonly amount?: number
      /** seconds */
      readonly duration?: number
      /** seconds per request */
      readonly timeout?: number
      readonly headers?: Record<string, string>
      readonly requests?: ReadonlyArray<Request>
    }
    interface Histogram {
      readonly average: number
      readonly p50: number
      readonly p99: number
    }
    interface Result {
      readonly latency: Histogram
      readonly errors: number
      readonly timeouts: number
      readonly non2xx: number
      readonly statusCodeStats: Record<string, { readonly count: number }>
    }
    interface Instance extends PromiseLike<Result> {
      readonly stop: () => void
    }
  }
  function autocannon(options: autocannon.Options): autocannon.Instance
  export default autocannon
}
