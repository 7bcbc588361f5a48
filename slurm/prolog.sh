#!/bin/bash
# Slurm Prolog: a quick fleetdx pre-flight of this node before a job starts on it.
#
#   slurm.conf:  Prolog=/etc/slurm/fleetdx/prolog.sh   PrologFlags=Alloc   PrologEpilogTimeout=120
#                SchedulerParameters=nohold_on_prolog_fail   (so the requeued job is not held)
#   settings:    fleetdx-slurm.conf installed beside this script (or /etc/fleetdx/slurm.conf); the file
#                documents each line: FLEETDX, FLEETDX_PROLOG_BUDGET_S, FLEETDX_PROLOG_ON_ERROR, ...
#
# Verdicts (the exit codes of `fleetdx preflight`):
#   0 OK, 1 WARNING    the job starts (a WARNING is logged); an exit 1 whose report does not say WARNING (a
#                      crash: Python and Ray's core exit 1 too) is no verdict
#   2 CRITICAL         the node is drained with its first critical finding as the reason, e.g.
#                      Reason="fleetdx preflight: GPU_COUNT_MISMATCH (7 GPUs visible, 8 expected); report
#                      /var/log/fleetdx/prolog-JOB-NODE.json", and the prolog fails: Slurm requeues the job on
#                      other nodes (slurm.conf(5), Prolog)
#   anything else      no verdict (UNKNOWN, over the time budget, fleetdx missing): FLEETDX_PROLOG_ON_ERROR
#                      decides, open (start the job) or closed (drain "fleetdx preflight: no verdict (...)");
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

# the drain reason of a CRITICAL verdict, read from the report with fleetdx's own Python: its first critical
# finding naming this host, "fleetdx preflight: CODE[ subject] (message); report PATH", at most 255 bytes
# (what Slurm's accounting keeps of a node event's reason), the message shortened first
fleetdx_python() {
    local py
    py=$(sed -n '1s/^#!//p' "$FLEETDX" 2>/dev/null)
    [[ -x "${py%% *}" ]] || py=python3
    echo "$py"
}
reason_of() {
    $(fleetdx_python) - "$report" "$host" <<'EOF' 2>/dev/null
import json, re, sys
path, host = sys.argv[1], sys.argv[2]
for f in json.load(open(path)).get("findings", []):
    if f.get("severity") == "critical" and host in f.get("nodes", []):
        subject = f.get("subject") or ""
        head = "fleetdx preflight: " + f["code"] + (f" {subject}" if subject not in ("", "node") else "")
        message = re.sub(r" \([^()]*\)$", "", " ".join(str(f.get("message", "")).split()))  # its basis: in the report
        tail = f"; report {path}"
        room = 255 - len((head + " ()" + tail).encode())
        if len(message.encode()) > room:
            message = message.encode()[: max(room - 3, 0)].decode(errors="ignore").rstrip() + "..."
        print(f"{head} ({message}){tail}" if message else head + tail)
        break
EOF
}

# the report, named only when it was written (fleetdx missing or killed leaves none, or an empty file)
[[ -s "$report" ]] || { rm -f "$report"; report=; }
seen=${report:+ (report $report)}

# exit 1 is also how a Python process ends on a crash (an unhandled exception, Ray's core library ending the
# process): it is a WARNING only when the report written says so, else no verdict
if [[ $verdict == 1 ]]; then
    said=
    [[ -n "$report" ]] && said=$($(fleetdx_python) -c 'import json, sys; print(json.load(open(sys.argv[1]))["exit_code"])' "$report" 2>/dev/null)
    if [[ "$said" != 1 ]]; then
        verdict=70
        why="fleetdx exit 1 without a WARNING report (a crash? see $FLEETDX_LOG_DIR/prolog.err)"
    fi
fi

case "$verdict" in
    0) say "OK in ${took} s"; exit 0 ;;
    1) say "WARNING in ${took} s, job starts$seen"; exit 0 ;;
    2)
        reason=
        [[ -n "$report" ]] && reason=$(reason_of)
        reason=${reason:-fleetdx preflight: CRITICAL${report:+; report $report}}
        say "CRITICAL in ${took} s: ${reason#fleetdx preflight: }; draining, the job is requeued"
        drain "$reason"
        exit 1 ;;
    *)
        if [[ "$FLEETDX_PROLOG_ON_ERROR" == closed ]]; then
            say "no verdict ($why, ${took} s): fail-closed, draining$seen"
            drain "fleetdx preflight: no verdict ($why)"
            exit 1
        fi
        say "no verdict ($why, ${took} s): fail-open, job starts$seen"
        exit 0 ;;
esac
