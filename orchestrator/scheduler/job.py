"""The job a run is about: read from inside the job, or from the scheduler for a past job.

* Inside a Slurm job (sbatch, srun, a prolog or epilog): the ``SLURM_*`` variables (sbatch(1), srun(1),
  "OUTPUT ENVIRONMENT VARIABLES"; prolog/epilog: slurm.conf(5) "Prolog and Epilog Scripts").
* A past or running Slurm job by id: ``scontrol show job -o ID`` (while slurmctld remembers it,
  ``MinJobAge``, 300 s by default), else ``sacct --json -j ID`` where accounting is enabled.
* Inside a Kubernetes pod: the downward API (kubernetes.io/docs/concepts/workloads/pods/downward-api):
  fleetdx's manifests set ``FLEETDX_K8S_NODE_NAME`` from ``spec.nodeName``, so findings name the Kubernetes
  **node**, never the pod; ``FLEETDX_JOB_ID``/``FLEETDX_JOB_NAME`` when a manifest sets them, else the pod's.

The rank map is given only when it can be known: inside a Slurm step whose tasks are laid out with the
default ``block`` distribution (``SLURM_DISTRIBUTION`` unset or ``block``), rank ``r`` runs on the node whose
cumulative task count first exceeds ``r`` (srun(1) ``--distribution=block``), its local rank being its index
there. GPUs are not guessed.

Pure except :func:`load_slurm_job`, which runs ``scontrol``/``sacct`` through a runner.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fleetdx.orchestrator.scheduler.targets import expand_hostlist, expected_gpus
from fleetdx.probes.contracts import Job, RankPlacement, SchedulerKind
from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.slurm_job import SlurmJobRecord, parse_sacct_json, parse_scontrol_job
from fleetdx.probes.runner import Runner, SubprocessRunner

#: ``SLURM_TASKS_PER_NODE`` / ``SLURM_STEP_TASKS_PER_NODE``: ``"2(x3),1"`` = 2 tasks on each of 3 nodes, then 1
_TASKS_RE = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")
#: how long ``scontrol``/``sacct`` may take
SCHEDULER_TIMEOUT_S = 15.0
#: Slurm job ids: digits, with an array (``_7``) or heterogeneous (``+1``) suffix
_JOB_ID_RE = re.compile(r"^\d+(?:_\d+|\+\d+)?$")
#: Kubernetes downward-API variables set by fleetdx's manifests
K8S_NODE_VAR = "FLEETDX_K8S_NODE_NAME"
K8S_POD_VAR = "FLEETDX_K8S_POD_NAME"


def tasks_per_node(text: str) -> list[int]:
    """``"2(x3),1"`` -> ``[2, 2, 2, 1]``.

    Raises:
        ConfigError: not Slurm's tasks-per-node syntax.
    """
    out: list[int] = []
    for part in text.split(","):
        m = _TASKS_RE.match(part.strip())
        if not m:
            raise ConfigError(f"{text!r}: not a Slurm tasks-per-node list like 2(x3),1")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def block_rank_map(nodes: list[str], per_node: list[int]) -> list[RankPlacement]:
    """Ranks laid out by Slurm's ``block`` distribution: the first ``per_node[0]`` ranks on ``nodes[0]``,
    and so on. Empty when the lists disagree in length."""
    if len(nodes) != len(per_node):
        return []
    ranks: list[RankPlacement] = []
    for host, n in zip(nodes, per_node, strict=True):
        first = len(ranks)
        ranks += [RankPlacement(rank=first + i, host=host, local_rank=i) for i in range(n)]
    return ranks


def _slurm_from_env(env: Mapping[str, str]) -> Job:
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    nodes = expand_hostlist(nodelist) if nodelist else []
    gpus, _ = expected_gpus(None, env)
    start = env.get("SLURM_JOB_START_TIME", "")  # Slurm 23.02+
    end = env.get("SLURM_JOB_END_TIME", "")
    ranks: list[RankPlacement] = []
    layout = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    step_nodes = env.get("SLURM_STEP_NODELIST")
    if layout and env.get("SLURM_DISTRIBUTION", "block").split(":")[0] == "block":
        ranks = block_rank_map(expand_hostlist(step_nodes) if step_nodes else nodes, tasks_per_node(layout))
    submit = {
        k: v
        for k, v in (
            ("partition", env.get("SLURM_JOB_PARTITION", "")),
            ("account", env.get("SLURM_JOB_ACCOUNT", "")),
            ("qos", env.get("SLURM_JOB_QOS", "")),
            ("nodes", str(len(nodes)) if nodes else ""),
        )
        if v
    }
    return Job(
        scheduler=SchedulerKind.SLURM,
        job_id=env["SLURM_JOB_ID"],
        name=env.get("SLURM_JOB_NAME") or None,
        user=env.get("SLURM_JOB_USER") or env.get("USER") or None,
        nodes=nodes,
        gpus_per_node=gpus,
        start_time=float(start) if start.isdigit() else None,
        end_time=float(end) if end.isdigit() else None,
        state="RUNNING",
        ranks=ranks,
        submit=submit,
    )


def _k8s_from_env(env: Mapping[str, str]) -> Job:
    return Job(
        scheduler=SchedulerKind.KUBERNETES,
        job_id=env.get("FLEETDX_JOB_ID") or env.get(K8S_POD_VAR) or None,
        name=env.get("FLEETDX_JOB_NAME") or None,
        nodes=[env[K8S_NODE_VAR]],
        state="RUNNING",
    )


def job_from_env(env: Mapping[str, str]) -> Job | None:
    """The job this process runs in, from its environment; ``None`` outside any job fleetdx knows.

    Raises:
        ConfigError: ``SLURM_JOB_NODELIST`` or ``SLURM_TASKS_PER_NODE`` is malformed.
    """
    if env.get("SLURM_JOB_ID"):
        return _slurm_from_env(env)
    if env.get(K8S_NODE_VAR):
        return _k8s_from_env(env)
    return None


def node_name_from_env(env: Mapping[str, str]) -> str | None:
    """The Kubernetes node this pod runs on (``spec.nodeName`` through the downward API), else ``None``:
    the name findings should carry instead of the pod's hostname."""
    return env.get(K8S_NODE_VAR) or None


def job_from_record(rec: SlurmJobRecord) -> Job:
    """A :class:`Job` from Slurm's own description of it; ``submit`` holds the options needed to submit it
    again (``sbatch --partition ... --nodes ...``).

    Raises:
        ConfigError: its ``NodeList`` is not a valid hostlist.
    """
    submit = {
        k: v
        for k, v in (
            ("partition", rec.partition),
            ("account", rec.account),
            ("qos", rec.qos),
            ("time", rec.time_limit),
            ("nodes", str(rec.num_nodes) if rec.num_nodes else None),
            ("gpus-per-node", str(rec.gpus_per_node) if rec.gpus_per_node else None),
            ("job-name", rec.name),
            ("chdir", rec.work_dir),
            ("command", rec.command),
        )
        if v
    }
    return Job(
        scheduler=SchedulerKind.SLURM,
        job_id=rec.job_id,
        name=rec.name,
        user=rec.user,
        nodes=expand_hostlist(rec.nodelist) if rec.nodelist else [],
        gpus_per_node=rec.gpus_per_node,
        start_time=rec.start_time,
        end_time=rec.end_time,
        state=rec.state,
        exit_code=rec.exit_code,
        signal=rec.signal,
        submit=submit,
    )


class JobNotFoundError(ConfigError):
    """Neither ``scontrol`` nor ``sacct`` knows the job: slurmctld has purged it (``MinJobAge``, 300 s by
    default) and accounting is off or has no record. A postmortem goes on without the job record."""


def load_slurm_job(job_id: str, runner: Runner | None = None, timeout_s: float = SCHEDULER_TIMEOUT_S) -> Job:
    """Job ``job_id`` from ``scontrol show job -o``, else (the controller has forgotten it) ``sacct --json``.

    Raises:
        ConfigError: ``job_id`` is not a Slurm job id.
        JobNotFoundError: neither command knows the job (a :class:`ConfigError`; the message gives each
            command's reason: not installed, unknown id, accounting disabled, timed out).
    """
    if not _JOB_ID_RE.match(job_id):
        raise ConfigError(f"{job_id!r}: not a Slurm job id (digits, optionally _N or +N)")
    runner = runner or SubprocessRunner()
    reasons: list[str] = []
    attempts = (
        (["scontrol", "show", "job", "-o", job_id], parse_scontrol_job),
        (["sacct", "--json", "-j", job_id], parse_sacct_json),
    )
    for argv, parse in attempts:
        res = runner.run(argv, timeout_s=timeout_s)
        if not res.ok:
            why = res.reason or (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
            reasons.append(f"{argv[0]}: {why}")
            continue
        try:
            records = parse(res.stdout)
        except ParseError as e:
            reasons.append(f"{argv[0]}: {e}")
            continue
        rec = next((r for r in records if r.job_id == job_id), records[0])
        return job_from_record(rec)
    raise JobNotFoundError(f"Slurm job {job_id} not found ({'; '.join(reasons)})")
