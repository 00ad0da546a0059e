/**
 * The table of bad inputs (tests/server/bad-inputs.test.ts): each row a request that changes
 * nothing and the response it gets. Shared with tests/server/lean-routes.test.ts, which sends
 * every row to the server with its lean routes and to one with the HttpApi router alone.
 */
import { ToolCall } from "@tool-gate/core"
import { Effect } from "effect"
import { bash, paused, type RequestOptions, type TestServer } from "./server.js"

export interface Ids {
  /** pending, session s1 */
  readonly pending: string
  /** pending, session team-b-1 */
  readonly teamB: string
  readonly expired: string
  /** approved once by ana */
  readonly approved: string
  /** a session approval of s1 */
  readonly grant: string
}

/** The requests and approvals the rows are about, made through the server's gate. */
export const setUpIds = (server: TestServer) =>
  Effect.gen(function*() {
    const pending = yield* paused(server.gate, bash("s1", "c1"))
    const teamB = yield* paused(server.gate, bash("team-b-1", "c2"))
    const approved = yield* paused(server.gate, bash("s1", "c3"))
    yield* server.gate.respond(approved, { decision: "approve_once", respondedBy: "ana" })
    const expired = yield* paused(server.gate, { id: "q1", name: "quick", sessionKey: "s1" })
    yield* server.gate.awaitDecision(expired)
    yield* server.gate.recordApproval("bash", ToolCall.SessionKey.make("s1"), true)
    const [grant] = yield* server.gate.sessionApprovals(ToolCall.SessionKey.make("s1"))
    return { pending, teamB, expired, approved, grant: grant!.id } satisfies Ids
  })

export interface Expected {
  readonly status: number
  readonly tag?: string
  /** the problem paths the body names (`issues[].path` or `problems[].path`, dotted) */
  readonly paths?: ReadonlyArray<string>
  /** a part of the body's `message` */
  readonly message?: string
  /** the `Allow` header (a 405) */
  readonly allow?: string
}

export interface Row {
  readonly input: string
  readonly method: string
  readonly path: (ids: Ids) => string
  readonly options?: RequestOptions
  readonly expected: Expected
}

export const respond = (ids: Ids) => `/approvals/${ids.pending}/respond`
const extend = (ids: Ids) => `/approvals/${ids.pending}/extend`
export const big = "x".repeat(70 * 1024)

const malformed: ReadonlyArray<Row> = [
  {
    input: "truncated JSON",
    method: "POST",
    path: respond,
    options: { raw: "{\"decision\":" },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "not valid JSON" }
  },
  {
    input: "not JSON at all",
    method: "POST",
    path: extend,
    options: { raw: "ttlMs=5" },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "not valid JSON" }
  },
  {
    input: "an empty body",
    method: "POST",
    path: respond,
    options: { raw: "" },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: [""] }
  },
  {
    input: "an array body",
    method: "POST",
    path: respond,
    options: { body: [] },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: [""] }
  }
]

const wrongTypes: ReadonlyArray<Row> = [
  {
    input: "decision: 42",
    method: "POST",
    path: respond,
    options: { body: { decision: 42 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["decision"] }
  },
  {
    input: "editedArgs not an object",
    method: "POST",
    path: respond,
    options: { body: { decision: "approve_once", editedArgs: "ls" } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["editedArgs"] }
  },
  {
    input: "two bad fields at once",
    method: "POST",
    path: respond,
    options: { body: { decision: "approve_session", scope: "everything", sessionTtlMs: -5 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["scope", "sessionTtlMs"] }
  },
  {
    input: "a misspelt key",
    method: "POST",
    path: respond,
    options: { body: { decision: "deny", respondedby: "x" } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["respondedby"] }
  },
  {
    input: "scope on a deny",
    method: "POST",
    path: respond,
    options: { body: { decision: "deny", scope: "tool" } },
    expected: { status: 400, tag: "InvalidResponse", paths: ["scope"] }
  },
  {
    input: "editedArgs on a deny",
    method: "POST",
    path: respond,
    options: { body: { decision: "deny", editedArgs: {} } },
    expected: { status: 400, tag: "InvalidResponse", paths: ["editedArgs"] }
  },
  {
    input: "ttlMs as a string",
    method: "POST",
    path: extend,
    options: { body: { ttlMs: "600000" } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["ttlMs"] }
  },
  {
    input: "ttlMs 0",
    method: "POST",
    path: extend,
    options: { body: { ttlMs: 0 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["ttlMs"] }
  },
  {
    input: "ttlMs 1.5",
    method: "POST",
    path: extend,
    options: { body: { ttlMs: 1.5 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["ttlMs"] }
  },
  {
    input: "ttlMs beyond a year",
    method: "POST",
    path: extend,
    options: { body: { ttlMs: 365 * 86_400_000 + 1 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["ttlMs"] }
  },
  {
    input: "ttlMs -1",
    method: "POST",
    path: extend,
    options: { body: { ttlMs: -1 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["ttlMs"] }
  },
  // JSON has no Infinity, but a number too large for a double parses as one
  {
    input: "ttlMs 1e400 (Infinity)",
    method: "POST",
    path: extend,
    options: { raw: "{\"ttlMs\":1e400}" },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["ttlMs"] }
  },
  {
    input: "sessionTtlMs 1e400 (Infinity)",
    method: "POST",
    path: respond,
    options: { raw: "{\"decision\":\"approve_session\",\"sessionTtlMs\":1e400}" },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["sessionTtlMs"] }
  },
  {
    input: "sessionTtlMs 1.5",
    method: "POST",
    path: respond,
    options: { body: { decision: "approve_session", sessionTtlMs: 1.5 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["sessionTtlMs"] }
  },
  {
    input: "sessionTtlMs beyond a year",
    method: "POST",
    path: respond,
    options: { body: { decision: "approve_session", sessionTtlMs: 365 * 86_400_000 + 1 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["sessionTtlMs"] }
  },
  {
    input: "limit=0",
    method: "GET",
    path: () => "/audit?limit=0",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["limit"] }
  },
  {
    input: "limit=abc",
    method: "GET",
    path: () => "/audit?limit=abc",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["limit"] }
  },
  {
    input: "since=Infinity",
    method: "GET",
    path: () => "/audit?since=Infinity",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["since"] }
  },
  {
    input: "until=NaN",
    method: "GET",
    path: () => "/audit?until=NaN",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["until"] }
  },
  {
    input: "outcome=maybe",
    method: "GET",
    path: () => "/audit?outcome=maybe",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["outcome"] }
  },
  {
    input: "afterSeq=-1",
    method: "GET",
    path: () => "/audit/stream?afterSeq=-1",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["afterSeq"] }
  },
  {
    input: "Last-Event-ID: abc",
    method: "GET",
    path: () => "/audit/stream",
    options: { headers: { "last-event-id": "abc" } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["last-event-id"] }
  },
  {
    input: "a blank request id",
    method: "GET",
    path: () => "/approvals/%20%20",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["requestId"] }
  }
]

const huge: ReadonlyArray<Row> = [
  {
    input: "70 KiB body (Content-Length)",
    method: "POST",
    path: respond,
    options: { body: { decision: "deny", reason: big } },
    expected: { status: 413, tag: "PayloadTooLarge", message: "65536 bytes" }
  },
  {
    input: "1 MiB body",
    method: "POST",
    path: extend,
    options: { raw: "y".repeat(1024 * 1024) },
    expected: { status: 413, tag: "PayloadTooLarge" }
  }
]

const unknownIds: ReadonlyArray<Row> = [
  {
    input: "unknown request",
    method: "GET",
    path: () => "/approvals/req_unknown",
    expected: { status: 404, tag: "RequestNotFound", message: "req_unknown" }
  },
  {
    input: "unknown request",
    method: "POST",
    path: () => "/approvals/req_unknown/respond",
    options: { body: { decision: "deny" } },
    expected: { status: 404, tag: "RequestNotFound" }
  },
  {
    input: "unknown request",
    method: "POST",
    path: () => "/approvals/req_unknown/extend",
    options: { body: { ttlMs: 1000 } },
    expected: { status: 404, tag: "RequestNotFound" }
  },
  {
    input: "unknown session approval",
    method: "DELETE",
    path: () => "/sessions/s1/approvals/sa_unknown",
    expected: { status: 404, tag: "SessionApprovalNotFound" }
  },
  {
    input: "another session's approval",
    method: "DELETE",
    path: (ids) => `/sessions/s2/approvals/${ids.grant}`,
    expected: { status: 404, tag: "SessionApprovalNotFound" }
  },
  {
    input: "unknown route",
    method: "GET",
    path: () => "/approvals",
    expected: { status: 404, tag: "RouteNotFound", message: "No route for GET /approvals" }
  }
]

// Nested 10,000 deep (and 30,000: still under the body limit), as a whole body and inside the
// edited arguments: each decode error would be formatted recursively, past the stack.
const deepArrays = (depth: number) => "[".repeat(depth) + "]".repeat(depth)
const deepObjects = (depth: number) => "{\"a\":".repeat(depth) + "1" + "}".repeat(depth)

const unrouted: ReadonlyArray<Row> = [
  {
    input: "GET on an answer",
    method: "GET",
    path: respond,
    expected: { status: 405, tag: "MethodNotAllowed", message: "it answers POST", allow: "POST" }
  },
  {
    input: "DELETE on a request",
    method: "DELETE",
    path: (ids) => `/approvals/${ids.pending}`,
    expected: { status: 405, tag: "MethodNotAllowed", allow: "GET, HEAD" }
  },
  {
    input: "PUT on the pending list",
    method: "PUT",
    path: () => "/approvals/pending",
    options: { body: {} },
    expected: { status: 405, tag: "MethodNotAllowed", allow: "GET, HEAD" }
  },
  {
    input: "POST on a session's approvals",
    method: "POST",
    path: () => "/sessions/s1/approvals",
    expected: { status: 405, tag: "MethodNotAllowed", allow: "DELETE, GET, HEAD" }
  },
  {
    input: "POST on health, no token",
    method: "POST",
    path: () => "/health",
    options: { token: null },
    expected: { status: 405, tag: "MethodNotAllowed", allow: "GET, HEAD" }
  },
  {
    input: "POST on the OpenAPI document",
    method: "POST",
    path: () => "/openapi.json",
    expected: { status: 405, tag: "MethodNotAllowed", allow: "GET, HEAD" }
  },
  {
    input: "an unknown route, no token",
    method: "GET",
    path: () => "/nowhere",
    options: { token: null },
    expected: { status: 404, tag: "RouteNotFound", message: "No route for GET /nowhere" }
  },
  {
    input: "a request id that is not percent-encoding",
    method: "GET",
    path: () => "/approvals/req_%ZZ",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["requestId"], message: "not valid percent-encoding" }
  },
  {
    input: "a truncated percent-encoded request id",
    method: "POST",
    path: () => "/approvals/req_%E0%A4%A/respond",
    options: { body: { decision: "deny" } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["requestId"] }
  },
  {
    input: "a request id of 101 characters",
    method: "POST",
    path: () => `/approvals/${"r".repeat(101)}/extend`,
    options: { body: { ttlMs: 1000 } },
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["requestId"], message: "longer than 100 characters" }
  },
  {
    input: "a session key that is not percent-encoding",
    method: "DELETE",
    path: () => "/sessions/s%1/approvals",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["sessionKey"] }
  },
  {
    input: "sessionKey twice",
    method: "GET",
    path: () => "/approvals/pending?sessionKey=s1&sessionKey=team-b-1",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["sessionKey"], message: "sessionKey is given 2 times" }
  },
  {
    input: "limit twice, the same value",
    method: "GET",
    path: () => "/audit?limit=5&limit=5",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["limit"], message: "limit is given 2 times" }
  },
  {
    input: "afterSeq three times",
    method: "GET",
    path: () => "/audit/stream?afterSeq=1&outcome=deny&afterSeq=2&afterSeq=3",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["afterSeq"], message: "afterSeq is given 3 times" }
  },
  {
    input: "limit=1e2",
    method: "GET",
    path: () => "/audit?limit=1e2",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["limit"], message: "limit" }
  },
  {
    input: "limit=10.0",
    method: "GET",
    path: () => "/audit?limit=10.0",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["limit"] }
  },
  {
    input: "limit=%2010",
    method: "GET",
    path: () => "/audit?limit=%2010",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["limit"] }
  },
  {
    input: "afterSeq=1e3",
    method: "GET",
    path: () => "/audit?afterSeq=1e3",
    expected: { status: 400, tag: "HttpApiDecodeError", paths: ["afterSeq"] }
  },
  {
    input: "a body of arrays 10,000 deep",
    method: "POST",
    path: respond,
    options: { raw: deepArrays(10_000) },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "levels deep" }
  },
  {
    input: "a body of arrays 30,000 deep",
    method: "POST",
    path: extend,
    options: { raw: deepArrays(30_000) },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "levels deep" }
  },
  {
    input: "a body of objects 10,000 deep",
    method: "POST",
    path: extend,
    options: { raw: deepObjects(10_000) },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "levels deep" }
  },
  {
    input: "edited arguments 10,000 deep",
    method: "POST",
    path: respond,
    options: { raw: `{"decision":"approve_once","editedArgs":{"x":${deepArrays(10_000)}}}` },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "levels deep" }
  },
  {
    input: "a deep body on a route without one",
    method: "DELETE",
    path: () => "/sessions/s1/approvals",
    options: { raw: deepObjects(10_000) },
    expected: { status: 400, tag: "HttpApiDecodeError", message: "levels deep" }
  },
  {
    input: "brackets inside strings are not nesting",
    method: "POST",
    path: () => "/approvals/req_unknown/respond",
    options: { body: { decision: "deny", reason: "[{".repeat(5_000) } },
    expected: { status: 404, tag: "RequestNotFound" }
  }
]

const settled: ReadonlyArray<Row> = [
  {
    input: "expired request",
    method: "POST",
    path: (ids) => `/approvals/${ids.expired}/respond`,
    options: { body: { decision: "approve_once" } },
    expected: { status: 410, tag: "RequestExpired", message: "late answers are refused" }
  },
  {
    input: "expired request",
    method: "POST",
    path: (ids) => `/approvals/${ids.expired}/extend`,
    options: { body: { ttlMs: 1000 } },
    expected: { status: 410, tag: "RequestExpired" }
  },
  {
    input: "approved request, now denied",
    method: "POST",
    path: (ids) => `/approvals/${ids.approved}/respond`,
    options: { body: { decision: "deny" } },
    expected: { status: 409, tag: "AlreadyResolved", message: "already approved by ana" }
  },
  {
    input: "approved request, extended",
    method: "POST",
    path: (ids) => `/approvals/${ids.approved}/extend`,
    options: { body: { ttlMs: 1000 } },
    expected: { status: 409, tag: "AlreadyResolved" }
  }
]

/** Every endpoint behind a token, with a body that would be valid. */
const protectedEndpoints: ReadonlyArray<Omit<Row, "input" | "expected"> & { readonly answers: boolean }> = [
  { method: "GET", path: () => "/approvals/pending", answers: false },
  { method: "GET", path: (ids) => `/approvals/${ids.pending}`, answers: false },
  { method: "POST", path: respond, options: { body: { decision: "approve_once" } }, answers: true },
  { method: "POST", path: extend, options: { body: { ttlMs: 1000 } }, answers: true },
  { method: "GET", path: () => "/sessions/s1/approvals", answers: false },
  { method: "DELETE", path: (ids) => `/sessions/s1/approvals/${ids.grant}`, answers: true },
  { method: "DELETE", path: () => "/sessions/s1/approvals", answers: true },
  { method: "POST", path: () => "/sessions/s1/clear", answers: true },
  { method: "GET", path: () => "/audit", answers: false },
  { method: "GET", path: () => "/audit/stream", answers: false },
  { method: "GET", path: () => "/audit/head", answers: false },
  { method: "GET", path: () => "/me", answers: false }
]

const withToken = (
  options: RequestOptions | undefined,
  token: Exclude<RequestOptions["token"], undefined>
): RequestOptions => ({ ...options, token })

const tokens: ReadonlyArray<Row> = protectedEndpoints.flatMap((endpoint) => [
  {
    ...endpoint,
    input: "no token",
    options: withToken(endpoint.options, null),
    expected: { status: 401, tag: "Unauthorized", message: "Missing bearer token" }
  },
  {
    ...endpoint,
    input: "unknown token",
    options: withToken(endpoint.options, "made-up-token-0123456789"),
    expected: { status: 401, tag: "Unauthorized", message: "Unknown bearer token" }
  },
  ...(endpoint.answers
    ? [{
      ...endpoint,
      input: "auditor token",
      options: withToken(endpoint.options, "auditor"),
      expected: { status: 403, tag: "Forbidden", message: "needs the approver role" }
    }]
    : [])
])

/**
 * The same endpoints aimed at team-b-1 with the token limited to team-a-*: to that token, team-b-1
 * does not exist (auth.test.ts compares each body with the one for a missing id).
 */
const otherSession: ReadonlyArray<Row> = [
  { method: "GET", path: () => "/approvals/pending?sessionKey=team-b-1", tag: "SessionNotFound" },
  { method: "GET", path: (ids: Ids) => `/approvals/${ids.teamB}`, tag: "RequestNotFound" },
  {
    method: "POST",
    path: (ids: Ids) => `/approvals/${ids.teamB}/respond`,
    options: { body: { decision: "approve_once" } },
    tag: "RequestNotFound"
  },
  {
    method: "POST",
    path: (ids: Ids) => `/approvals/${ids.teamB}/extend`,
    options: { body: { ttlMs: 1000 } },
    tag: "RequestNotFound"
  },
  { method: "GET", path: () => "/sessions/team-b-1/approvals", tag: "SessionNotFound" },
  { method: "DELETE", path: (ids: Ids) => `/sessions/team-b-1/approvals/${ids.grant}`, tag: "SessionApprovalNotFound" },
  { method: "DELETE", path: () => "/sessions/team-b-1/approvals", tag: "SessionNotFound" },
  { method: "POST", path: () => "/sessions/team-b-1/clear", tag: "SessionNotFound" },
  { method: "GET", path: () => "/audit?sessionKey=team-b-1", tag: "SessionNotFound" },
  { method: "GET", path: () => "/audit/stream?sessionKey=team-b-1", tag: "SessionNotFound" }
].map(({ tag, ...endpoint }) => ({
  ...endpoint,
  input: "token for team-a-*",
  options: withToken(endpoint.options, "teamA"),
  expected: { status: 404, tag }
}))

export const problemPaths = (
  body: { issues?: Array<{ path: Array<string> }>; problems?: Array<{ path: string }> }
) => [
  ...(body.issues?.map((issue) => issue.path.join(".")) ?? []),
  ...(body.problems?.map((problem) => problem.path) ?? [])
]

export const table: ReadonlyArray<[string, ReadonlyArray<Row>]> = [
  ["malformed JSON", malformed],
  ["wrong types and unknown keys", wrongTypes],
  ["huge bodies", huge],
  ["unknown ids", unknownIds],
  ["unrouted, undecodable and repeated", unrouted],
  ["expired and already answered", settled],
  ["no token, bad token, wrong role", tokens],
  ["token for another session", otherSession]
]
