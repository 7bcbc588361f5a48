#!/usr/bin/env bash
# A throwaway Slurm 22.05 cluster on this one machine, for the tests marked `slurm` (PLATFORM.md "Slurm").
#
#   bash .ci/slurm-cluster.sh install        apt-get install slurm-wlm munge when missing (Debian 12)
#   bash .ci/slurm-cluster.sh start DIR      write DIR/slurm.conf, start munged, slurmctld and N slurmd; print
#                                            `export SLURM_CONF=DIR/slurm.conf` on stdout once every node is idle
#   bash .ci/slurm-cluster.sh stop DIR       cancel every job, then stop each daemon started by `start` by the
#                                            PID recorded in DIR/pids (TERM, then KILL after 15 s)
#
# `start` builds (all under DIR, which must be reachable by user munge, e.g. mktemp -d /tmp/...; chmod 755):
# * its own munged (own key, socket DIR/munge/munge.socket, AuthInfo=socket=...): nothing is shared with a
#   munged or a Slurm already running on the machine;
# * slurmctld and one slurmd per node SIM_PREFIX1..SIM_PREFIXN (default sim1..sim4), each slurmd in its own UTS
#   namespace (`unshare --uts`) whose hostname is the node's name, so the node's programs see distinct hosts;
#   every node is NodeAddr=127.0.0.1 on its own port;
# * STAND-IN GPUs: Gres=gpu:G per node (default 8) declared through gres.conf over character devices
#   DIR/dev/nvidia0..G-1 (mknod c 1 3, i.e. /dev/null's numbers): Slurm counts and hands them out, nothing
#   behind them is a GPU.
# * a test's intervals (CRED_EXPIRE_S, SCHED_INTERVAL_S below): a requeued job may start again 21 s after its
#   requeue and is started within 2 s of that (Slurm's defaults: 121 s, then up to 30 s).
# Optional inputs (environment): SIM_NODES (4), SIM_PREFIX (sim), SIM_GPUS (8), SLURMD_PATH (PATH of slurmd
# and so of its prolog/epilog; default PATH), DIR/slurm.conf.extra (lines appended to slurm.conf, e.g.
# Prolog=, Epilog=, PrologFlags=Alloc), SLURMD_ENV (extra `NAME=VALUE ...` for slurmd's environment),
# SIM_MIN_JOB_AGE (slurm.conf MinJobAge, seconds: how long slurmctld keeps a finished job's record; unset: Slurm's
# default of 300 s. There is no accounting, so once purged the job is forgotten: scontrol no longer knows it).
# Needs root. Exit status non-zero with one line on stderr when something cannot be started; whatever was
# started is then stopped.
set -euo pipefail

die() {
  echo "slurm-cluster: $*" >&2
  if [[ -n "${STARTING:-}" ]]; then stop "$STARTING"; fi
  exit 1
}

# Slurm intervals chosen for a test cluster (see where they are written in slurm.conf); not knobs of the scenario
CRED_EXPIRE_S=20
SCHED_INTERVAL_S=2

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    echo "slurm-cluster: slurm-wlm and munge already installed" >&2
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2 && apt-get install -y -q slurm-wlm munge >&2
}

stop() {
  local dir=$1
  [[ -f "$dir/pids" ]] || { echo "slurm-cluster: no $dir/pids: nothing to stop" >&2; return 0; }
  if [[ -f "$dir/slurm.conf" ]]; then
    SLURM_CONF="$dir/slurm.conf" timeout 20 scancel --full --quiet --user "$(id -un)" 2>/dev/null || true
  fi
  local pids=()
  # newest first: slurmd, then slurmctld, then munged (the others need munge to shut down cleanly)
  mapfile -t pids < <(tac "$dir/pids" | awk '{print $2}')
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-cluster: pid $pid did not stop in 15 s: KILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -f "$dir/pids"
}

start() {
  local dir=$1
  [[ $(id -u) == 0 ]] || die "starting slurmd needs root"
  for p in slurmctld slurmd munged mungekey unshare; do command -v $p >/dev/null || die "$p not installed"; done
  [[ -d "$dir" ]] || die "$dir: no such directory"
  local n=${SIM_NODES:-4} prefix=${SIM_PREFIX:-sim} gpus=${SIM_GPUS:-8}
  local conf="$dir/slurm.conf" munge="$dir/munge"
  STARTING=$dir  # from here on, a failure stops what was started
  trap 'die "failed at line $LINENO"' ERR
  : > "$dir/pids"
  mkdir -p "$dir/state" "$dir/log" "$dir/dev" "$munge"
  for i in $(seq 1 "$n"); do mkdir -p "$dir/spool/$prefix$i"; done
  for ((g = 0; g < gpus; g++)); do [[ -e "$dir/dev/nvidia$g" ]] || mknod "$dir/dev/nvidia$g" c 1 3; done

  # munged as user munge (it refuses root), with its own key and socket
  chown munge: "$munge" && chmod 755 "$munge"  # munged wants its socket folder searchable by all
  [[ -f "$munge/munge.key" ]] || runuser -u munge -- mungekey --create --keyfile="$munge/munge.key"
  runuser -u munge -- munged --foreground --socket="$munge/munge.socket" --key-file="$munge/munge.key" \
    --pid-file="$munge/munged.pid" --seed-file="$munge/munged.seed" --log-file="$munge/munged.log" \
    >"$dir/log/munged.out" 2>&1 &
  echo "munged $!" >> "$dir/pids"
  local ok=
  for _ in $(seq 100); do
    if munge -n --socket="$munge/munge.socket" 2>/dev/null | unmunge --socket="$munge/munge.socket" >/dev/null 2>&1
    then ok=1; break; fi
    sleep 0.1
  done
  [[ -n "$ok" ]] || die "munged did not answer in 10 s ($dir/log/munged.out, $munge/munged.log)"

  local nodes="$prefix[1-$n]"
  {
    echo "ClusterName=fleetdxci"
    echo "SlurmctldHost=$(hostname)(127.0.0.1)"
    echo "SlurmctldPort=$(free_port)"
    echo "SlurmUser=root"
    echo "AuthType=auth/munge"
    # cred_expire: a job step credential's lifetime, which is also how long a requeued job waits before it may
    # start again (slurm.conf(5) AuthInfo; Slurm's default 120 s). Launches here cross one machine's loopback
    echo "AuthInfo=socket=$munge/munge.socket,cred_expire=$CRED_EXPIRE_S"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "GresTypes=gpu"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "KillWait=5"
    echo "TopologyPlugin=topology/tree"
    if [[ -n "${SIM_MIN_JOB_AGE:-}" ]]; then echo "MinJobAge=$SIM_MIN_JOB_AGE"; fi
    # the main scheduler's periodic pass (Slurm's default: every 60 s) comes often, so that a job whose BeginTime
    # has passed (a requeued one) starts within seconds. Backfill keeps its 30 s: run often, it started jobs ahead
    # of the main scheduler, with the --time-min limit instead of --time (tests/test_slurm_resubmit.py). The extra
    # lines' own SchedulerParameters are kept, with this added (a second SchedulerParameters line would replace
    # the first)
    local sched="sched_interval=$SCHED_INTERVAL_S" theirs=""
    if [[ -f "$dir/slurm.conf.extra" ]]; then
      theirs=$(sed -n 's/^SchedulerParameters=//p' "$dir/slurm.conf.extra" | head -n 1)
      grep -v '^SchedulerParameters=' "$dir/slurm.conf.extra" || true
    fi
    echo "SchedulerParameters=${theirs:+$theirs,}$sched"
    for i in $(seq 1 "$n"); do
      echo "NodeName=$prefix$i NodeHostname=$prefix$i NodeAddr=127.0.0.1 Port=$(free_port) CPUs=2 RealMemory=1000 Gres=gpu:$gpus"
    done
    echo "PartitionName=ci Nodes=$nodes Default=YES MaxTime=INFINITE State=UP"
  } > "$conf"
  echo "Name=gpu File=$dir/dev/nvidia[0-$((gpus - 1))]" > "$dir/gres.conf"
  # one switch over every node, unless the extra lines brought their own topology.conf
  [[ -f "$dir/topology.conf" ]] || echo "SwitchName=ci-leaf Nodes=$nodes" > "$dir/topology.conf"

  export SLURM_CONF="$conf"
  slurmctld -D -f "$conf" >"$dir/log/slurmctld.out" 2>&1 &
  echo "slurmctld $!" >> "$dir/pids"
  for i in $(seq 1 "$n"); do
    # shellcheck disable=SC2086  # SLURMD_ENV is a list of NAME=VALUE words
    env PATH="${SLURMD_PATH:-$PATH}" ${SLURMD_ENV:-} \
      unshare --uts sh -c "hostname $prefix$i && exec $(command -v slurmd) -D -N $prefix$i -f $conf" \
      >"$dir/log/slurmd-$prefix$i.out" 2>&1 &
    echo "slurmd-$prefix$i $!" >> "$dir/pids"
  done
  local idle=0
  for _ in $(seq 300); do
    idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)
    [[ "$idle" == "$n" ]] && break
    sleep 0.2
  done
  [[ "$idle" == "$n" ]] || die "only $idle of $n nodes idle after 60 s (logs: $dir/log)"
  trap - ERR
  STARTING=
  echo "slurm-cluster: $n nodes idle ($nodes), SLURM_CONF=$conf" >&2
  echo "export SLURM_CONF=$conf"
}

case "${1:-}" in
  install) install ;;
  start) start "${2:?usage: $0 start DIR}" ;;
  stop) stop "${2:?usage: $0 stop DIR}" ;;
  *) die "usage: $0 install | start DIR | stop DIR" ;;
esac
