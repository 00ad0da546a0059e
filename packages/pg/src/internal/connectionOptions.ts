import type { PgClient } from "@effect/sql-pg"
import { Duration, Redacted } from "effect"
import type * as Pg from "pg"

/** What a node-postgres connection of `PgClient.make`'s pool is opened with, from `config`. */
export const connectionOptions = (config: PgClient.PgClientConfig): Pg.ClientConfig => ({
  connectionString: config.url ? Redacted.value(config.url) : undefined,
  user: config.username,
  host: config.host,
  database: config.database,
  password: config.password ? Redacted.value(config.password) : undefined,
  ssl: config.ssl,
  port: config.port,
  ...(config.stream ? { stream: config.stream } : {}),
  connectionTimeoutMillis: config.connectTimeout ? Duration.toMillis(config.connectTimeout) : undefined,
  application_name: config.applicationName ?? "@effect/sql-pg",
  types: config.types
})
