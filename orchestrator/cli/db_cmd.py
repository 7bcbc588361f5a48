"""``fleetdx db upgrade|current|import|prune`` and ``fleetdx history HOST``: the store from the command line.

Every command takes ``--db URL`` (default: ``$FLEETDX_DB_URL``, else an SQLite file in the user's data
directory). An unreachable database or an old schema prints one line naming the database and the reason,
and exits 2.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import TypeAdapter
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, fail, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import DB_HELP, computed_default

if TYPE_CHECKING:
    from fleetdx.orchestrator.store import PostmortemRecord, RunSummary
    from fleetdx.orchestrator.store.retention import PruneResult

DbOption = Annotated[str | None, typer.Option("--db", help=DB_HELP)]

db_app = typer.Typer(help="Manage the run database: migrate it, show its schema, import spool files.")


def register(app: typer.Typer) -> None:
    """Add the ``db`` group and the ``history`` command to ``app``."""
    app.add_typer(db_app, name="db")
    app.command("history")(history)


@db_app.command("upgrade")
@handle_errors
def upgrade(db: DbOption = None) -> None:
    """Migrate the database to the newest schema (creates the tables on an empty database)."""
    from fleetdx.orchestrator.store import Store

    with Store.open(db, check_schema=False) as store:
        before, after = store.upgrade()
        if before == after:
            typer.echo(f"{store.url}: already at schema revision {after}")
        else:
            typer.echo(f"{store.url}: schema {before or 'empty'} -> {after}")


@db_app.command("current")
@handle_errors
def current(db: DbOption = None) -> None:
    """Print the database's schema revision and the newest one this fleetdx knows.

    Only reads: an SQLite file that does not exist is an error (exit 3), not created (`fleetdx db upgrade`
    creates a database).
    """
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store.migrate import head_revision

    _require_existing_sqlite(db)
    with Store.open(db, check_schema=False) as store:
        rev = store.revision()
        head = head_revision()
        state = "up to date" if rev == head else "run `fleetdx db upgrade`"
        typer.echo(f"{store.url}: revision {rev or 'none'} (head {head}; {state})")


def _require_existing_sqlite(db: str | None) -> None:
    """Exit 3 with one line when ``db`` (or the default) is an SQLite file that does not exist."""
    from sqlalchemy.exc import SQLAlchemyError

    from fleetdx.orchestrator.store.engine import display_url, is_sqlite, parse_url, sqlite_path
    from fleetdx.orchestrator.store.settings import resolve_db_url

    try:
        url = parse_url(resolve_db_url(db))
    except (SQLAlchemyError, ValueError):
        return  # Store.open names the bad URL
    path = sqlite_path(url) if is_sqlite(url) else None
    if path is not None and not path.is_file():
        what = "no such file" if not path.exists() else "not a regular file"
        raise fail(f"{display_url(url)}: {what} {path} (`fleetdx db upgrade` creates a database)")


@db_app.command("import")
@handle_errors
def import_(
    files: Annotated[list[Path], typer.Argument(help="Spool files, or directories of spool files, to load.")],
    db: DbOption = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep each file once its run is stored.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the import results as JSON.")] = False,
    max_bytes: Annotated[
        int,
        typer.Option(
            "--max-bytes",
            min=1,
            help="Largest spool file read, bytes, compressed and once decompressed (64 MiB: the largest report "
            "fleetdx serve takes).",
        ),
    ] = 64 * 1024 * 1024,
) -> None:
    """Load spool files (reports written while the database was unreachable) into the database.

    Importing is idempotent: a run already stored is skipped. Each file is deleted only after its run is
    committed (unless --keep); a bad file is reported and left in place, and the exit code is then 3. Importers
    may run at once: each file is claimed by an atomic rename, and one taken by another importer is not an
    error, nor is a spool directory with nothing left to import (exit 0).
    """
    from fleetdx.orchestrator.store import ImportResult, SpoolError, Store, import_spool_file
    from fleetdx.orchestrator.store.spool import spool_files

    missing = [str(p) for p in files if not p.exists()]
    if missing:
        raise fail(f"no such file or directory: {', '.join(missing)}")
    paths = spool_files(files)
    results: list[ImportResult] = []
    failed = taken = 0
    with Store.open(db) as store:
        for path in paths:
            try:
                result = import_spool_file(store, path, keep=keep, max_bytes=max_bytes)
            except (SpoolError, IsADirectoryError) as e:
                failed += 1
                typer.echo(f"error: {e}", err=True)
                continue
            if result is None:
                taken += 1  # another importer running at the same time took it: it is being stored
            else:
                results.append(result)
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
    else:
        for r in results:
            what = "imported" if r.inserted else "already stored"
            typer.echo(f"{r.path}: run {r.run_id} {what}")
        also = f" ({taken} taken by another importer)" if taken else ""
        typer.echo(f"{len(results)} of {len(paths)} spool files loaded into {store.url}{also}")
    if failed:
        raise fail(f"{failed} spool files could not be imported")


@db_app.command("prune")
@handle_errors
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            envvar="FLEETDX_RETENTION",
            show_envvar=False,
            help="Remove what is older than AGE: a number and a unit s, m, h, d or w (90d)."
            + computed_default("$FLEETDX_RETENTION"),
        ),
    ],
    db: DbOption = None,
    slurm_conf: Annotated[
        Path | None,
        typer.Option(
            "--slurm-conf",
            metavar="FILE",
            help="Prune this node's prolog reports and epilog bundles, in the folders FILE "
            "(fleetdx-slurm.conf) names, instead of the store.",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was removed as JSON (PruneResult).")] = False,
) -> None:
    """Remove runs, postmortems, prolog reports and epilog bundles older than an age.

    The store: runs started before the cutoff, with their nodes, probe results, raw outputs, findings,
    recommendations and curves, and postmortems made before it. A node's newest run is always kept (it is the
    node's current state), as are API tokens. With --slurm-conf: the prolog's prolog-JOBID-HOST.json reports
    and the epilog's JOBID/HOST bundles, each host's newest kept.

    Examples: `fleetdx db prune --older-than 90d --dry-run`;
    `fleetdx db prune --older-than 90d --slurm-conf /etc/slurm/fleetdx/fleetdx-slurm.conf`.
    """
    from fleetdx.orchestrator.store.retention import cutoff_of, parse_age, prune_files, prune_store, slurm_dirs

    try:
        age_s = parse_age(older_than)
    except ValueError as e:
        raise fail(f"--older-than: {e}") from None
    cutoff = cutoff_of(age_s)
    if slurm_conf is not None:
        if not slurm_conf.is_file():
            raise fail(f"{slurm_conf}: no such file")
        result = prune_files(slurm_dirs(slurm_conf), cutoff, dry_run=dry_run, older_than_s=age_s)
    else:
        from fleetdx.orchestrator.store import Store

        _require_existing_sqlite(db)
        with Store.open(db) as store:
            result = prune_store(store, cutoff, dry_run=dry_run, older_than_s=age_s)
    if as_json:
        print_json(result)
        return
    _print_pruned(result, older_than)


def _print_pruned(result: PruneResult, age: str) -> None:
    """What was (or would be) removed, in lines under 80 columns."""
    verb = "would remove" if result.dry_run else "removed"
    when = datetime.fromtimestamp(result.cutoff, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    typer.echo(f"{verb} what is older than {age} (before {when})")
    if result.store is not None:
        typer.echo(f"store {result.store}:")
        for table, n in result.rows.items():
            typer.echo(f"  {table:<20} {n:>10} rows")
        typer.echo(f"  kept {result.kept_newest} older runs: each is a node's newest")
        return
    for kind in ("prolog-report", "epilog-bundle"):
        files = [f for f in result.files if f.kind == kind]
        size = sum(f.bytes for f in files) / 2**20
        typer.echo(f"{kind}s: {len(files)} ({size:.1f} MiB)")
        for f in files:
            typer.echo(f"  {f.path}")
    typer.echo(f"kept {result.kept_newest_files} older reports or bundles: each is a host's newest")


@handle_errors
def history(
    host: Annotated[str | None, typer.Argument(help="Node host name as it appears in reports.")] = None,
    job: Annotated[
        str | None, typer.Option("--job", help="Only the runs of this job (Slurm job id, Kubernetes job or pod).")
    ] = None,
    db: DbOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many of the newest runs to show.")] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the history as JSON (NodeHistory; with only --job, RunSummary list).")
    ] = False,
) -> None:
    """Show a node's verdict and findings over time, newest run first; or, with only --job, a job's runs and
    its stored postmortems (the JSON of --job alone stays the RunSummary list).

    A node's findings include every pair or group finding that names it (a hung pair is in the history of
    both hosts). Examples: `fleetdx history gpu07`, `fleetdx history gpu07 --job 4711`, `fleetdx history --job
    4711 --json`.
    """
    from fleetdx.orchestrator.store import NodeHistory, Store

    if host is None and job is None:
        raise fail("give a HOST, --job ID, or both")
    with Store.open(db) as store:
        if host is None:
            assert job is not None
            runs = store.list_runs(limit=limit, job_id=job)
            _print_job_runs(job, runs, as_json)
            if not as_json:
                _print_job_postmortems(job, store.list_postmortems(limit=limit, job_id=job))
            return
        result = NodeHistory(host=host, entries=store.node_history(host, limit=limit, job_id=job))
    if as_json:
        print_json(result)
        return
    if not result.entries:
        typer.echo(f"no stored runs include {host}")
        return
    table = Table(title=f"{host}: {len(result.entries)} newest runs")
    for col in ("started (UTC)", "run", "kind", "verdict", "findings"):
        table.add_column(col)
    for e in result.entries:
        started = datetime.fromtimestamp(e.started_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        how = "/".join(x.value for x in (e.level, e.schedule) if x is not None)
        lines = []
        for f in e.findings:
            # a pair or group finding names its hosts, unless its subject already is that list
            hosts = f" [{', '.join(f.nodes)}]" if len(f.nodes) > 1 and f.subject != ",".join(f.nodes) else ""
            lines.append(f"{f.severity.value} {f.code.value} {f.subject}{hosts}: {f.message}")
        kind = f"{e.kind.value} ({how})" if how else e.kind.value
        if e.simulated:
            kind += " SIMULATED"
        table.add_row(started, e.run_id, kind, e.verdict.name, escape("\n".join(lines)) or "-")
    console.print(table)


def _print_job_postmortems(job: str, records: list[PostmortemRecord]) -> None:
    """The job's stored postmortems (``fleetdx postmortem --job``), newest first, beside its runs."""
    if not records:
        typer.echo(f"no stored postmortems of job {job}")
        return
    table = Table(title=f"job {job}: {len(records)} newest postmortems")
    for col in ("made (UTC)", "postmortem", "verdict", "first cause", "hosts"):
        table.add_column(col)
    for r in records:
        made = datetime.fromtimestamp(r.created_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        hosts = ", ".join(r.hosts[:6]) + (" ..." if len(r.hosts) > 6 else "")
        table.add_row(made, r.postmortem_id, r.verdict.name, r.first_cause or "-", escape(hosts) or "-")
    console.print(table)


def _print_job_runs(job: str, runs: list[RunSummary], as_json: bool) -> None:
    if as_json:
        from fleetdx.orchestrator.store import RunSummary

        typer.echo(TypeAdapter(list[RunSummary]).dump_json(runs, indent=2).decode())
        return
    if not runs:
        typer.echo(f"no stored runs of job {job}")
        return
    table = Table(title=f"job {job}: {len(runs)} newest runs")
    for col in ("started (UTC)", "run", "kind", "verdict", "nodes", "exclude"):
        table.add_column(col)
    for r in runs:
        started = datetime.fromtimestamp(r.started_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        kind = r.kind.value + (" SIMULATED" if r.simulated else "")
        table.add_row(started, r.run_id, kind, r.verdict.name, str(r.node_count), escape(r.exclude) or "-")
    console.print(table)
