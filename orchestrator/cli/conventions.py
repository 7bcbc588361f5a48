"""The conventions every ``fleetdx`` command's options follow, applied once to the whole command tree by the root
group (:class:`fleetdx.orchestrator.cli.main.NagiosGroup`) and checked by ``tests/test_cli_conventions.py``:

- **One meaning per option name.** ``--nodes`` is always a Slurm hostlist (``gpu[01-04]``); a number of nodes is
  ``--node-count`` / ``-N`` (as ``srun -N``). ``--job`` is always a scheduler job id; a kind of fleetdx job
  (preflight, postmortem, ...) is ``--kind``. The old spellings of ``place --nodes N``, ``topo cluster --nodes
  N`` and ``codes --job KIND`` still work, hidden, with a one-line deprecation note on stderr; a value that is
  not what the old spelling took (``place --nodes 'gpu[01-04]'``) is a usage error that names the option to use.
- **Saving** a report to the store is ``--save/--no-save`` (default: save) on every command that stores one
  (``preflight``, ``postmortem``, ``bandwidth``). ``place --no-store`` is not a saving option: it stops place
  from *reading* node health.
- **Fixed sets of values** are enums (or ``Literal``): ``--help`` shows them as ``<a|b|c>`` and a wrong value is
  a usage error (exit 3) that lists every value.
- **Metavars**: every option that takes a value shows its choices or one upper-case metavar from
  :data:`METAVARS`; an option name has the same metavar in every command.
- **Defaults** show as ``[default: X]`` at the end of the option's help: typer prints static ones; a default
  computed at run time (an environment variable, the host name) is written with :func:`computed_default`, so it
  looks the same.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

#: the metavar of each option that takes a value, by name: the same name shows the same metavar everywhere
METAVARS: dict[str, str] = {
    "--nodes": "HOSTLIST",
    "--slurm-node": "NODE",
    "--reason": "TEXT",
    "--hostlist": "HOSTLIST",
    "--exclude": "HOSTLIST",
    "--node-count": "N",
    "--gpus-per-node": "N",
    "--gpus": "N",
    "--iters": "N",
    "--jobs": "N",
    "--fr-jobs": "N",
    "--top": "N",
    "--limit": "N",
    "--workers": "N",
    "--ib-port": "N",
    "--port": "PORT",
    "--max-events": "N",
    "--max-bytes": "BYTES",
    "--sizes": "SIZES",
    "--timeout": "S",
    "--probe-timeout": "S",
    "--join-timeout": "S",
    "--placement-cache": "S",
    "--interval": "S",
    "--hang-factor": "K",
    "--hang-min-s": "S",
    "--until-idle": "S",
    "--max-s": "S",
    "--dump-wait": "S",
    "--rounds": "N",
    "--max-body-mib": "MIB",
    "--finding-days": "DAYS",
    "--history-days": "DAYS",
    "--reference-gbps": "GB/S",
    "--since": "TIME",
    "--until": "TIME",
    "--db": "URL",
    "--report-to": "URL",
    "--server": "URL",
    "--ray-address": "ADDRESS",
    "--host": "HOST",
    "--partition": "NAME",
    "--gpu-model": "NAME",
    "--job": "ID",
    "--run": "ID",
    "--logs": "PATH",
    "--out": "PATH",
    "--html": "FILE",
    "--exclude-file": "FILE",
    "--token-file": "FILE",
    "--report": "FILE",
    "--scontrol-nodes": "FILE",
    "--sinfo": "FILE",
    "--topology-conf": "FILE",
    "--numactl": "FILE",
    "--kubeconfig": "FILE",
    "--ssl-certfile": "FILE",
    "--ssl-keyfile": "FILE",
    "--bundles": "DIR",
    "--bundle-dir": "DIR",
    "--fr": "DIR",
    "--baseline": "PATH",
    "--nccl-tests-dir": "DIR",
}


def computed_default(text: str) -> str:
    """The help-text tail of a default computed at run time, shown like typer's static ``[default: X]`` (the
    bracket escaped from rich markup)."""
    return f" \\[default: {text}]"


#: the help of every ``--db`` option that reads or writes the run database
DB_HELP = "Database URL." + computed_default("$FLEETDX_DB_URL, else an SQLite file in the user's data directory")


def node_count(count: int | None, old_nodes: str | None, hostlist_hint: str) -> int:
    """The node count of ``place`` / ``topo cluster``: ``--node-count N`` (``-N``), or the old spelling
    ``--nodes N`` with a deprecation note on stderr.

    Raises:
        typer.BadParameter: both spellings, neither, or ``--nodes`` given a hostlist (a usage error, exit 3):
            ``hostlist_hint`` says which option of this command takes hosts.
    """
    import typer

    from fleetdx.orchestrator.cli.common import err_console

    if old_nodes is None:
        if count is None:
            raise typer.BadParameter(
                "how many nodes the job needs: --node-count N (-N for short)", param_hint="--node-count"
            )
        return count
    if count is not None:
        raise typer.BadParameter("give --node-count only (--nodes is a hostlist in fleetdx)", param_hint="--nodes")
    text = old_nodes.strip()
    if not (text.isdigit() and int(text) >= 1):
        raise typer.BadParameter(
            f"{old_nodes!r}: in fleetdx --nodes is a hostlist, and this command takes a node count: --node-count N "
            f"(-N for short); {hostlist_hint}",
            param_hint="--nodes",
        )
    err_console.print(
        f"fleetdx: --nodes {text} is deprecated for a node count: use --node-count {text} (-N {text}); --nodes is "
        "a hostlist in fleetdx",
        style="yellow",
        highlight=False,
        soft_wrap=True,
    )
    return int(text)


def option_name(param: Any) -> str:
    """The long name of an option (``--node-count``), or ``""`` for an argument."""
    longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return longs[0] if longs else ""


def _is_choice(param: Any) -> bool:
    descriptor = getattr(param, "type_descriptor", None)
    return bool(descriptor is not None and descriptor.choices is not None)


def _reflow(text: str) -> str:
    """A command's help with the line breaks of its docstring's paragraphs removed (typer keeps them in rich
    mode, so a 110-column source line broke every line of ``--help`` on an 80-column terminal); list items
    (``- x``) and indented lines keep their own lines."""
    import inspect
    import re

    return re.sub(r"(?<=\S)\n(?=[^\s\-*])", " ", inspect.cleandoc(text))


def _metavar(param: Any) -> str | None:
    """The metavar ``param`` shows under the conventions: its own, ``""`` for a flag (no type column), its
    :data:`METAVARS` entry; ``None`` (typer's display: a choice's values) otherwise."""
    if param.metavar is not None:
        return str(param.metavar)
    if getattr(param, "is_flag", False):
        return ""
    if _is_choice(param) and option_name(param):  # typer writes a repeatable one as <list[a | b]>
        values = [getattr(c, "value", c) for c in param.type_descriptor.choices]
        return "<" + "|".join(str(v) for v in values) + ">"
    if option_name(param):
        return METAVARS.get(option_name(param))
    return None


def _quiet_help_option(command: Any) -> None:
    """``--help`` is made per context, outside ``params``: give it an empty metavar too."""
    make_help_option = command.get_help_option
    if getattr(make_help_option, "_fleetdx", False):
        return

    def help_option(ctx: Any) -> Any:
        option = make_help_option(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    help_option._fleetdx = True  # type: ignore[attr-defined]
    command.get_help_option = help_option


def apply(command: Any) -> None:
    """Apply the conventions to ``command`` and every command under it (idempotent): flags show no type column;
    a value option listed in :data:`METAVARS` shows its metavar; a choice shows its values; help paragraphs
    wrap to the terminal."""
    if getattr(command, "help", None):
        command.help = _reflow(command.help)
    for param in getattr(command, "params", []):
        param.metavar = _metavar(param)
    _quiet_help_option(command)
    _help_table_on_help(command)
    for sub in getattr(command, "commands", {}).values():
        apply(sub)


def _help_table_on_help(command: Any) -> None:
    """Install :class:`HelpTable` when ``command`` formats its help, not before: typer's ``rich_utils`` (rich's
    markdown, syntax and traceback modules) costs about 0.05 s of CPU to import, and a command that runs, a Slurm
    prolog's ``preflight`` above all, never shows help."""
    format_help = command.format_help
    if getattr(format_help, "_fleetdx", False):
        return

    def with_help_table(ctx: Any, formatter: Any) -> Any:
        install_help_table()
        return format_help(ctx, formatter)

    with_help_table._fleetdx = True  # type: ignore[attr-defined]
    command.format_help = with_help_table


#: the widest the option-name column of ``--help`` grows (longer names and choices wrap): the help text beside
#: it keeps at least 80 - 4 - 34 - 4 = 38 columns of an 80-column terminal
NAME_COLUMN_MAX = 34


def _rejoin(cell: Any, old: str, new: str) -> Text:
    """``cell`` (a rich Text, or a string) with ``old`` replaced by ``new``, styles kept."""
    text = cell if isinstance(cell, Text) else Text(str(cell))
    if old not in text.plain:
        return text
    return Text(new).join(text.split(old, allow_blank=True))


def _option_cell(longs: Any, shorts: Any, negative_longs: Any, negative_shorts: Any, types: Any) -> Text:
    """One cell ``--save/--no-save``, ``--node-count, -N N``, ``--level <quick | standard | full>``: the
    names and the metavar of an option, as click's plain help writes them."""
    cell = _rejoin(longs, ",", ", ")
    for sep, part in (("/", negative_longs), (", ", shorts), ("/", negative_shorts)):
        if _rejoin(part, ",", ", ").plain:
            if cell.plain:  # an argument has no long name: its name is the "short" one
                cell.append(sep)
            cell.append_text(_rejoin(part, ",", ", "))
    kind = _rejoin(types, "|", " | ")
    if kind.plain:
        cell.append(" ")
        cell.append_text(kind)
    return cell


class HelpTable(Table):
    """typer's ``--help`` tables, readable at 80 columns. typer lays options out in six columns (long names,
    short names, their negative forms, type, help); rich shrinks the widest column first when a table does not
    fit, so the help text went to one word per line beside mostly empty name columns. Here an option's names
    and metavar are one cell (at most :data:`NAME_COLUMN_MAX` wide, wrapping beyond) and the help text takes
    every column left (``ratio``)."""

    _options_layout: bool | None = None

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        if self._options_layout is None:  # typer adds the option rows to a table without columns or header
            self._options_layout = not self.show_header and not self.columns and len(renderables) in (6, 7)
        if self._options_layout:
            *required, longs, shorts, negative_longs, negative_shorts, types, text = renderables
            renderables = (*required, _option_cell(longs, shorts, negative_longs, negative_shorts, types), text)
        super().add_row(*renderables, **kwargs)
        if self.columns:
            for column in self.columns[:-1]:
                column.no_wrap = not self._options_layout
                column.overflow = "fold"
            if self._options_layout:
                self.columns[-2].max_width = NAME_COLUMN_MAX
            self.columns[-1].ratio = 1


def install_help_table() -> None:
    """Make typer's ``--help`` use :class:`HelpTable` for its option and command panels."""
    from typer import rich_utils

    rich_utils.Table = HelpTable  # type: ignore[attr-defined]
