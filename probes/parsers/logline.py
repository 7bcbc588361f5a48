"""One line normaliser for every log and tool output fleetdx reads (job logs, kernel logs, step-time logs):
what launchers, collectors, terminals and pasting put before and inside a line is removed, and what it says is
kept (:class:`LogLine`); and the time stamps those lines carry, read as Unix seconds.

**Line normalisation** (:func:`normalise_line`). Launchers, collectors, terminals and pasting put things
before and inside the lines a process prints; each is removed, and what it says is kept:

* rank prefixes of every launcher: PyTorch's ``[rank3]:`` (the *global* rank, ``torch._logging`` and the c10d
  excepthook); torchrun's ``[default3]:`` (``[${role_name}${local_rank}]:``: the *local* rank,
  torch/distributed/elastic/agent/server/local_elastic_agent.py); Open MPI ``--tag-output``'s
  ``[1,3]<stdout>:`` (the MPI rank, taken as the rank); ``srun -l``'s ``3: `` (a Slurm **task id**, kept as
  ``task`` and never read as a torch rank: the mapping needs the job's layout); Ray's ``(RayWorkerWrapper
  pid=4009)`` and ``(pid=123, ip=10.0.0.2)`` (the ip is the host; ``rank=N`` when a launcher prints one, or
  the actor's repr ``(MegatronPolicyWorker[rank=0] pid=4182)``; vLLM's workers ``(VllmWorker rank=0 pid=10672)``, and
  ``(Worker_TP1_EP1 pid=636)``: a tensor-parallel rank, the global rank when no DP/PP part is named); a
  logger's level and ``[module:line, rank=N]`` (OLMo's, the global rank); SGLang's ``[STAMP TP2]`` (the TP rank, the
  global rank when no DP/PP part is named); vLLM's logger prefix (``ERROR 06-25
  15:28:30 worker_base.py:148]``, removed). A
  bare ``[12] `` (MPICH ``-prepend-rank``, but also pid or line counters pasted before lines) is removed and not
  read: it is ambiguous;
* timestamps of several formats, stacked (a collector's before the process's own): ISO 8601 with or without
  seconds, zone and fraction (``2019-06-02T16:13:44.884Z:``, ``2025-02-18 12:54``, ``2024-10-18
  20:47:35,180``), torchrun's ``2025-05-21_15:43:03``, glog's ``E0321 02:07:08.408`` / ``[E321 02:07:08.408
  file.cpp:607]``, syslog's ``Nov 22 10:58:12 host ident[pid]:``, ``dmesg -T``'s ``[Sun Nov 22 10:58:12
  2026]`` and dmesg's ``[ 1234.567890]`` (seconds since boot, kept in ``details``). The event's ``time`` is the
  innermost (the process's own) stamp; ``ts`` its Unix seconds when the date is complete (a stamp without a
  year borrows it from an outer stamp on the line, the last full date seen in the file, or the ``year``
  given); stamps without a zone are read as UTC;
* a JSON-lines record around the line (Docker's json-file driver, what Kubernetes nodes keep for each container;
  logging collectors; benchmark runners): its text field is the line, its time field the stamp
  (:func:`json_line`);
* the damage terminals and pasting do: a line glued to the end of a tqdm/Lightning progress bar (``Epoch 0: 6%|██ |
  32040/500150 [6:28:43<94:39:17, 1.37it/s, ...][E ProcessGroupNCCL.cpp:458] ...``) or after a carriage return;
  markdown quote prefixes (``> ``, ``> > ``) and pytest's ``E       ``, a code span's or fence's backticks glued to
  the line's start, and indents; the backtick that closes a code span at a line's end where the line holds no
  other to pair it with; prose before a code span that opens on a rank prefix (``... it returns `[rank7]:``);
  ANSI colour codes, with or without their ESC byte (``[36m``) or with it as rsyslog escapes it (``#033[36m``); a
  collector's ``host [stderr] `` tag; Docker Compose's ``service-1  | `` column (a container's name, not read as
  a host); a stream tag (``stdout: ``, the container runtime's ``stderr F ``); a
  ``hostname: `` prefix repeated mid-line where outputs of several hosts interleave (the line is split there); Ray's
  ``[repeated 7x across cluster]``; a markdown link a web page rendered into the paste (``ip:
  [10.29.214.5](http://10.29.214.5/)``: its text is kept). A ``[socket.cpp:1011]`` before a line is c10's source
  location, not Open MPI's ``[host:pid]``. Redacted hosts and addresses (``xxx``, ``***``, ``<redacted>``,
  ``<hostname>``, NCCL's ``-``) are never read as a host.

Hard wraps that split one message over several lines, even inside a word, are joined by the job-log parser
(:mod:`fleetdx.probes.parsers.joblog`), which knows which messages may be wrapped.

Pure functions of their input, never raising; patterns linear in the line (tests run them on 1 MB hostile
lines). Memoised where many ranks print the same words (bounded caches, :data:`MEMO_MAX_CHARS`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import NamedTuple

#: characters of one physical line read (longer lines are cut: a progress bar redrawn a million times)
MAX_LINE = 16_384


class LogLine(NamedTuple):
    """One logical line: its body without prefixes, and what the prefixes said."""

    body: str
    rank: int | None = None
    local_rank: int | None = None
    task: int | None = None
    host: str | None = None
    time: str | None = None  #: the innermost (the process's own) time stamp
    outer_time: str | None = None  #: the outermost (collector's) one, when two are stacked
    uptime_s: float | None = None
    pid: int | None = None
    host_redacted: bool = False


# ---------------------------------------------------------------------------------------------- normalisation

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|(?:#033)?\[(?:\d{1,3};)*\d{1,3}m")
_QUOTE_RE = re.compile(r"^[ \t]{0,8}(?:>[ \t]?|`{1,3})+")
#: pytest's marker before each line of an exception it reports (``E       RuntimeError: ...``): a quote; the
#: spaces follow the failing source line's indent (``E           `` inside a method)
_PYTEST_E_RE = re.compile(r"E {3,32}(?=\S)")
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
_ISO = r"(\d{4})[-/](\d\d)[-/](\d\d)[T _](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d{1,9}))?)?(Z|[+-]\d\d:?\d\d)?"
#: ESPnet's logger prefix: the short host name, the global rank and the world size (espnet2/tasks/abs_task.py:
#: ``[lion15:0/4] 2020-09-05 20:04:10,182 (lm:187) INFO: ...``)
_ESPNET = r"\[(?P<{host}>[A-Za-z][\w\-]{{0,62}}):(?P<{rank}>\d{{1,7}})/\d{{1,7}}\][ \t]"
#: :data:`_ESPNET` alone, at a line's start (a line no event is read from still places its rank)
RANK_HOST_PREFIX_RE = re.compile(_ESPNET.format(host="host", rank="rank"))
_PREFIX_RE = re.compile(
    r"^(?:"
    r"\[(?P<ompi_job>\d+),(?P<ompi_rank>\d+)\]<(?:stdout|stderr)>:[ \t]?"
    r"|\[(?P<hvd_rank>\d{1,7})\]<(?:stdout|stderr)>:[ \t]?"  # horovodrun's "[1]<stderr>:"
    r"|\[rank(?P<trank>\d+)\]:[ \t]?"
    r"|\[(?P<role>[A-Za-z_][A-Za-z_\-]*?)(?P<lrank>\d+)\]:[ \t]?"
    r"|\[(?P<hl_host>[A-Za-z][\w.\-]{0,62}):(?P<hl_lrank>\d{1,4})\]:[ \t]?"  # "[gpu187:1]:" host and local rank
    r"|"
    + _ESPNET.format(host="esp_host", rank="esp_rank")
    + r"|<\w{0,12}>[ \t]+(?=\[)"  # Determined's level tag ("<>", "<info>") before its stamp
    r"|[0-9a-f]{8}[ \t]\|\|[ \t]"  # Determined's allocation id and separator ("087c0ee7 || ")
    r"|\[\d{1,9}/[\w.\-]{1,100}/\d{1,12} \(pid \d{1,10}\)\][ \t]"  # Metaflow's task ("[177/train/578 (pid 28936)]")
    r"|\[[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\][ \t]"  # a run's UUID in brackets
    r"|(?P<task>\d{1,6}):[ \t]"
    # SGLang's logger: its stamp and the process's parallel ranks ("[2025-02-09 21:23:00 TP2] ", "... DP1 TP10 EP10]")
    # (releases before 2025 print the clock time alone: "[19:01:01 TP0] ")
    r"|\[(?:(?P<sgl_iso>" + _ISO + r")|\d\d:\d\d:\d\d)(?P<sgl>(?: (?:DP|PP|TP|EP|ATTN_CP|MOE_DP)\d{1,5}){1,6})\][ \t]?"
    r"|\[?(?P<iso>" + _ISO + r")\]?:?[ \t]"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)[ \t]+\[[\w.]{1,100}:\d{1,6},[ \t]?rank=(?P<lvl_rank>\d{1,7})\][ \t]?"
    # vLLM's logger ("ERROR 06-25 15:28:30 worker_base.py:148] ", newer "INFO 06-25 15:28:30 [worker.py:148] ")
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)[ \t]\d\d-\d\d[ \t]\d\d:\d\d:\d\d(?:\.\d{1,6})?[ \t]"
    r"\[?[\w.\-]{1,100}:\d{1,6}\][ \t]?"
    r"|\[(?P<dmesg_t>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\][ \t]?"
    # ctime(3)'s stamp before a tag with or without a space ("Fri Aug 11 12:31:45 2023[1,0]<stdout>:")
    r"|(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})(?:[ \t]|(?=\[))"
    # Open MPI's signal handler and ORTE's own lines ("[rack1-93-slot7:186363] *** Process received signal ***")
    r"|\[(?P<bh_host>[A-Za-z][\w.\-]{0,62}):(?P<bh_pid>\d{1,10})\][ \t]"
    r"|\[[ \t]*(?P<uptime>\d+\.\d+)\][ \t]?"
    r"|(?P<syslog>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)[ \t]+(?P<sys_host>[^\s:\[]+)[ \t]+"
    r"(?P<sys_ident>[\w.\-/@]+)(?:\[\d+\])?:[ \t]"
    r"|(?P<jhost>[A-Za-z0-9][\w.\-]*)[ \t]+(?:kernel|[\w.\-/@]+\[\d+\]):[ \t]"
    r"|(?P<thost>[A-Za-z0-9][\w.\-]*)[ \t]+\[(?:stdout|stderr|out|err)\][ \t]"
    r"|\((?:(?P<ray_name>[A-Za-z_][\w.\-]*)(?:\[rank=(?P<ray_rank>\d{1,7})\])?(?:,[ \t]*|[ \t]+))?"
    r"(?P<ray_kv>\w+=[^\s,()]*(?:(?:,[ \t]*|[ \t]+)\w+=[^\s,()]*)*)\)[ \t]?"
    r"|\((?P<ray_only>[A-Za-z_][\w.\-]*)\)[ \t]"
    r"|\[\d{1,7}\][ \t]"
    r"|\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]?[ \t]+(?=\[)"  # a bare clock time (no date) before a rank prefix
    r"|(?:stdout|stderr)(?::| [FP])[ \t]"
    r"|[A-Za-z0-9][\w.\-]{0,62}[ \t]+\|[ \t]"  # Docker Compose's service column ("vllm-sm120  | "): a container
    r"|(?P<host>[A-Za-z][A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9\-]+)*|[A-Za-z0-9][\w\-]*(?:\.[\w\-]+)+"
    r"|<[\w\-. ]+>|x{3,}|X{3,}|\*{3,}):[ \t]"
    r")"
)
#: a word before ``: `` that is not a host even though it holds a digit
_NOT_HOST_RE = re.compile(
    r"^(?:cuda|rank|local_?rank|epoch|step|iter(?:ation)?|layer|frame|thread|process|device|task|line|batch|"
    r"worker_?id|node_?rank|e\d{3,4}|e[a-z]\d{4}|[wief]\d{3,4}|h100|a100|v100|b200|gb200|sm\d+|py(?:thon)?\d.*|mlx\d|\d+)\d*$",
    re.I,
)
_UNSPECIFIED = frozenset({"0.0.0.0", "::", "[::]"})
_REDACTED_RE = re.compile(r"x{3,}|\*{2,}|redact|^<.*>$|hidden|masked|anonymi[sz]ed|^host(?:name)?$|^[\W_]*$", re.I)
_RAY_KV_RE = re.compile(r"(\w+)=([^\s,()]*)")
#: vLLM's worker name when tensor parallelism is its only layout (vllm/v1/executor/multiproc_executor.py,
#: ``setup_proc_title_and_log_prefix``: ``Worker`` + ``_DP{r}`` / ``_PP{r}`` / ``_PCP{r}`` only where that size is
#: above 1, then ``_TP{r}``, ``_DCP{r}``, ``_EP{r}``): with no DP, PP or PCP part the world is the TP group, so
#: the TP rank is the global rank
_VLLM_TP_ONLY_RE = re.compile(r"Worker_TP(\d{1,5})(?:_DCP\d{1,5})?(?:_EP\d{1,5})?")


def _sglang_rank(tags: str) -> int | None:
    """The global rank SGLang's logger prefix gives (``" TP2"``, ``" TP10 EP10"``; sglang/srt/managers/scheduler.py
    ``run_scheduler_process``: `` DP{r}`` / `` PP{r}`` / `` ATTN_CP{r}`` / `` MOE_DP{r}`` are added only where that
    size is above 1 or a DP rank is set, then `` TP{r}`` and `` EP{r}``, the EP group inside the TP group): with
    only TP (and EP) named the world is the TP group and the TP rank is the global rank; otherwise None."""
    parts = tags.split()
    tp = [p for p in parts if p.startswith("TP")]
    if len(tp) != 1 or any(not p.startswith(("TP", "EP")) for p in parts):
        return None
    return int(tp[0][2:])


_RAY_REPEAT_RE = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
#: a tqdm / Lightning progress bar (``  6%|██   | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6]``)
_PBAR_RE = re.compile(r"\d{1,3}%\|[^|\n]{0,200}\|[^\[\n]{0,80}\[[^\]\n]{0,600}?(?:it/s|s/it|\?it/s)[^\]\n]*\]")
_GLOG_STAMP_RE = re.compile(r"^[EWIF](\d{3,4}) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?$")
#: torchrun's ``time : 2025-05-21_15:43:03`` and Slurm's ``CANCELLED AT 2021-05-11T12:06:17``
_ISO_RE = re.compile(_ISO)
_SYSLOG_RE = re.compile(r"([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d)")
_DMESG_T_RE = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{4})")
_MAX_PREFIXES = 12


def host_of(word: str) -> tuple[str | None, bool]:
    """(host, redacted) of a word read as a host name (Slurm's ``slurmstepd-sim1: `` names node ``sim1``); the
    unspecified address (``0.0.0.0``, ``::``, a process bound to every interface, as Ray prints it) names no host."""
    if _REDACTED_RE.search(word):
        return None, True
    if word in _UNSPECIFIED:
        return None, False
    return word.removeprefix("slurmstepd-"), False


#: the Python loggers whose name starts a line as a host would (``torch.distributed.elastic.multiprocessing.api:
#: [ERROR] failed (exitcode: 1) ...``, ``deepspeed.launcher.runner: ...``): never a host
_LOGGER_ROOTS = ("torch.", "deepspeed.", "accelerate.", "lightning.", "pytorch_lightning.", "ray.", "transformers.")


#: the last part of a dotted Python class name (``EnforceNotMet``, ``ProcessRaisedException``): CamelCase, never a
#: host name's label
_QUALNAME_TAIL_RE = re.compile(r"[A-Z][a-z]+[A-Z]\w*$")
#: a word before ``: `` with a script's or source file's suffix names that file (argparse's ``prog: error:``)
_SOURCE_SUFFIXES = (".py", ".sh", ".cc", ".cpp", ".cu", ".h")


def _is_host_word(word: str) -> bool:
    if word[:3] == "GPU" and word[3:].isdigit() and len(word) <= 5:  # "GPU3: ..." names a device, not a host
        return False
    if word.startswith(_LOGGER_ROOTS):
        return False
    if word.endswith(_SOURCE_SUFFIXES):  # "train.py: error: unrecognized arguments" names a script, not a host
        return False
    if "." in word and _QUALNAME_TAIL_RE.match(word.rsplit(".", 1)[1]):  # paddle.fluid.core.EnforceNotMet: a class
        return False
    return not _NOT_HOST_RE.match(word) and not word.endswith(("Error", "Exception", "Warning"))


#: longest text whose reading is memoised (longer lines are read afresh each time: the memos stay a few MiB)
MEMO_MAX_CHARS = 1_024


def _strip_prefixes(text: str) -> LogLine:
    """``text`` without its prefixes, and what they said. The launchers' rank prefixes (torchrun's ``[rankN]:``,
    ``srun -l``'s ``N: ``) say only a rank or a task: what follows them is read once however many ranks print it
    (the same traceback on every rank), with the outer rank or task filled in where the rest names none."""
    split = prefixed(text)
    if split is not None and len(split[2]) <= MEMO_MAX_CHARS:
        return _with_prefix(_strip_rest(split[2]), split[0], split[1])
    return _strip_all(text, _MAX_PREFIXES)


#: a launcher's rank prefix ``[rankN]:`` (1 to 7 digits) or ``srun -l``'s task prefix ``N: `` (1 to 6 digits)
_RANK_PREFIX_RE = re.compile(r"\[rank(\d{1,7})\]:|(\d{1,6}):[ \t]")


def _with_prefix(ll: LogLine, rank: int | None, task: int | None) -> LogLine:
    """``ll`` (what follows a rank or task prefix) with the prefix's rank or task where it names none itself (built
    whole: NamedTuple._replace costs 5x as much)."""
    if rank is not None and ll.rank is None:
        return LogLine(ll.body, rank, *ll[2:])
    if task is not None and ll.task is None:
        return LogLine(ll.body, ll.rank, ll.local_rank, task, *ll[4:])
    return ll


@lru_cache(maxsize=8_192)
def _strip_rest(rest: str) -> LogLine:
    """What follows one rank or task prefix (see :func:`_strip_prefixes`), read with one prefix fewer to go."""
    return _strip_all(rest, _MAX_PREFIXES - 1)


def _strip_all(text: str, limit: int) -> LogLine:
    rank = local_rank = task = pid = None
    host: str | None = None
    redacted = False
    stamps: list[str] = []
    uptime = None
    for _ in range(limit):
        # a quote (or a markdown code span's backtick glued to the line) starts with one of these
        m = _QUOTE_RE.match(text) if text[:1] in (" ", "\t", ">", "`") else None
        if m and m.end() > 0 and (">" in m.group(0) or "`" in m.group(0)):
            text = text[m.end() :]
            continue
        if text[:2] == "E " and (m := _PYTEST_E_RE.match(text)) is not None:
            text = text[m.end() :]
            continue
        text = text.lstrip(" \t")
        m = _PREFIX_RE.match(text)
        if m is None:
            break
        kind = m.lastgroup  # the outer group of the alternative that matched closes last
        if kind == "host":
            word = m.group("host")
            if not _is_host_word(word):
                break
            h, red = host_of(word)
            host, redacted = h or host, redacted or red
        elif kind in ("ompi_rank", "hvd_rank"):
            rank = int(m.group(kind))
        elif kind in ("trank", "lvl_rank"):
            rank = int(m.group(kind))
        elif kind == "lrank":
            local_rank = int(m.group("lrank"))
        elif kind == "esp_rank":
            rank = int(m.group("esp_rank"))
            h, red = host_of(m.group("esp_host"))
            host, redacted = h or host, redacted or red
        elif kind == "hl_lrank":
            local_rank = int(m.group("hl_lrank"))
            h, red = host_of(m.group("hl_host"))
            host, redacted = h or host, redacted or red
        elif kind == "task":
            task = int(m.group("task"))
        elif kind in ("iso", "dmesg_t", "ctime"):
            stamps.append(m.group(kind))
        elif kind == "sgl":
            if m.group("sgl_iso") is not None:
                stamps.append(m.group("sgl_iso"))
            rank = _sglang_rank(m.group("sgl")) if rank is None else rank
        elif kind == "uptime":
            uptime = float(m.group("uptime"))
        elif kind == "sys_ident":
            stamps.append(m.group("syslog"))
            h, red = host_of(m.group("sys_host"))
            host, redacted = h or host, redacted or red
        elif kind in ("jhost", "thost"):
            h, red = host_of(m.group(kind))
            host, redacted = h or host, redacted or red
        elif kind == "bh_pid":  # Open MPI's "[host:pid]": the process too
            if not m.group("bh_host").endswith(_SOURCE_SUFFIXES):  # "[socket.cpp:1011]": c10's source location
                h, red = host_of(m.group("bh_host"))
                host, redacted, pid = h or host, redacted or red, int(m.group("bh_pid"))
        elif kind == "ray_kv":
            if m.group("ray_rank") is not None:  # an actor whose repr names its rank ("Worker[rank=0]", NeMo-RL)
                rank = int(m.group("ray_rank"))
            elif (
                (name := m.group("ray_name"))
                and name.startswith("Worker_TP")
                and (v := _VLLM_TP_ONLY_RE.fullmatch(name))
            ):
                rank = int(v.group(1))
            for k, v in _RAY_KV_RE.findall(m.group("ray_kv")):
                if k == "ip" and v:
                    h, red = host_of(v)
                    host, redacted = h or host, redacted or red
                elif k == "pid" and v.isdigit():
                    pid = int(v)
                elif k == "rank" and v.isdigit():
                    rank = int(v)
                elif k in ("local_rank", "local-rank") and v.isdigit():
                    local_rank = int(v)
        text = text[m.end() :]
    body = " ".join(text.split()) if ("  " in text or "\t" in text) else text.strip()
    if body[-1:] == "`" and body.count("`") % 2:  # a markdown code span closed on the paste's last line
        body = body.rstrip("`").rstrip()
    return LogLine(
        body=_RAY_REPEAT_RE.sub("", body) if "repeated" in body else body,
        rank=rank,
        local_rank=local_rank,
        task=task,
        host=host,
        time=stamps[-1] if stamps else None,
        outer_time=stamps[0] if len(stamps) > 1 else None,
        uptime_s=uptime,
        pid=pid,
        host_redacted=redacted,
    )


#: a markdown code span opened mid-line before a rank prefix (a log quoted inside prose)
_CODE_SPAN_RE = re.compile(r"`(?=\[rank\d{1,7}\]:)")


def _segments(raw: str) -> list[str]:
    """A physical line cut into the logical lines a terminal drew on it: carriage returns, progress bars."""
    parts = raw.split("\r") if "\r" in raw else [raw]
    out: list[str] = []
    for part in parts:
        if "%|" in part:
            ends = [m.end() for m in _PBAR_RE.finditer(part)]
            if ends:
                part = part[ends[-1] :]
        if "`[rank" in part and (c := _CODE_SPAN_RE.search(part)) is not None:
            part = part[c.end() :]  # prose, then the log as a code span: "... it returns `[rank7]: ..."
        if part.strip():
            out.append(part)
    return out


def normalise_line(raw: str) -> list[LogLine]:
    """The logical lines of one physical line ``raw``: ANSI codes removed, cut after progress bars and carriage
    returns, split where the host of the line's ``host: `` prefix starts a line again mid-line, each without its
    prefixes (see the module doc). Never raises.

    A line that starts with a launcher's rank or task prefix (``[rankN]:``, ``srun -l``'s ``N: ``) and is not cut
    by a carriage return or a progress bar is read as its prefix plus what follows it, and what follows is read
    once however many ranks print it (:func:`after_prefix`): the same answer as the whole line's reading."""
    split = prefixed(raw)
    if split is not None:
        return normalise_prefixed(split)
    if raw[:2] == '{"' and (inner := json_line(raw)) is not None:
        text, stamp = inner
        lines = normalise_line(text)
        if stamp is not None and lines and lines[0].time is None:
            lines[0] = lines[0]._replace(time=stamp)
        return lines
    return _normalise(raw[:MAX_LINE].rstrip("\n"), _MAX_PREFIXES)


#: the field of a JSON-lines log record that holds the line, and the one that holds its time, first found wins:
#: Docker's json-file driver (``{"log": "...\\n", "stream": "stderr", "time": "..."}``, what Kubernetes nodes keep
#: under /var/log/containers), logging collectors (``message``, ``msg``, ``@timestamp``) and benchmark runners
#: (milabench's ``{"event": "line", "data": "...", "pipe": "stderr"}``)
_JSON_TEXT_KEYS = ("log", "data", "message", "msg", "MESSAGE")
_JSON_TIME_KEYS = ("time", "timestamp", "@timestamp")


def json_line(raw: str) -> tuple[str, str | None] | None:
    """(the log line, its time stamp as written or ``None``) a JSON-lines record ``raw`` wraps (see
    :data:`_JSON_TEXT_KEYS`), its trailing newline removed; ``None`` when ``raw`` is no JSON object or holds no
    text field. A record longer than :data:`MAX_LINE` is not decoded. Never raises."""
    raw = raw.rstrip("\r\n")
    if len(raw) > MAX_LINE or raw[-1:] != "}":
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    text = next((v for k in _JSON_TEXT_KEYS if isinstance(v := rec.get(k), str)), None)
    if text is None or text.startswith('{"'):  # one level of wrapping only
        return None
    stamp = next((v for k in _JSON_TIME_KEYS if isinstance(v := rec.get(k), str)), None)
    return text.rstrip("\r\n").replace("\n", " "), stamp


def normalise_prefixed(split: tuple[int | None, int | None, str]) -> list[LogLine]:
    """:func:`normalise_line` of a line that :func:`prefixed` has split into (rank, task, rest)."""
    rank, task, rest = split
    lines = after_prefix(rest) if len(rest) <= MEMO_MAX_CHARS else _normalise(rest, _MAX_PREFIXES - 1)
    return [_with_prefix(lines[0] if lines else LogLine(body=""), rank, task), *lines[1:]]


def prefixed(raw: str) -> tuple[int | None, int | None, str] | None:
    """(rank, task, rest) of a physical line that :func:`normalise_line` reads as a launcher's rank or task prefix
    (``[rankN]:``, ``srun -l``'s ``N: ``) followed by ``rest`` (the line's newline removed), ``None`` for any other
    line (no such prefix, or a carriage return or progress bar that cuts the line). ``rest`` of up to
    :data:`MEMO_MAX_CHARS` characters is read by :func:`after_prefix`; the line's first logical line is then that
    reading with the prefix's rank (or task) where it names none itself."""
    split = split_prefix(raw)
    return None if split is None or "\r" in split[2] or "%|" in split[2] else split


def split_prefix(raw: str) -> tuple[int | None, int | None, str] | None:
    """(rank, task, rest) of a physical line that starts with a launcher's rank or task prefix, whatever follows
    (:func:`prefixed` is this without the lines a carriage return or a progress bar cuts)."""
    m = _RANK_PREFIX_RE.match(raw)
    if m is None:
        return None
    rest = raw[m.end() : MAX_LINE]
    if rest[-1:] == "\n":
        rest = rest.rstrip("\n")
    rank, task = m.groups()
    return (int(rank), None, rest) if rank is not None else (None, int(task), rest)


#: what the end of a launcher's rank or task prefix (:func:`prefixed`) can be: ``[rank12]:``, ``]:``, ``2: ``,
#: ``:``, the blank after ``N:``
_PREFIX_TAIL_RE = re.compile(r"(?:(?:\[rank|rank|ank|nk|k)\d+|\d*)\]:|:|\d*:[ \t]|[ \t]")


def prefix_crossings(literals: Iterable[str]) -> tuple[str, ...]:
    """How the rest of a prefixed line (:func:`prefixed`) may start when one of ``literals`` begins inside the
    prefix and ends in the rest (``" CANCELLED AT "`` on ``3: CANCELLED AT ...``): a line whose rest starts with
    none of them holds a literal exactly when its rest does (a line's rest may then be looked up once for all the
    ranks that print it).

    Raises:
        ValueError: a literal fits inside a prefix (``"]:"``): every prefixed line holds it.
    """
    out: list[str] = []
    for lit in literals:
        for k in range(1, len(lit) + 1):
            if _PREFIX_TAIL_RE.fullmatch(lit[:k]):
                if k == len(lit):
                    raise ValueError(f"literal {lit!r} fits inside a launcher's rank or task prefix")
                out.append(lit[k:])
    return tuple(dict.fromkeys(out))


@lru_cache(maxsize=8_192)
def after_prefix(rest: str) -> tuple[LogLine, ...]:
    """The logical lines of what follows a rank or task prefix (no prefix filled in), read with one prefix fewer
    to go (memoised: the same words on many ranks are read once). Neither prefix holds what the ANSI pattern
    removes, so removing it here is removing it from the line."""
    return tuple(_normalise(rest, _MAX_PREFIXES - 1))


#: a markdown link a page rendered into the paste (``ip: [10.29.214.5](http://10.29.214.5/)``): its text is the line's
_MD_LINK_RE = re.compile(r"\[([^\[\]\n]{1,200})\]\(https?://[^\s()]{1,300}\)")


def _normalise(raw: str, limit: int) -> list[LogLine]:
    if "[" in raw or "\x1b" in raw:
        raw = _ANSI_RE.sub("", raw)
        for _ in range(3):  # a link inside a link's text (a page that linked a linked paste) unwraps in turn
            if "](http" not in raw:
                break
            raw = _MD_LINK_RE.sub(r"\1", raw)
    out: list[LogLine] = []
    for seg in _segments(raw):
        first = _strip_prefixes(seg) if limit == _MAX_PREFIXES else _strip_all(seg, limit)
        if first.host is not None and f" {first.host}: " in first.body:
            pieces = first.body.split(f" {first.host}: ")
            out.append(first._replace(body=pieces[0]))
            out += [_strip_prefixes(f"{first.host}: {p}") for p in pieces[1:] if p.strip()]
        else:
            out.append(first)
    return out


# ---------------------------------------------------------------------------------------------------- times


def _utc(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> float | None:
    try:
        dt = datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc)
    except ValueError:
        return None
    return dt.timestamp() + (int(frac[:6].ljust(6, "0")) / 1e6 if frac else 0.0)


def stamp_ts(stamp: str, year: int | None = None) -> float | None:
    """Unix seconds of a printed time stamp (see the module doc for the formats), ``None`` when it has no date
    or no year and ``year`` is not given. Zone-less stamps are UTC; an ISO offset is applied."""
    m = _ISO_RE.search(stamp)
    if m:
        y, mo, d, h, mi, s, frac, zone = m.groups()
        ts = _utc(int(y), int(mo), int(d), int(h), int(mi), int(s or 0), frac)
        if ts is not None and zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            hh, mm = int(zone[1:3]), int(zone[-2:])
            ts -= sign * (hh * 3600 + mm * 60)
        return ts
    m = _DMESG_T_RE.search(stamp)
    if m:
        mon, d, h, mi, s, y = m.groups()
        return _utc(int(y), _MONTHS.get(mon, 0), int(d), int(h), int(mi), int(s), None)
    if year is None:
        return None
    m = _GLOG_STAMP_RE.match(stamp)
    if m:
        md, h, mi, s, frac = m.groups()
        mo, d = (int(md[:-2]), int(md[-2:]))
        return _utc(year, mo, d, int(h), int(mi), int(s), frac)
    m = _SYSLOG_RE.search(stamp)
    if m:
        mon, d, h, mi, s = m.groups()
        return _utc(year, _MONTHS.get(mon, 0), int(d), int(h), int(mi), int(s), None)
    return None


def year_of(stamp: str | None) -> int | None:
    """The year a stamp names (ISO 8601 or ``dmesg -T``), ``None`` when it names none."""
    if stamp is None:
        return None
    m = _ISO_RE.search(stamp) or _DMESG_T_RE.search(stamp)
    if m is None:
        return None
    return int(m.group(1)) if m.re is _ISO_RE else int(m.group(6))


def iso(ts: float | None) -> str | None:
    """``ts`` as ISO 8601 UTC with milliseconds, or ``None``."""
    if ts is None:
        return None
    dt = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=ts)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_host_prefix(raw: str, word: str) -> bool:
    """Whether ``word``, the text before the first ``": "`` of ``raw``, is a ``host: `` prefix that names a host
    (not a redacted one, not a word like ``epoch3``): a cheap look for lines not normalised."""
    m = _PREFIX_RE.match(raw)
    return m is not None and m.lastgroup == "host" and _is_host_word(word) and host_of(word)[0] is not None
