#!/bin/bash
# Slurm Epilog: keep this node's evidence from the moment the job ended, for a postmortem.
#
#   slurm.conf:  Epilog=/etc/slurm/fleetdx/epilog.sh
#   settings:    fleetdx-slurm.conf beside this script, or /etc/fleetdx/slurm.conf: FLEETDX,
#                FLEETDX_BUNDLE_DIR, FLEETDX_EPILOG_BUDGET_S, FLEETDX_LOG_DIR
#
# Writes `fleetdx collect` (quick level: GPU state, XIDs, clocks, topology) to FLEETDX_BUNDLE_DIR/JOBID/HOST/,
# one bundle per node of the job; read them with `fleetdx postmortem --bundles FLEETDX_BUNDLE_DIR/JOBID/*`.
# Always exits 0: a failed collection is logged, never a reason for Slurm to drain the node.
set -uo pipefail

# settings: $FLEETDX_SLURM_CONFIG, else fleetdx-slurm.conf beside this script, else /etc/fleetdx/slurm.conf
# (slurmd runs the prolog and epilog with an environment of its own making: install the file beside the script)
CONFIG=${FLEETDX_SLURM_CONFIG:-$(dirname "$0")/fleetdx-slurm.conf}
[[ -r "$CONFIG" ]] || CONFIG=/etc/fleetdx/slurm.conf
FLEETDX=
FLEETDX_BUNDLE_DIR=/var/lib/fleetdx/bundles
FLEETDX_EPILOG_BUDGET_S=60
FLEETDX_LOG_DIR=/var/log/fleetdx
# shellcheck source=fleetdx-slurm.conf
[[ -r "$CONFIG" ]] && . "$CONFIG"
export PATH=${FLEETDX_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}

job=${SLURM_JOB_ID:-nojob}
host=$(hostname -s)
out="$FLEETDX_BUNDLE_DIR/$job/$host"
mkdir -p "$FLEETDX_LOG_DIR" 2>/dev/null
say() { echo "$(date -u +%FT%TZ) job $job on $host: $*" >> "$FLEETDX_LOG_DIR/epilog.log"; }

if [[ -z "$FLEETDX" || ! -x "$FLEETDX" ]]; then
    say "no bundle: FLEETDX=${FLEETDX:-(unset)} in $CONFIG is not an executable"
    exit 0
fi
mkdir -p "$out" || { say "no bundle: cannot create $out"; exit 0; }
timeout --kill-after=5 "$FLEETDX_EPILOG_BUDGET_S" "$FLEETDX" collect --out "$out" --host "$host" --replace --json \
    > /dev/null 2>> "$FLEETDX_LOG_DIR/epilog.err"
rc=$?
if [[ $rc == 0 ]]; then say "bundle in $out"; else say "bundle in $out incomplete: fleetdx collect exit $rc"; fi
exit 0
