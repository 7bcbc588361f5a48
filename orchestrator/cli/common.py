"""Helpers shared by the CLI commands: consoles, JSON output, error handling.

Exit codes follow the Nagios plugin guidelines (nagios-plugins.org/doc/guidelines.html, "Plugin Return
Codes"): verdict commands (``preflight``, ``analyze``, ``bandwidth``) exit with the verdict (0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN). A usage error (bad option or argument), bad input (a
:class:`fleetdx.probes.errors.FleetdxError`, e.g. a ``ParseError``), an unreachable service or an internal
error exits :data:`EXIT_UNKNOWN` (3) with one line on stderr, never a traceback and never 2: a script that
resubmits a job without the nodes of a CRITICAL verdict must not do so for a typo. Other commands exit 0 on
success. :data:`EXIT_NOT_STORED` (4) is a run judged OK or WARNING whose report could be neither saved nor
spooled (the report is printed so it is not lost).
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, get_args, get_origin

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from fleetdx.probes.errors import ConfigError, FleetdxError

#: width of human output when stdout is not a terminal (sbatch logs, CI) and COLUMNS is unset: rich would
#: otherwise wrap every table at 80 columns
LOG_WIDTH = 140


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else LOG_WIDTH
    return Console(stderr=stderr, width=width)


console = _console()
err_console = _console(stderr=True)

#: usage, input, environment and internal errors: UNKNOWN, as the Nagios plugin guidelines ask
EXIT_UNKNOWN = 3
#: a run judged OK or WARNING whose report was neither saved nor spooled
EXIT_NOT_STORED = 4

F = TypeVar("F", bound=Callable[..., Any])


def fits(table: Any, on: Console | None = None) -> bool:
    """Whether ``table`` fits the console (``console`` by default) at its natural width: a human table that
    does not fit is laid out another way (short headers, fewer columns) rather than cut with an ellipsis."""
    target = on or console
    unbounded = target.options.update_width(1 << 16)  # rich clamps a measurement to the width it is given
    return bool(target.measure(table, options=unbounded).maximum <= target.width)


def finite_positive(value: float | None) -> float | None:
    """Option callback for every float option of the CLI (durations in s, bandwidths in GB/s): a finite
    number above 0, or absent. ``nan`` and ``inf`` pass typer's own range checks (every comparison with nan is
    false), so they are refused here, as a usage error (exit 3)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value!r}: must be a finite number > 0")
    return value


def exit_code_after_save(verdict_code: int, stored: bool) -> int:
    """The exit code of a verdict command once its report was stored, or not: a run judged OK (0) or WARNING
    (1) whose report could be neither saved nor spooled exits :data:`EXIT_NOT_STORED`, so no script mistakes
    a lost report for success; CRITICAL and UNKNOWN keep their code (the script must act on those)."""
    return EXIT_NOT_STORED if not stored and verdict_code in (0, 1) else verdict_code


def print_json(model: BaseModel | dict[str, Any] | list[Any], stream: Sequence[str] = ()) -> None:
    """Print a contract (or plain JSON data) to stdout as JSON, nothing else on stdout.

    ``stream`` names top-level list fields of ``model`` written one element at a time (:func:`model_json`),
    so that the JSON of a report of thousands of nodes is never held whole; the bytes are the same.
    """
    if not isinstance(model, BaseModel):
        sys.stdout.write(json.dumps(model, indent=2, default=str) + "\n")
        sys.stdout.flush()
        return
    sys.stdout.flush()
    pieces = model_json(model, stream)
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a text-only stream (a test's StringIO)
        sys.stdout.write("".join(p.decode() for p in pieces) + "\n")
    else:
        for piece in pieces:
            out.write(piece)
        out.write(b"\n")
    sys.stdout.flush()


def model_json(model: BaseModel, stream: Sequence[str] = ()) -> Iterator[bytes]:
    """``model.model_dump_json(indent=2)``'s bytes, in pieces: each top-level field of ``stream`` that is a
    list of two or more models of its declared element type is written element by element (each element's
    own JSON, indented into place); any other shape is written whole. Nothing but a few elements' JSON is
    held at once: a report of 4,096 nodes is some 16 MB of JSON, and each whole copy of it added that much
    to a command's peak memory."""
    names = [n for n in stream if _streams(model, n)]
    if not names:
        yield model.__pydantic_serializer__.to_json(model, indent=2)
        return
    head = model.__pydantic_serializer__.to_json(model.model_copy(update=dict.fromkeys(names, [])), indent=2)
    marks = sorted((head.find(b'\n  "%s": []' % n.encode()), n) for n in names)
    if any(head.count(b'\n  "%s": []' % n.encode()) != 1 for n in names):  # not where expected: whole
        yield model.__pydantic_serializer__.to_json(model, indent=2)
        return
    at = 0
    for pos, name in marks:
        key = b'\n  "%s": [' % name.encode()
        yield head[at:pos] + key
        for i, item in enumerate(getattr(model, name)):
            text = item.__pydantic_serializer__.to_json(item, indent=2)
            yield (b",\n    " if i else b"\n    ") + text.replace(b"\n", b"\n    ")
        yield b"\n  ]"
        at = pos + len(key) + 1  # past the "]" of the emptied list
    yield head[at:]


def _streams(model: BaseModel, name: str) -> bool:
    """Whether field ``name`` of ``model`` can be written element by element with the same bytes: a plain
    ``list[M]`` field (no alias, not excluded, no serializer on the model) of 2+ instances of exactly ``M``."""
    cls = type(model)
    field = cls.model_fields.get(name)
    decorators = cls.__pydantic_decorators__
    if field is None or field.exclude or field.alias or field.serialization_alias:
        return False
    if decorators.field_serializers or decorators.model_serializers:
        return False
    args = get_args(field.annotation)
    if get_origin(field.annotation) is not list or len(args) != 1 or not isinstance(args[0], type):
        return False
    value = getattr(model, name)
    return issubclass(args[0], BaseModel) and len(value) > 1 and all(type(v) is args[0] for v in value)


def fail(message: str, code: int = EXIT_UNKNOWN) -> typer.Exit:
    """Print ``message`` on stderr and return a ``typer.Exit`` to raise."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


#: top-level module -> the extra that installs it (pyproject.toml's [project.optional-dependencies])
EXTRAS = {
    "ray": "ray",
    "fastapi": "server",
    "starlette": "server",
    "uvicorn": "server",
    "prometheus_client": "server",
    "kubernetes": "k8s",
    "plotly": "html",
    "jinja2": "html",
    "torch": "collective",
}


def missing_extra(e: ModuleNotFoundError) -> str | None:
    """The one line for a command that needs an extra this install lacks, or None when the missing module is
    none of the extras' (then it is a bug)."""
    top = (e.name or "").split(".", 1)[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this command needs fleetdx's {extra} extra ({top} is not installed): pip install 'fleetdx[{extra}]'"


def handle_errors(func: F) -> F:
    """Turn a :class:`FleetdxError` or a missing file into one stderr line and exit code 3 (UNKNOWN)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FleetdxError as e:
            raise fail(str(e)) from None
        except FileNotFoundError as e:
            raise fail(f"{e.filename}: no such file or directory") from None
        except IsADirectoryError as e:
            raise fail(f"{e.filename}: is a directory") from None

    return wrapper  # type: ignore[return-value]


M = TypeVar("M", bound=BaseModel)


def request_of(model: type[M], **options: Any) -> M:
    """A job's request from a command's options; a value the request refuses is a usage error (ConfigError:
    one line on stderr, exit 3), never a traceback."""
    from pydantic import ValidationError

    try:
        return model(**options)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise ConfigError(f"{where}: {msg}" if where else msg) from None
