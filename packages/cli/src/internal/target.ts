/**
 * Where a command acts: the `Backend` its options name (the SQLite file, or a server), and the
 * policy that judges edited arguments.
 */
import { Command } from "@effect/cli"
import type { FileSystem } from "@effect/platform"
import { Policy, type ToolGateError } from "@tool-gate/core"
import { Effect, Layer, Option, type Redacted } from "effect"
import { existsSync } from "node:fs"
import { userInfo } from "node:os"
import * as Backend from "../Backend.js"
import { InvalidInput } from "./errors.js"

/** The parsed `target` options. */
export interface Target {
  readonly db: string
  readonly policy: Option.Option<string>
  readonly server: Option.Option<string>
  readonly token: Option.Option<Redacted.Redacted>
  readonly actor: Option.Option<string>
}

/** Without a policy nothing evaluates new calls, and an approval with edited arguments is denied. */
const editsDenied = Policy.unsafeMake({ default: "deny" })

/** The policy file, or one that denies every edit. */
export const loadPolicy = (
  file: Option.Option<string>
): Effect.Effect<Policy.Policy, ToolGateError.PolicyInvalid, FileSystem.FileSystem> =>
  Option.match(file, { onNone: () => Effect.succeed(editsDenied), onSome: Policy.load })

const osUser = (): string => {
  try {
    return userInfo().username
  } catch {
    return process.env.USER ?? "cli"
  }
}

const backend = (config: Target) =>
  Option.match(config.server, {
    onSome: (url) => Backend.layerRemote({ url, token: config.token }),
    onNone: () =>
      Layer.unwrapEffect(Effect.gen(function*() {
        // Opening a path would create an empty database there: a mistyped --db would then list
        // nothing and answer nothing, silently.
        if (!existsSync(config.db)) {
          return yield* new InvalidInput({
            message: `no database at ${config.db}: give the file your agents use with --db (or TOOLGATE_DB)`
          })
        }
        const policy = yield* loadPolicy(config.policy)
        return Backend.layerDirect({ filename: config.db, policy, actor: Option.getOrElse(config.actor, osUser) })
      }))
  })

/** Gives the command the `Backend` its `target` options name. */
export const withBackend = <Name extends string, A extends Target, E, R>(
  command: Command.Command<Name, R, E, A>
) => Command.provide(command, backend)
