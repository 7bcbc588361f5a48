#!/usr/bin/env bash
# Stop the throwaway PostgreSQL cluster that .ci/start-postgres.sh started and delete its directory.
# Reads FLEETDX_CI_PG_DIR (exported by start-postgres.sh's output).
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
DIR=${FLEETDX_CI_PG_DIR:?FLEETDX_CI_PG_DIR is not set: nothing to stop}
case "$DIR" in
  */fleetdx-ci-pg.*) ;;
  *) echo "refusing to remove $DIR: not a directory made by start-postgres.sh" >&2; exit 2 ;;
esac
if [[ $(id -un) == postgres ]]; then
  "$PG_BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >&2 || true
else
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >&2 || true
fi
rm -rf -- "$DIR"
