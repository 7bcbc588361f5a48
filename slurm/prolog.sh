#!/bin/bash
# Slurm Prolog: a quick fleetdx pre-flight of this node before a job starts on it.
#
#   slurm.conf:  Prolog=/etc/slurm/fleetdx/prolog.sh   PrologFlags=Alloc   PrologEpilogTimeout=120
#                SchedulerParameters=nohold_on_prolog_fail   (so the requeued job is not held)
#   settings:    fleetdx-slurm.conf installed beside this script (or /etc/fleetdx/slurm.conf); the file
#                documents each line: FLEETDX, FLEETDX_PROLOG_BUDGET_S, FLEETDX_PROLOG_ON_ERROR, ...
#
# Verdicts (the exit codes of `fleetdx preflight`):
#   0 OK, 1 WARNING    the job starts (a WARNING is logged)
#   2 CRITICAL         the node is drained with Reason="fleetdx: CODE subject" (its first critical finding,
#                      e.g. "fleetdx: GPU_FOREIGN_PROCESS GPU0") and the prolog fails: Slurm requeues the job
#                      on other nodes (slurm.conf(5), Prolog)
#   anything else      no verdict (UNKNOWN, over the time budget, fleetdx missing): FLEETDX_PROLOG_ON_ERROR
#                      decides, open (start the job) or closed (drain "fleetdx: no verdict (...)" and fail);
#                      logged either way
# The pre-flight targets this host only, so fleetdx runs it in-process without Ray (1.2-3.2 s measured in CI).
set -uo pipefail

# settings: $FLEETDX_SLURM_CONFIG, else fleetdx-slurm.conf beside this script, else /etc/fleetdx/slurm.conf
# (slurmd runs the prolog and epilog with an environment of its own making: install the file beside the script)
CONFIG=${FLEETDX_SLURM_CONFIG:-$(dirname "$0")/fleetdx-slurm.conf}
[[ -r "$CONFIG" ]] || CONFIG=/etc/fleetdx/slurm.conf
FLEETDX=
FLEETDX_PROLOG_BUDGET_S=30
FLEETDX_PROLOG_ON_ERROR=open
FLEETDX_PREFLIGHT_ARGS=
FLEETDX_LOG_DIR=/var/log/fleetdx
# shellcheck source=fleetdx-slurm.conf
[[ -r "$CONFIG" ]] && . "$CONFIG"
export PATH=${FLEETDX_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}

job=${SLURM_JOB_ID:-nojob}
host=$(hostname -s)
node=${SLURMD_NODENAME:-$host}
mkdir -p "$FLEETDX_LOG_DIR" 2>/dev/null
log="$FLEETDX_LOG_DIR/prolog.log"
report="$FLEETDX_LOG_DIR/prolog-$job-$node.json"
say() { echo "$(date -u +%FT%TZ) job $job on $node: $*" >> "$log"; logger -t fleetdx-prolog "job $job on $node: $*" 2>/dev/null; }
drain() {
    scontrol update NodeName="$node" State=DRAIN Reason="$1" || say "could not drain: scontrol update failed"
}

# GPUs the job holds on this node (PrologFlags=Alloc: SLURM_JOB_GPUS lists their indices)
gpus=()
[[ -n "${SLURM_JOB_GPUS:-}" ]] && gpus=(--gpus-per-node "$(tr ',' '\n' <<< "$SLURM_JOB_GPUS" | grep -c .)")

start=$(date +%s.%N)
if [[ -z "$FLEETDX" || ! -x "$FLEETDX" ]]; then
    verdict=127
    why="FLEETDX=${FLEETDX:-(unset)} in $CONFIG is not an executable"
else
    # shellcheck disable=SC2086  # FLEETDX_PREFLIGHT_ARGS is a list of options
    timeout --kill-after=5 "$FLEETDX_PROLOG_BUDGET_S" "$FLEETDX" preflight --nodes "$host" --level quick \
        "${gpus[@]}" --json $FLEETDX_PREFLIGHT_ARGS > "$report" 2>> "$FLEETDX_LOG_DIR/prolog.err"
    verdict=$?
    why="fleetdx exit $verdict"
    [[ $verdict == 124 || $verdict == 137 ]] && why="over the ${FLEETDX_PROLOG_BUDGET_S} s budget"
fi
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')

# the first critical finding naming this host, as "CODE subject", read with fleetdx's own Python
reason_of() {
    local py
    py=$(sed -n '1s/^#!//p' "$FLEETDX" 2>/dev/null)
    [[ -x "${py%% *}" ]] || py=python3
    $py - "$report" "$host" <<'EOF' 2>/dev/null
import json, sys
report, host = json.load(open(sys.argv[1])), sys.argv[2]
for f in report.get("findings", []):
    if f.get("severity") == "critical" and host in f.get("nodes", []):
        print(f"{f['code']} {f.get('subject', '')}".strip()); break
EOF
}

case "$verdict" in
    0) say "OK in ${took} s"; exit 0 ;;
    1) say "WARNING in ${took} s, job starts (report $report)"; exit 0 ;;
    2)
        reason=$(reason_of)
        say "CRITICAL in ${took} s: ${reason:-see $report}; draining, the job is requeued"
        drain "fleetdx: ${reason:-CRITICAL, see $report}"
        exit 1 ;;
    *)
        if [[ "$FLEETDX_PROLOG_ON_ERROR" == closed ]]; then
            say "no verdict ($why, ${took} s): fail-closed, draining (report $report)"
            drain "fleetdx: no verdict ($why)"
            exit 1
        fi
        say "no verdict ($why, ${took} s): fail-open, job starts (report $report)"
        exit 0 ;;
esac
