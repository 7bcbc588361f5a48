#!/usr/bin/env bash
# Start a throwaway PostgreSQL 15 cluster for the store tests and print, on stdout, the shell lines that
# export where it is:
#     export FLEETDX_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:PORT/fleetdx_test
#     export FLEETDX_CI_PG_DIR=DIR
# Use it as `eval "$(bash .ci/start-postgres.sh)"`; stop it with `bash .ci/stop-postgres.sh`.
# Everything else goes to stderr. Needs root (the cluster runs as user postgres) or to be run as postgres.
# Recipe measured in ../shared/PLATFORM.md: initdb -A trust (loopback only), pg_ctl -w start in about 0.8 s.
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PORT=${FLEETDX_CI_PG_PORT:-}
if [[ -z "$PORT" ]]; then
  # a free TCP port on 127.0.0.1, chosen by the kernel
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
DIR=$(mktemp -d "${TMPDIR:-/tmp}/fleetdx-ci-pg.XXXXXX")

as_postgres() {
  if [[ $(id -un) == postgres ]]; then "$@"; else runuser -u postgres -- "$@"; fi
}

if [[ $(id -un) != postgres ]]; then chown postgres: "$DIR"; fi
as_postgres "$PG_BIN/initdb" -D "$DIR/data" -A trust -U postgres --no-sync >&2
as_postgres "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w \
  -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >&2
as_postgres "$PG_BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres fleetdx_test >&2

echo "export FLEETDX_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:$PORT/fleetdx_test"
echo "export FLEETDX_CI_PG_DIR=$DIR"
