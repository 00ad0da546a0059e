import * as Migrator from "@effect/sql/Migrator"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import { PersistenceError } from "../ToolGateError.js"

/**
 * Maps every database failure to `PersistenceError`, including the ones `@effect/sql` raises as
 * defects: a failed COMMIT, and a failed migration.
 */
export const boundary =
  (operation: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, PersistenceError, R> =>
    self.pipe(
      Effect.catchSomeDefect((defect) =>
        defect instanceof SqlError || defect instanceof Migrator.MigrationError
          ? Option.some(Effect.fail(defect))
          : Option.none()
      ),
      Effect.mapError((cause) => new PersistenceError({ operation, cause }))
    )
