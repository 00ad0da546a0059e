/**
 * Tamper evidence for the audit log. Every event carries `hash`, the SHA-256 (hex) of the hash of
 * the event before it, a line feed and the event's own JSON text as the store keeps it, and
 * `prevHash`, the hash it was chained to (absent at the chain's start). Writers compute it in
 * commit order, inside the transaction that writes the event, so every process sharing a database
 * extends one chain. `verify` reads the log in `seq` order and reports the first event that is
 * missing, changed or unlinked.
 *
 * A chain proves that the log is whole from its start up to its head, not that nobody replaced
 * the whole of it: record the head (`Report.head`) somewhere the database's writers cannot change,
 * and pass it back as `anchor` to detect events deleted from the end or a chain recomputed after
 * an edit.
 *
 * @example
 * import { ApprovalStore, AuditChain } from "@tool-gate/core"
 * import { Console, Effect } from "effect"
 *
 * const check = AuditChain.verify().pipe(
 *   Effect.tap((report) => Console.log(report.valid ? `valid up to ${report.head?.seq}` : report.problem?.message)),
 *   Effect.provide(ApprovalStore.layerMemory)
 * )
 *
 * @since 0.1.0
 */
import { Effect, ParseResult, Schema } from "effect"
import { ApprovalStore } from "./ApprovalStore.js"
import * as Chain from "./internal/store/chain.js"
import type { PersistenceError } from "./ToolGateError.js"

/**
 * A SHA-256 hash in lower-case hex, as the chain writes them.
 *
 * @since 0.1.0
 * @category models
 */
export const Hash = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{64}$/),
  Schema.annotations({ identifier: "AuditHash", description: "a SHA-256 hash, 64 lower-case hex digits" })
)

/**
 * A recorded head of the chain: the event `seq` had the hash `hash`. Verifying against it detects
 * events deleted from the log's end and a chain recomputed from that event or earlier.
 *
 * @since 0.1.0
 * @category models
 */
export const Anchor = Schema.Struct({ seq: Schema.Int.pipe(Schema.positive()), hash: Hash }).annotations({
  identifier: "AuditAnchor"
})
/**
 * @since 0.1.0
 * @category models
 */
export type Anchor = typeof Anchor.Type

/**
 * An anchor written `SEQ:HASH`, as `toolgate audit verify` prints it and takes it back.
 *
 * @since 0.1.0
 * @category models
 */
export const AnchorFromString: Schema.Schema<Anchor, string> = Schema.transformOrFail(
  Schema.String.annotations({
    description: "SEQ:HASH, e.g. 1234:9f86d081884c7d65...",
    examples: ["1:" + "0".repeat(64)]
  }),
  Anchor,
  {
    strict: true,
    decode: (text, _, ast) => {
      const match = /^(\d{1,16}):(.*)$/.exec(text)
      return match === null
        ? Effect.fail(
          new ParseResult.Type(ast, text, "expected SEQ:HASH (a sequence number, a colon, a SHA-256 in hex)")
        )
        : Effect.succeed({ seq: Number(match[1]), hash: match[2]! })
    },
    encode: (anchor) => Effect.succeed(`${anchor.seq}:${anchor.hash}`)
  }
)

/**
 * What is wrong with the first bad event:
 * - `missing`: its number is absent (the event was deleted), or the log ends before the anchor;
 * - `altered`: its stored text no longer matches its hash (the event was edited);
 * - `brokenLink`: it is not chained to the event before it (that one was edited and its hash
 *   recomputed, or an event between them was deleted and the numbers closed up);
 * - `unhashed`: it has no hash although the chain started before it;
 * - `anchor`: its hash differs from the recorded anchor's (the chain was recomputed);
 * - `columns`: a column the log's queries filter on (session, tool, outcome, time...) no longer
 *   says what its text says (SQL stores; the hash covers the text).
 *
 * @since 0.1.0
 * @category models
 */
export const ProblemKind = Schema.Literal("missing", "altered", "brokenLink", "unhashed", "anchor", "columns")

/**
 * @since 0.1.0
 * @category models
 */
export const Problem = Schema.Struct({
  /** the first bad event's `seq` (for `missing`, the first number absent) */
  seq: Schema.Number,
  kind: ProblemKind,
  message: Schema.String
}).annotations({ identifier: "AuditChainProblem" })
/**
 * @since 0.1.0
 * @category models
 */
export type Problem = typeof Problem.Type

/**
 * The outcome of a verification. `chainStart`: the first event with a hash (the events before
 * it were written before the store chained its events). `head`: the newest event and its hash,
 * when the log is valid: record it elsewhere and verify against it later (`anchor`).
 *
 * @since 0.1.0
 * @category models
 */
export const Report = Schema.Struct({
  valid: Schema.Boolean,
  /** events read and found in order (up to the problem, when there is one) */
  events: Schema.Number,
  chainStart: Schema.optional(Schema.Number),
  head: Schema.optional(Schema.Struct({ seq: Schema.Number, hash: Schema.String })),
  problem: Schema.optional(Problem)
}).annotations({ identifier: "AuditChainReport" })
/**
 * @since 0.1.0
 * @category models
 */
export type Report = typeof Report.Type

/**
 * The hash an event gets: SHA-256 of `prevHash` (empty at the chain's start), a line feed, and
 * the event's JSON text as stored. Given here so anyone can check the chain without tool-gate.
 *
 * @since 0.1.0
 * @category utils
 */
export const link: (prevHash: string | undefined, text: string) => string = Chain.link

/**
 * @since 0.1.0
 * @category models
 */
export interface VerifyOptions {
  /** a head recorded earlier, which must still be in place */
  readonly anchor?: Anchor | undefined
  /** events read per query (default 1000) */
  readonly pageSize?: number | undefined
}

/**
 * Reads the whole log in `seq` order and checks it: no number missing from 1 up, every hash
 * matching its event's stored text, every event chained to the one before it, the columns
 * queries filter on agreeing with the text, and the anchor (when given) in place. Stops at the first problem. A broken chain is a report, not a failure.
 *
 * @since 0.1.0
 * @category verification
 */
export const verify = (options?: VerifyOptions): Effect.Effect<Report, PersistenceError, ApprovalStore> =>
  Effect.flatMap(ApprovalStore, (store) =>
    Effect.gen(function*() {
      const pageSize = Math.max(1, options?.pageSize ?? 1000)
      const checker = Chain.checker(options?.anchor)
      let afterSeq = 0
      while (true) {
        const page = yield* store.chainLinks(afterSeq, pageSize)
        for (const next of page) if (!checker.push(next)) return checker.report()
        if (page.length < pageSize) return checker.report()
        afterSeq = page[page.length - 1]!.seq
      }
    }))
