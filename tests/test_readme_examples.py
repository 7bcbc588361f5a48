"""The README's output examples are run and compared, so the README cannot drift from what fleetdx prints
(issue 21, item 14: the postmortem's "kept in" line, the Flight Recorder example's missing header, action and
"missing:" lines, ``place --nodes`` after the options changed...); and the README names every command, every
file of ``slurm/`` and ``k8s/``, and the scripts as they are installed.

A fenced ```text block preceded by an HTML comment ``<!-- check ... -->`` is checked:

- its commands are its ``$ `` lines (``$ cd DIR`` changes directory, from the repository root; a trailing ``\\``
  continues a command on the next line; ``# exit N`` after a command is the exit code it must have, else 0);
  a block that shows no command names it in the comment: ``<!-- check run="cd DIR && fleetdx ..." exit=1 -->``
  (``exit`` there is the last command's exit code);
- each command runs as ``python -m fleetdx`` in a subprocess (stdout not a terminal: 140 columns), with a fresh
  store (``FLEETDX_DB_URL``) and spool directory; its output is its stdout then its stderr;
- the lines the README shows under a command must be its output lines, in order, one for one, compared with
  runs of spaces (and of a table rule's character) collapsed and trailing spaces dropped; ``…`` (or ``...``)
  inside a README line stands for any text (a run id, a long path, elided figures), and a README line that is
  only ``...`` stands for any number of output lines. So a line added to or dropped from the output fails the
  check, where the README does not say it elides.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*check\b(?P<args>.*?)-->\s*\n```text\n(?P<body>.*?)\n```", re.S)


@dataclass
class Command:
    argv: list[str]
    cwd: Path
    exit_code: int
    shown: list[str] = field(default_factory=list)  #: the README's lines of its output


@dataclass
class Example:
    line: int  #: where the block starts in README.md
    commands: list[Command]


def _split_exit(text: str) -> tuple[str, int | None]:
    m = re.search(r"\s+#\s*exit\s+(\d+)\s*$", text)
    return (text[: m.start()], int(m.group(1))) if m else (text.split("  #", 1)[0], None)


def _commands_of(body: list[str], cwd: Path) -> tuple[list[Command], Path]:
    commands: list[Command] = []
    pending = ""
    for raw in body:
        if pending or raw.startswith("$ "):
            text = pending + (raw[2:] if not pending else raw.strip())
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            text, code = _split_exit(text)
            argv = shlex.split(text)
            if argv[0] == "cd":
                cwd = (cwd / argv[1]).resolve()
                continue
            assert argv[0] == "fleetdx", f"README check: only fleetdx commands run: {text}"
            commands.append(Command(argv[1:], cwd, code or 0))
        elif commands:
            commands[-1].shown.append(raw)
    return commands, cwd


def examples() -> list[Example]:
    text = README.read_text(encoding="utf-8")
    out = []
    for m in MARKER.finditer(text):
        args = dict(a.split("=", 1) for a in shlex.split(m.group("args").strip()))
        body = m.group("body").splitlines()
        cwd = ROOT
        if "run" in args:
            pre = ["$ " + c.strip() for c in args["run"].split("&&")]
            commands, cwd = _commands_of(pre, cwd)
            commands[-1].shown = body
        else:
            commands, cwd = _commands_of(body, cwd)
        if "exit" in args:
            commands[-1].exit_code = int(args["exit"])
        out.append(Example(text.count("\n", 0, m.start()) + 1, commands))
    return out


def _pattern(readme_line: str) -> re.Pattern[str]:
    parts = re.split(r"…|\.\.\.", _norm(readme_line))
    return re.compile(".*".join(re.escape(p) for p in parts))


def _norm(line: str) -> str:
    """Runs of spaces, and of one table-rule character (``━━━``), as one: a column one character wider is the
    same table."""
    return re.sub(r"([━─═])\1+", r"\1", re.sub(r"\s+", " ", line)).strip()


def mismatch(shown: list[str], output: list[str]) -> str | None:
    """Why ``output`` does not have the shape ``shown`` says (see the module doc), or ``None``."""
    want = [x for x in shown if x.strip()]
    got = [x for x in output if x.strip()]

    def match(i: int, j: int) -> bool:  # want[i:] against got[j:], "..." lines eliding any run of lines
        if i == len(want):
            return j == len(got)
        if want[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and bool(_pattern(want[i]).fullmatch(_norm(got[j]))) and match(i + 1, j + 1)

    if match(0, 0):
        return None
    for i, (w, g) in enumerate(zip(want, got, strict=False)):  # the first line that differs, for the message
        if w.strip() == "...":
            break
        if not _pattern(w).fullmatch(_norm(g)):
            return f"line {i + 1}: README {w.strip()!r}\n  output {g.strip()!r}"
    return f"{len(want)} README lines, {len(got)} output lines:\n" + "\n".join(got)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH", "RAY_ADDRESS")}
    env.update(FLEETDX_DB_URL=f"sqlite:///{tmp}/fleetdx.db", FLEETDX_SPOOL_DIR=str(tmp / "spool"), NO_COLOR="1")
    env.pop("FORCE_COLOR", None)
    return env


def test_the_readme_marks_its_examples() -> None:
    found = examples()
    assert len(found) >= 6, "the README's checked examples went missing"
    assert sum(len(e.commands) for e in found) >= 8


@pytest.mark.parametrize("example", examples(), ids=lambda e: f"README.md:{e.line}")
def test_readme_example(example: Example, tmp_path: Path) -> None:
    for c in example.commands:
        res = subprocess.run(
            [sys.executable, "-m", "fleetdx", *c.argv],
            cwd=c.cwd,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        where = f"README.md:{example.line}: fleetdx {' '.join(c.argv)}"
        assert res.returncode == c.exit_code, f"{where}: exit {res.returncode}\n{res.stdout}{res.stderr}"
        why = mismatch(c.shown, (res.stdout + res.stderr).splitlines())
        assert why is None, f"{where}: the README's output is not the command's:\n{why}"


def test_mismatch_catches_added_dropped_and_changed_lines() -> None:
    shown = ["header", "1. CRITICAL X  host…", "...", "verdict: CRITICAL (exit 2)"]
    assert mismatch(shown, ["header", "1. CRITICAL X  host-7 GPU0", "a", "b", "verdict: CRITICAL (exit 2)"]) is None
    assert mismatch(shown, ["1. CRITICAL X  host-7", "verdict: CRITICAL (exit 2)"]) is not None  # header dropped
    assert mismatch(["a", "b"], ["a", "new line", "b"]) is not None  # a line the README does not show
    assert mismatch(["verdict: OK"], ["verdict: CRITICAL"]) is not None
    assert mismatch(["a   b  "], ["a b"]) is None  # table padding is not compared


def _leaf_commands() -> list[str]:
    import typer

    from fleetdx.orchestrator.cli.main import _register, app

    _register()

    def walk(command: object, path: tuple[str, ...]) -> list[str]:
        subs = getattr(command, "commands", None)
        if subs is None:
            return [" ".join(path)]
        return [x for name, sub in subs.items() if not sub.hidden for x in walk(sub, (*path, name))]

    return walk(typer.main.get_command(app), ())


def test_every_command_is_in_the_readme() -> None:
    """``k8s mark`` was in ``fleetdx --help`` and nowhere in the README."""
    text = README.read_text(encoding="utf-8")
    assert [c for c in _leaf_commands() if f"fleetdx {c}" not in text] == []


def test_the_layout_names_every_slurm_and_k8s_file() -> None:
    text = README.read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :]
    files = sorted(p.name for d in ("slurm", "k8s") for p in (ROOT / d).iterdir() if p.is_file())
    assert [f for f in files if f not in layout] == []


def test_prolog_and_epilog_are_installed_under_their_own_names() -> None:
    """The README said ``Prolog=.../prolog.sh``, the script's header ``Prolog=.../fleetdx.sh``."""
    scripts = [(ROOT / "slurm" / n).read_text(encoding="utf-8") for n in ("prolog.sh", "epilog.sh")]
    texts = [README.read_text(encoding="utf-8"), *scripts]
    settings = [m for t in texts for m in re.findall(r"\b(Prolog|Epilog)=(/\S+?)[`\s]", t)]
    assert settings
    for key, path in settings:
        assert Path(path).name == f"{key.lower()}.sh", (key, path)


@pytest.mark.timeout(120)
def test_serve_access_log_is_on_stderr_as_the_readme_says(tmp_path: Path) -> None:
    """uvicorn writes its access log to stdout; the README says stderr (stdout stays for what scripts read)."""
    import socket
    import time

    import httpx

    from tests.store_samples import migrated

    assert "Each request writes one access-log line to\nstderr" in README.read_text(encoding="utf-8")
    db = migrated(f"sqlite:///{tmp_path}/serve.db")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):  # up to 40 s for the interpreter and uvicorn to start on a busy machine
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None
            time.sleep(0.2)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert '"GET /healthz HTTP/1.1" 200' in err, err
    assert "GET /healthz" not in out, out


def test_a_cut_evidence_line_ends_at_a_word_with_an_ellipsis() -> None:
    """The Flight Recorder example's evidence ended mid-word ("flight_recorder/mak") with nothing to say so."""
    from fleetdx.orchestrator.cli.postmortem_cmd import EVIDENCE_CHARS, clip

    line = "rank 3: entry 4 " + "word " * 100
    cut = clip(line, EVIDENCE_CHARS)
    assert len(cut) <= EVIDENCE_CHARS and cut.endswith("word…") and line.startswith(cut[:-1])
    assert clip("short line", EVIDENCE_CHARS) == "short line"
    assert clip("x" * 500, EVIDENCE_CHARS) == "x" * (EVIDENCE_CHARS - 1) + "…"  # no space to cut at: cut anyway
