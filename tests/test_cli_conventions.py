"""The option conventions of every ``fleetdx`` command (issue 21, item 10; :mod:`fleetdx.orchestrator.cli.
conventions`), walked by click introspection over the whole command tree, so a new command or option that breaks
one fails here: one meaning per option name (``--nodes`` a hostlist, ``--node-count``/``-N`` a count, ``--job`` a
job id), one spelling for saving (``--save/--no-save``), choices listed in ``--help`` and in the error, one
metavar per option name, and defaults shown one way (``[default: X]``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import conventions
from fleetdx.orchestrator.cli.main import _register, app

runner = CliRunner()


def _root() -> Any:
    _register()
    root = typer.main.get_command(app)
    conventions.apply(root)
    return root


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = getattr(command, "commands", None)
    if subs is None:
        yield path, command
        return
    for name, sub in subs.items():
        yield from _commands(sub, (*path, name))


def _options(include_hidden: bool = False) -> list[tuple[str, Any]]:
    return [
        (" ".join(path), p)
        for path, cmd in _commands(_root())
        for p in cmd.params
        if isinstance(p, TyperOption) and (include_hidden or not p.hidden)
    ]


def _invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_nodes_is_always_a_hostlist_and_a_count_is_node_count() -> None:
    seen_count = []
    for where, p in _options():
        if "--nodes" in p.opts:
            assert p.type_descriptor.annotation is str and p.metavar == "HOSTLIST", where
        if "-N" in p.opts:
            assert p.opts == ["--node-count", "-N"], where
        if "--node-count" in p.opts:
            assert p.metavar == "N" and p.type_descriptor.annotation is int, where
            seen_count.append(where)
        if "--job" in p.opts:  # a scheduler job id everywhere; a kind of fleetdx job is --kind
            assert p.metavar == "ID", where
    assert sorted(seen_count) == ["place", "topo cluster"]


def test_place_nodes_with_a_hostlist_is_a_usage_error_naming_the_options() -> None:
    """Before: ``Invalid value for '--nodes' / '-N': Input should be a valid integer``."""
    res = _invoke("place", "--nodes", "gpu[01-04]", "--gpus-per-node", "1", "--no-store", "--hostlist", "a,b")
    assert res.exit_code == 3, res.output
    assert "--node-count" in res.stderr and "--hostlist" in res.stderr and "valid integer" not in res.stderr
    res = _invoke("topo", "cluster", "--topology-conf", "x.conf", "--nodes", "gpu[01-04]")
    assert res.exit_code == 3 and "--node-count" in res.stderr and "--exclude" in res.stderr


def test_place_old_nodes_count_still_works_with_a_deprecation_line() -> None:
    res = _invoke("place", "--nodes", "2", "--gpus-per-node", "1", "--hostlist", "a,b", "--no-store", "--slurm-args")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "--nodes=2 --nodelist=a,b"
    (line,) = [x for x in res.stderr.splitlines() if "deprecated" in x]
    assert "--node-count 2" in line
    res = _invoke("place", "-N", "2", "--gpus-per-node", "1", "--hostlist", "a,b", "--no-store", "--slurm-args")
    assert res.exit_code == 0 and "deprecated" not in res.stderr
    res = _invoke("place", "--gpus-per-node", "1", "--hostlist", "a,b", "--no-store")
    assert res.exit_code == 3 and "--node-count" in res.stderr


def test_saving_is_one_spelling() -> None:
    savers = []
    for where, p in _options(include_hidden=True):
        names = [*p.opts, *p.secondary_opts]
        if any("save" in n for n in names):
            # steps keeps nothing unless asked: it is run again and again while tuning a job, and stays free of
            # the store's import (issue 22); the spelling is the same
            default = where != "steps"
            assert (p.opts, p.secondary_opts, p.default) == (["--save"], ["--no-save"], default), where
            savers.append(where)
    assert sorted(savers) == ["bandwidth", "postmortem", "preflight", "steps"]


def test_every_value_option_shows_one_metavar_per_name() -> None:
    by_name: dict[str, set[str]] = {}
    for where, p in _options():
        if p.is_flag:
            assert p.metavar == "", where
            continue
        name = conventions.option_name(p)
        assert p.metavar, f"{where} {name}: no metavar (add it to conventions.METAVARS)"
        assert re.fullmatch(r"[A-Z][A-Z/]*|<[a-z0-9_]+(\|[a-z0-9_]+)+>", p.metavar), (where, p.metavar)
        by_name.setdefault(name, set()).add(p.metavar)
    assert {n: m for n, m in by_name.items() if len(m) > 1} == {}


def _choice_options() -> list[tuple[str, Any]]:
    return [(w, p) for w, p in _options() if p.type_descriptor.choices is not None]


#: each command line needs what its command requires before the bad value is read
_CHOICE_CASES = {
    ("preflight", "--level"): ["preflight", "--level", "bogus"],
    ("collect", "--level"): ["collect", "--out", "x", "--level", "bogus"],
    ("bandwidth", "--schedule"): ["bandwidth", "--schedule", "fastest"],
    ("bandwidth", "--collective"): ["bandwidth", "--collective", "alltoall"],
    ("bandwidth", "--backend"): ["bandwidth", "--backend", "mpi"],
    ("codes", "--kind"): ["codes", "--kind", "bogus"],
    ("token create", "--scope"): ["token", "create", "n", "--scope", "admin"],
    ("k8s watch", "--level"): ["k8s", "watch", "--level", "bogus"],
    ("nodes check", "--level"): ["nodes", "check", "--level", "bogus"],
    ("steps", "--dtype"): ["steps", "x", "--dtype", "int4"],
}


def test_every_choice_option_is_covered() -> None:
    assert {(w, conventions.option_name(p)) for w, p in _choice_options()} == set(_CHOICE_CASES)


@pytest.mark.parametrize("key", sorted(_CHOICE_CASES))
def test_a_wrong_choice_lists_every_value(key: tuple[str, str]) -> None:
    """Before: ``bandwidth --schedule fastest`` said only that 'fastest' was not a valid schedule."""
    (param,) = [p for w, p in _choice_options() if (w, conventions.option_name(p)) == key]
    res = _invoke(*_CHOICE_CASES[key])
    assert res.exit_code == 3, res.output
    text = " ".join(res.stderr.replace("│", " ").split())
    for value in param.type_descriptor.choices:
        assert f"'{getattr(value, 'value', value)}'" in text, (key, text)


def test_measured_collectives_are_the_probes() -> None:
    from fleetdx.orchestrator.cli.bandwidth_cmd import MeasuredCollective
    from fleetdx.orchestrator.cluster.collective import TORCH_COLLECTIVES

    assert {c.value for c in MeasuredCollective} == {c.value for c in TORCH_COLLECTIVES}


def test_defaults_are_shown_one_way() -> None:
    """A default is ``[default: X]`` at the end of the help: typer's for a static default, computed_default's
    for one found at run time; never "(default 7)", "default: yes unless", "; default FLEETDX_DB_URL"."""
    for where, p in _options():
        text = p.help or ""
        mentions = re.findall(r"(?i)\bdefaults?\b", text)
        if not mentions:
            continue
        assert len(mentions) == 1 and text.endswith("]") and "\\[default: " in text, (where, text)
        static = p.default is not None and not p.is_flag and p.show_default
        assert not static, f"{where} {conventions.option_name(p)}: typer already shows its default"


def test_old_codes_job_still_works() -> None:
    res = _invoke("codes", "--job", "steps", "--json")
    assert res.exit_code == 0 and "STEP_DATA_BOUND" in res.stdout and "deprecated" in res.stderr
