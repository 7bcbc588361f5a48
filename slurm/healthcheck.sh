#!/bin/bash
# Slurm HealthCheckProgram: the periodic fleetdx check of this node, the NHC way.
#
#   slurm.conf:  HealthCheckProgram=/etc/slurm/fleetdx/healthcheck.sh
#                HealthCheckInterval=300   HealthCheckNodeState=IDLE,MIXED
#   settings:    fleetdx-slurm.conf installed beside this script (or /etc/fleetdx/slurm.conf): FLEETDX,
#                FLEETDX_PATH, FLEETDX_HEALTHCHECK_BUDGET_S, FLEETDX_HEALTHCHECK_ARGS (give it the database:
#                --db URL, the store that holds the node states), FLEETDX_FLAP_WINDOW_S, FLEETDX_LOG_DIR
#
# slurmd runs it every HealthCheckInterval seconds on the nodes HealthCheckNodeState names (IDLE includes
# drained idle nodes: that is how a drained node gets its retest). It runs `fleetdx nodes check` (the quick
# pre-flight of this host, in-process, no Ray), which:
#   - on a node in service: stores the check; CRITICAL drains the node with Reason="fleetdx: CODE subject"
#     (on a MIXED node a running job's own GPU processes are expected and drain nothing)
#   - on a node drained with a fleetdx reason ("fleetdx: ..." or the prolog's "fleetdx preflight: ...") that
#     the store holds as failing: retests it at the level of the check that failed and, when the retest is
#     clean, resumes it (scontrol update NodeName=X State=RESUME); a node that failed again within
#     FLEETDX_FLAP_WINDOW_S of its last return stays drained until a person runs `fleetdx nodes return`
#   - on a node drained by an administrator (any other reason) or down: does nothing at all
# One line per run goes to FLEETDX_LOG_DIR/healthcheck.log (and syslog). slurmd does not act on the exit
# code: this script always exits 0; what it did is in the log and in the node's state and reason.
set -uo pipefail

CONFIG=${FLEETDX_SLURM_CONFIG:-$(dirname "$0")/fleetdx-slurm.conf}
[[ -r "$CONFIG" ]] || CONFIG=/etc/fleetdx/slurm.conf
FLEETDX=
FLEETDX_HEALTHCHECK_BUDGET_S=120
FLEETDX_HEALTHCHECK_ARGS=
FLEETDX_LOG_DIR=/var/log/fleetdx
# shellcheck source=fleetdx-slurm.conf
[[ -r "$CONFIG" ]] && . "$CONFIG"
export PATH=${FLEETDX_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
[[ -n "${FLEETDX_FLAP_WINDOW_S:-}" ]] && export FLEETDX_FLAP_WINDOW_S
# slurmd gives HealthCheckProgram an environment of its own making: SLURM_CONF only from the settings file
[[ -n "${SLURM_CONF:-}" ]] && export SLURM_CONF

host=$(hostname -s)
node=${SLURMD_NODENAME:-$host}
mkdir -p "$FLEETDX_LOG_DIR" 2>/dev/null
log="$FLEETDX_LOG_DIR/healthcheck.log"
say() { echo "$(date -u +%FT%TZ) $node: $*" >> "$log"; logger -t fleetdx-healthcheck "$node: $*" 2>/dev/null; }

if [[ -z "$FLEETDX" || ! -x "$FLEETDX" ]]; then
    say "not checked: FLEETDX=${FLEETDX:-(unset)} in $CONFIG is not an executable"
    exit 0
fi

# one check at a time on this node: a retest at level standard may outlast HealthCheckInterval
lock="$FLEETDX_LOG_DIR/healthcheck-$node.lock"
exec 9> "$lock" || { say "not checked: cannot open $lock"; exit 0; }
if ! flock -n 9; then
    say "not checked: the previous check is still running"
    exit 0
fi

start=$(date +%s.%N)
# shellcheck disable=SC2086  # FLEETDX_HEALTHCHECK_ARGS is a list of options
out=$(timeout --kill-after=5 "$FLEETDX_HEALTHCHECK_BUDGET_S" "$FLEETDX" nodes check --slurm-node "$node" \
    --timeout "$((FLEETDX_HEALTHCHECK_BUDGET_S * 2 / 3))" $FLEETDX_HEALTHCHECK_ARGS 2>> "$FLEETDX_LOG_DIR/healthcheck.err")
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
case "$rc" in
    0 | 2) say "${out#"$node: "} (${took} s)" ;;
    124 | 137) say "no verdict: over the ${FLEETDX_HEALTHCHECK_BUDGET_S} s budget; nothing changed" ;;
    *) say "no verdict: fleetdx exit $rc (${took} s; $FLEETDX_LOG_DIR/healthcheck.err); nothing changed" ;;
esac
exit 0
