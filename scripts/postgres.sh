#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests and benchmarks.
#
#   eval "$(scripts/postgres.sh start)"   # prints export lines: TOOLGATE_PG_URL, TOOLGATE_PG_DIR
#   scripts/postgres.sh stop [dir]        # stops the cluster in dir (default $TOOLGATE_PG_DIR), removes it
#
# The server refuses to run as root, so when run as root everything runs as the `postgres` OS user
# (created if missing). The cluster lives in a fresh temp dir, listens on 127.0.0.1 only, on the
# first free port from $TOOLGATE_PG_PORT (default 55432), trusts local connections and keeps its
# socket in its own dir. Logs go to stderr; stdout carries only the export lines.
set -euo pipefail

bindir=${TOOLGATE_PG_BINDIR:-/usr/lib/postgresql/15/bin}
[ -x "$bindir/pg_ctl" ] || bindir=$(dirname "$(command -v pg_ctl || echo /usr/local/bin/pg_ctl)")

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres >&2
  fi
  local dir port
  dir=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-pg.XXXXXX")
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  port=${TOOLGATE_PG_PORT:-55432}
  for _ in $(seq 1 100); do
    port_in_use "$port" || break
    port=$((port + 1))
  done
  if port_in_use "$port"; then
    echo "postgres.sh: no free port near ${TOOLGATE_PG_PORT:-55432}" >&2
    rm -rf "$dir"
    exit 1
  fi
  if ! as_postgres "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || ! as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >&2 \
    || ! as_postgres "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres toolgate >&2; then
    echo "postgres.sh: could not start PostgreSQL; logs follow" >&2
    cat "$dir"/*.log >&2 || true
    as_postgres "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    exit 1
  fi
  echo "postgres.sh: PostgreSQL running in $dir on 127.0.0.1:$port" >&2
  echo "export TOOLGATE_PG_DIR=$dir"
  echo "export TOOLGATE_PG_URL=postgres://postgres@127.0.0.1:$port/toolgate"
}

stop() {
  local dir=${1:-${TOOLGATE_PG_DIR:-}}
  if [ -z "$dir" ] || [ ! -d "$dir/data" ]; then
    echo "postgres.sh: no cluster to stop (give its dir or set TOOLGATE_PG_DIR)" >&2
    exit 1
  fi
  as_postgres "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop [dir]" >&2; exit 2 ;;
esac
