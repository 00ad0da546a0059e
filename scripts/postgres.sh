#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks (see scripts/postgres.mjs, which does the work):
#
#   eval "$(scripts/postgres.sh start)"   # prints export lines: TOOLGATE_PG_URL, TOOLGATE_PG_DIR
#   scripts/postgres.sh stop [dir]        # stops the cluster in dir (default $TOOLGATE_PG_DIR), removes it
exec node "$(dirname "$0")/postgres.mjs" "$@"
