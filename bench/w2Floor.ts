/**
 * W2's floor on SQLite: what SQLite itself allows for a sequential round trip on this machine,
 * with the store's own tables, indexes and settings, and the very statements the gate runs (taken
 * from its SQL): the pause (a transaction reading the chain's head, inserting the request's event
 * under the same guards and the request), the answer (a transaction updating the request, reading
 * the head, inserting its event) and the spend (one statement). Rows carry texts of the gate's
 * sizes and each event its SHA-256 link. No gate runs it: no policy, no Effect, no schema decode,
 * no change feed, no tailer. It runs interleaved with the gate's own sequential loop (bench/w2.ts's
 * round trip, on a file of its own), blocks taken in turn, so a busy machine slows both alike.
 * Figures: round trips per second, CPU ms per round trip and WAL frames per round trip, each, and
 * the gate's share of the floor's rate.
 *
 *   bun bench/w2Floor.ts   W2F_BLOCKS=6 blocks of W2F_BLOCK=1,000 round trips each, after
 *                          W2F_WARMUP=3,000 of each (the JIT's warm-up)
 */
import { PauseSignal, Policy, ToolGate } from "@tool-gate/core"
import { ToolGateSqlite } from "@tool-gate/sqlite"
import { Database, type Statement } from "bun:sqlite"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createHash } from "node:crypto"
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const BLOCKS = Number(process.env.W2F_BLOCKS ?? 6)
const BLOCK = Number(process.env.W2F_BLOCK ?? 1_000)
const WARMUP = Number(process.env.W2F_WARMUP ?? 3_000)
// the store's default (SqlApprovalStore's `walAutocheckpointPages`)
const AUTOCHECKPOINT_PAGES = 10_000

const policy = Policy.unsafeMake({ requireApproval: ["bash"] })
const bash = (id: string) => ({ id, name: "bash", sessionKey: "w2", args: { command: `make ${id}` } })

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits

/** The write-ahead log's last frame, from the WAL-index header (https://www.sqlite.org/walformat.html). */
const walFrames = (filename: string) => {
  const fd = openSync(`${filename}-shm`, "r")
  const header = Buffer.alloc(20)
  return {
    read: () => {
      readSync(fd, header, 0, 20, 0)
      return header.readUInt32LE(16)
    },
    close: () => closeSync(fd)
  }
}

/** The gate's tables, made by the store's own migrations (then closed). */
const migrate = (filename: string) =>
  Effect.runPromise(Effect.scoped(Layer.build(ToolGateSqlite.layerStore({ filename }))))

const link = (prevHash: string | null, text: string) =>
  createHash("sha256").update(`${prevHash ?? ""}\n${text}`).digest("hex")

/** The floor: the gate's statements on a raw connection, one round trip per `roundTrip` call. */
const makeFloor = (filename: string) => {
  const db = new Database(filename)
  db.run("PRAGMA busy_timeout = 5000")
  db.run("PRAGMA journal_mode = WAL")
  db.run("PRAGMA synchronous = NORMAL")
  db.run(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`)
  const q = (text: string): Statement => db.query(text)
  const begin = q("BEGIN IMMEDIATE")
  const commit = q("COMMIT")
  const head = q(`SELECT seq, hash FROM "toolgate_events" ORDER BY seq DESC LIMIT 1`)
  const columns = "at, type, outcome, session_key, tool_call_id, tool_name, request_id, event, prev_hash, hash"
  const insertGuarded = q(
    `INSERT INTO "toolgate_events" (${columns}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
     WHERE NOT EXISTS (SELECT 1 FROM "toolgate_requests" WHERE session_key = ? AND tool_call_id = ?)
     AND NOT EXISTS (SELECT 1 FROM "toolgate_decisions" WHERE session_key = ? AND tool_call_id = ?)
     AND NOT EXISTS (SELECT 1 FROM "toolgate_session_approvals" WHERE session_key = ? AND tool_name = ?
       AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))
       AND (json_extract(approval, '$.scope') IS NOT 'exact' OR json_extract(approval, '$.argsDigest') IS ?))
     RETURNING seq`
  )
  const insertEvent = q(
    `INSERT INTO "toolgate_events" (${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`
  )
  const insertRequest = q(
    `INSERT INTO "toolgate_requests" (request_id, session_key, tool_call_id, status, created_at, expires_at,
       warned_at, consumed_at, request, requested_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT DO NOTHING RETURNING request_id`
  )
  const answer = q(
    `UPDATE "toolgate_requests" SET status = ?, expires_at = ?, warned_at = ?, consumed_at = ?, request = ?
     WHERE request_id = ? AND status = 'pending' AND request = ?
     AND expires_at > CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) RETURNING request_id`
  )
  const spend = q(
    `UPDATE "toolgate_requests" SET consumed_at = ?, request = json_set(request, '$.consumedAt', ?)
     WHERE request_id = ? AND status = 'approved' AND consumed_at IS NULL RETURNING request_id`
  )
  const chained = (text: string) => {
    const last = head.get() as { seq: number; hash: string | null } | null
    const prevHash = last?.hash ?? null
    return { prevHash, hash: link(prevHash, text) }
  }
  const policyVersion = "9156ddd98ef7667f6296f0ecb4db6e5134dacab3315f83892903fc523c556e7c"
  const rule = { id: "requireApproval[0]", source: "requireApproval" }

  const roundTrip = (id: string) => {
    const call = bash(id)
    const requestId = `req_${crypto.randomUUID()}`
    const now = Date.now()
    const expiresAt = now + 300_000
    const reason = "bash requires approval (rule requireApproval[0])"
    const args = JSON.stringify(call.args)
    const request = {
      requestId,
      toolCall: call,
      argsDigest: createHash("sha256").update(args).digest("hex"),
      rule,
      policyVersion,
      sessionScope: "exact",
      reason,
      prompt: `Allow bash ${args} in session w2? ${reason}`,
      createdAt: now,
      expiresAt,
      status: "pending"
    }
    const requestText = JSON.stringify(request)
    /**
     * An event of this call: its text (the fields in the order the gate writes them, `tail` last)
     * and the columns written beside it, its link included.
     */
    const event = (at: number, type: string, outcome: string, tail: Record<string, unknown>) => {
      const text = JSON.stringify({
        at,
        type,
        outcome,
        sessionKey: "w2",
        toolCallId: id,
        toolName: "bash",
        requestId,
        rule: rule.id,
        ruleSource: rule.source,
        policyVersion,
        ...tail
      })
      const { hash, prevHash } = chained(text)
      return [at, type, outcome, "w2", id, "bash", requestId, text, prevHash, hash] as const
    }
    begin.run()
    const [paused] = insertGuarded.all(
      ...event(now, "approval.requested", "pending", { reason, args, expiresAt }),
      "w2",
      id,
      "w2",
      id,
      "w2",
      "bash",
      request.argsDigest
    ) as Array<{ seq: number }>
    insertRequest.run(requestId, "w2", id, "pending", now, expiresAt, null, null, requestText, paused!.seq)
    commit.run()

    const answeredAt = Date.now()
    const resolution = { status: "approved", decision: "approve_once", respondedBy: "bench", resolvedAt: answeredAt }
    const answeredText = JSON.stringify({ ...request, status: "approved", resolution })
    begin.run()
    answer.all("approved", expiresAt, null, null, answeredText, requestId, requestText)
    insertEvent.all(
      ...event(answeredAt, "approval.resolved", "approved", {
        actor: "bench",
        args,
        elapsedMs: answeredAt - now,
        decision: "approve_once"
      })
    )
    commit.run()

    const spentAt = Date.now()
    spend.all(spentAt, spentAt, requestId)
  }
  return { roundTrip, close: () => db.close() }
}

/** The gate's sequential round trip, as bench/w2.ts runs it. */
const gateRoundTrip = (gate: ToolGate.ToolGate["Type"], id: string) =>
  Effect.gen(function*() {
    const paused = yield* gate.authorize(bash(id))
    if (!PauseSignal.isPauseSignal(paused)) return yield* Effect.die("expected a pause")
    yield* gate.respond(paused.requestId, { decision: "approve_once", respondedBy: "bench" })
    yield* gate.gate(bash(id), () => Effect.void)
  })

interface Block {
  readonly perSec: number
  readonly cpuMs: number
}

/** A block of BLOCK round trips, `block` running them all. */
const timed = async (block: () => void | Promise<void>): Promise<Block> => {
  const cpu = process.cpuUsage()
  const start = performance.now()
  await block()
  const ms = performance.now() - start
  const used = process.cpuUsage(cpu)
  return { perSec: BLOCK / (ms / 1000), cpuMs: (used.user + used.system) / 1000 / BLOCK }
}

/** Round trips counted apart from the timed ones (reading the log's size after each). */
const FRAME_ROUND_TRIPS = 500

/**
 * WAL frames per round trip, over FRAME_ROUND_TRIPS untimed round trips: the log's growth after
 * each (a log started over since: its frames since then).
 */
const framesPer = async (roundTrip: (i: number) => void | Promise<void>, frames: () => number) => {
  let total = 0
  let last = frames()
  for (let i = 0; i < FRAME_ROUND_TRIPS; i++) {
    await roundTrip(i)
    const now = frames()
    total += now >= last ? now - last : now
    last = now
  }
  return round(total / FRAME_ROUND_TRIPS, 2)
}

/** The figures of one side, flat (as bench/index.ts tabulates them), named `prefix...`. */
const summary = (prefix: string, blocks: ReadonlyArray<Block>, walFramesPerRoundTrip: number) => ({
  [`${prefix}RoundTripsPerSec`]: Math.round(median(blocks.map((b) => b.perSec))),
  [`${prefix}CpuMsPerRoundTrip`]: round(median(blocks.map((b) => b.cpuMs))),
  [`${prefix}WalFramesPerRoundTrip`]: walFramesPerRoundTrip
})

const run = async () => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-w2floor-"))
  try {
    const floorFile = join(dir, "floor.db")
    const gateFile = join(dir, "gate.db")
    await migrate(floorFile)
    const floor = makeFloor(floorFile)
    const floorFrames = walFrames(floorFile)
    const runtime = ManagedRuntime.make(ToolGateSqlite.layer({ filename: gateFile, policy }))
    // closed only after the connections: closing any descriptor of a file drops the POSIX locks
    // the process holds on it, SQLite's own included
    let gateFrames: ReturnType<typeof walFrames> | undefined
    try {
      const gate = await runtime.runPromise(ToolGate.ToolGate)
      gateFrames = walFrames(gateFile)
      const gateFramesRead = gateFrames.read
      const floorBlock = (tag: string, n: number) => () => {
        for (let i = 0; i < n; i++) floor.roundTrip(`${tag}-${i}`)
      }
      // one fiber runs the whole block, as bench/w2.ts's loop does
      const gateBlock = (tag: string, n: number) => () =>
        runtime.runPromise(Effect.gen(function*() {
          for (let i = 0; i < n; i++) yield* gateRoundTrip(gate, `${tag}-${i}`)
        }))
      floorBlock("warm", WARMUP)()
      await gateBlock("warm", WARMUP)()
      const floors: Array<Block> = []
      const gates: Array<Block> = []
      for (let b = 0; b < BLOCKS; b++) {
        // in turn, each side first every other block
        const floorRun = () => timed(floorBlock(`f${b}`, BLOCK))
        const gateRun = () => timed(gateBlock(`g${b}`, BLOCK))
        if (b % 2 === 0) {
          floors.push(await floorRun())
          gates.push(await gateRun())
        } else {
          gates.push(await gateRun())
          floors.push(await floorRun())
        }
      }
      const floorRate = median(floors.map((b) => b.perSec))
      const gateRate = median(gates.map((b) => b.perSec))
      return {
        ...summary("floor", floors, await framesPer((i) => floor.roundTrip(`frames-${i}`), floorFrames.read)),
        ...summary(
          "gate",
          gates,
          await framesPer((i) => runtime.runPromise(gateRoundTrip(gate, `frames-${i}`)), gateFramesRead)
        ),
        gateShareOfFloorRate: round(gateRate / floorRate, 2),
        blocks: BLOCKS,
        roundTripsPerBlock: BLOCK
      }
    } finally {
      await runtime.dispose()
      gateFrames?.close()
      floor.close()
      floorFrames.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (import.meta.main) {
  console.log(JSON.stringify({ workload: "W2 floor SQLite", ...(await run()) }))
}
