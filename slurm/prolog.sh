#!/bin/bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/prolog.d/fleetdx.sh, PrologFlags=Alloc): a quick pre-flight of
# this node before a job starts on it.
#
# Slurm drains a node whose prolog exits non-zero and requeues the job (slurm.conf(5), Prolog), so only a
# CRITICAL verdict (exit 2) fails the prolog; WARNING and UNKNOWN are logged and the job starts. The check runs
# on this node only (a local Ray, about 3 s to start), under a hard timeout well below PrologEpilogTimeout.
set -uo pipefail

host=$(hostname -s)
log_dir=/var/log/fleetdx
mkdir -p "$log_dir"
report="$log_dir/prolog-${SLURM_JOB_ID:-nojob}.json"

timeout 90 fleetdx preflight --nodes "$host" --level quick --timeout 60 \
    ${SLURM_GPUS_ON_NODE:+--gpus-per-node "$SLURM_GPUS_ON_NODE"} --json > "$report" 2>> "$log_dir/prolog.err"
verdict=$?

case "$verdict" in
    0) exit 0 ;;
    1|3) logger -t fleetdx "job ${SLURM_JOB_ID:-?} on $host: verdict $verdict, see $report"; exit 0 ;;
    2) logger -t fleetdx "job ${SLURM_JOB_ID:-?} on $host: CRITICAL, see $report"; exit 1 ;;
    *) logger -t fleetdx "job ${SLURM_JOB_ID:-?} on $host: fleetdx did not finish (exit $verdict)"; exit 0 ;;
esac
