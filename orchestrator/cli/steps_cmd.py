"""``fleetdx steps PATH... [--baseline DIR] [--json] [--job ID] [--history]``: why is my job slow?

Decomposes each rank's steps (PyTorch profiler traces ``*.json[.gz]``, one per rank, or StepTimer logs
``*.jsonl``) into stages, and names the stalling stage, rank-local (a straggler rank) or global.

Exit codes (Nagios, as every fleetdx verdict command, combined by ``Verdict.worst``): 0 no warning, 1 a
WARNING finding (a straggler, a data-, communication-, launch- or H2D-bound job, bursty steps), 3 UNKNOWN: no
input could be decomposed (no ``ProfilerStep#N`` span, no rank, not a trace: one line on stderr, no report),
or an input among others could not be and nothing worse was found (the report of the rest is printed, each
unusable input named on stderr), or a usage error. Never 2: step times alone never condemn a node.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, err_console, fits, handle_errors, print_json, request_of
from fleetdx.orchestrator.cli.conventions import computed_default

_DB_DEFAULT = computed_default("$FLEETDX_DB_URL, else SQLite")


_DTYPE_HELP = "The data type of the GPU's peak." + computed_default("the GEMM kernels' names' type, else bf16")
_FLOPS_HELP = (
    "The job's model FLOPs per training step, all ranks together (a dense transformer: about 6 x parameters x "
    "tokens per step)." + computed_default("the FLOPs the traces count")
)


class PeakDtype(str, Enum):
    """``--dtype``: the data types of the peak table (:data:`fleetdx.orchestrator.steps.peaks.DTYPES`)."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


#: stage headers of the narrow layout (:func:`_rank_tables`), said in its caption
SHORT_STAGE = {"forward": "fwd", "backward": "bwd", "grad_sync": "sync", "optimizer": "opt", "checkpoint": "ckpt"}
_CAPTION = (
    "GPU i/c/nc: idle / compute / non-compute share of GPU time (as HTA); exposed: share of the communication "
    "time not overlapped"
)


def _rank_table(rep: Any, title: str, columns: list[str], caption: str | None, short: bool = False) -> Table:
    """One row per rank with ``columns``: rank, host, steps, step, p95, stage names, GPU i/c/nc %, exposed %."""
    t = Table(title=title, caption=caption, header_style="bold")
    for col in columns:
        header = SHORT_STAGE.get(col, col) if short else col
        t.add_column(header, justify="right" if col != "host" else "left", min_width=min(len(header), 12))
    for r in rep.ranks:
        tb = r.temporal_breakdown_pct
        cells = {
            "rank": str(r.rank),
            "host": escape(r.host or "-"),
            "steps": str(r.steps),
            "step": _fmt(r.step_time_ms.median),
            "p95": _fmt(r.step_time_ms.p95),
            "GPU i/c/nc %": f"{tb.idle:.0f}/{tb.compute:.0f}/{tb.non_compute:.0f}"
            if tb is not None
            else ("not in logs" if set(r.stages_ms) == {"unknown"} else "no GPU"),
            "exposed %": _fmt(r.comm_exposed_pct),
        }
        t.add_row(*(cells[c] if c in cells else _fmt(r.stages_ms.get(c, 0.0)) for c in columns))
    return t


def _rank_tables(rep: Any) -> list[Table]:
    """The per-rank table: one table when it fits the terminal; else (an 80-column terminal cut the step and
    p95 figures to ``105…``) the step figures and the stages as two tables, the stages under short headers."""
    from fleetdx.orchestrator.steps.contracts import STAGE_ORDER

    shown = [s for s in STAGE_ORDER if any(r.stages_ms.get(s, 0) > 0 for r in rep.ranks)]
    extra = sorted({k for r in rep.ranks for k in r.stages_ms} - set(STAGE_ORDER))
    head, tail = ["rank", "host", "steps", "step", "p95"], ["GPU i/c/nc %", "exposed %"]
    title = f"steps: {len(rep.ranks)} ranks (medians per step, ms)"
    full = _rank_table(rep, title, [*head, *shown, *extra, *tail], _CAPTION)
    if fits(full):
        return [full]
    legend = ", ".join(f"{SHORT_STAGE[s]}: {s}" for s in shown if s in SHORT_STAGE)
    return [
        _rank_table(rep, title, [*head, *tail], _CAPTION),
        _rank_table(rep, "stages (medians per step, ms)", ["rank", *shown, *extra], legend or None, short=True),
    ]


def _tflops(v: float | None) -> str:
    """TFLOP/s to 3 significant figures (a CPU does 0.00475)."""
    return "-" if v is None else f"{v:.3g}"


def _render_mfu(rep: Any) -> None:
    """Achieved TFLOP/s and MFU per rank and for the job, and the GPU time by kernel class."""
    from fleetdx.orchestrator.steps.mfu import summary_lines

    job = rep.mfu
    if job is None or not summary_lines(rep):
        return  # no FLOPs and no GPU: nothing to say here (--json keeps the note)
    if any(r.mfu is not None and r.mfu.achieved_tflops is not None for r in rep.ranks):
        t = Table(title="throughput (median step)", header_style="bold")
        for col in ("rank", "GPU", "dtype", "GFLOP/step", "TFLOP/s", "peak", "MFU %"):
            t.add_column(col, justify="left" if col in ("GPU", "dtype") else "right")
        for r in rep.ranks:
            m = r.mfu
            if m is None:
                continue
            mfu = "-" if m.mfu_pct is None else f"{'>=' if m.lower_bound else ''}{m.mfu_pct:.3g}"
            t.add_row(
                str(r.rank),
                escape(m.gpu_model or m.device or "?"),
                m.dtype or "-",
                "-" if m.flops_per_step is None else f"{m.flops_per_step / 1e9:,.1f}",
                _tflops(m.achieved_tflops),
                _tflops(m.peak_tflops),
                mfu,
            )
        console.print(t)
    for line in summary_lines(rep):
        console.print(escape(line), highlight=False)


def _render(rep: Any) -> None:
    for table in _rank_tables(rep):
        console.print(table)
    _render_mfu(rep)
    if rep.findings:
        ft = Table(title="findings", header_style="bold")
        for col in ("severity", "code", "subject", "message"):
            ft.add_column(col)
        for f in rep.findings:
            ft.add_row(f.severity.value, f.code.value, escape(f.subject), escape(f.message))
        console.print(ft)
    else:
        console.print("no finding: no stage stands out and no rank is slower than its peers")
    if rep.baseline is not None:
        b = rep.baseline
        bt = Table(title=f"against the baseline {escape(b.baseline)} (job medians, ms)", header_style="bold")
        for col in ("stage", "baseline", "now", "change", "noise (95%)", ""):
            bt.add_column(col, justify="right" if col != "stage" else "left")
        for c in [b.step, *b.stages]:
            if c.baseline_ms == 0 and c.current_ms == 0:
                continue
            pct = f" ({c.change_pct:+.1f}%)" if c.change_pct is not None else ""
            bt.add_row(
                c.stage,
                _fmt(c.baseline_ms, 2),
                _fmt(c.current_ms, 2),
                f"{c.change_ms:+.2f}{pct}",
                f"±{c.noise_ms:.2f}" if c.noise_ms is not None else "-",
                "changed" if c.significant else "within noise",
            )
        console.print(bt)
        if b.goodput_change_pct is not None:
            console.print(
                f"goodput (steps per second, from the job's median step): {b.goodput_change_pct:+.1f}% against "
                "the baseline"
            )
        _render_rank_changes(b)


#: rank changes printed (the largest; --json has them all)
RANK_CHANGES_SHOWN = 10


def _pct(change_pct: float | None, before: float, now: float) -> str:
    """`` (+72%)``, or `` (x3350)`` past a tenfold change, where a percentage stops reading as one."""
    if change_pct is None:
        return ""
    return f" ({change_pct:+.0f}%)" if abs(change_pct) < 900 else f" (x{now / before:,.0f})"


def _render_rank_changes(b: Any) -> None:
    """The ranks whose own stage changed: a one-rank straggler that the job medians above hide."""
    if not b.rank_changes:
        console.print("no rank's own step or stage changed beyond its noise (each rank's medians compared)")
        return
    quiet = {c.stage for c in [b.step, *b.stages] if not c.significant}
    hidden = sorted({f"rank {c.rank} {escape(c.stage)}" for c in b.rank_changes if c.stage in quiet})
    if hidden:
        console.print(
            f"job medians hide changes on single ranks ({', '.join(hidden[:5])}{', ...' if len(hidden) > 5 else ''}"
            "): a stage within noise for the job changed on those ranks"
        )
    rt = Table(title="changed on single ranks (each rank's own medians, ms)", header_style="bold")
    for col in ("rank", "stage", "baseline", "now", "change", "noise (95%)"):
        rt.add_column(col, justify="left" if col == "stage" else "right")
    for c in b.rank_changes[:RANK_CHANGES_SHOWN]:
        pct = _pct(c.change_pct, c.baseline_ms, c.current_ms)
        rt.add_row(
            str(c.rank),
            escape(c.stage),
            _fmt(c.baseline_ms, 2),
            _fmt(c.current_ms, 2),
            f"{c.change_ms:+.2f}{pct}",
            f"±{c.noise_ms:.2f}" if c.noise_ms is not None else "-",
        )
    console.print(rt)
    if len(b.rank_changes) > RANK_CHANGES_SHOWN:
        console.print(f"{len(b.rank_changes) - RANK_CHANGES_SHOWN} more rank changes in --json")


def _save(rep: Any, db: str | None) -> None:
    """Keep the analysis in the store and say where on stderr; a store that cannot be reached costs the keeping
    (said), never the analysis."""
    from fleetdx.orchestrator.steps.run import save
    from fleetdx.orchestrator.store import Store, StoreError

    try:
        with Store.open(db) as store:
            record = save(rep, store)
            err_console.print(
                f"step analysis {record.analysis_id} kept in {store.url}", highlight=False, soft_wrap=True
            )
    except StoreError as e:
        err_console.print(
            f"[bold yellow]not kept:[/] the store could not be written ({escape(str(e))})", soft_wrap=True
        )


def register(app: typer.Typer) -> None:
    @app.command("steps")
    @handle_errors
    def steps(
        paths: list[Path] = typer.Argument(  # noqa: B008 (typer's declaration style)
            ...,
            help="Profiler traces (rank-N.json[.gz], one per rank: torch.profiler with a schedule and prof.step()), "
            "StepTimer logs (steps-rank-N.jsonl, from fleetdx.steps.StepTimer), training logs that print step "
            "times (Megatron-LM, torchtitan, NeMo, TF-Slim: step times only, stages unknown), or folders of them.",
        ),
        baseline: Path = typer.Option(  # noqa: B008 (typer's declaration style)
            None, "--baseline", help="A folder (or file) of the same inputs from a good run: stage-by-stage change."
        ),
        as_json: bool = typer.Option(False, "--json", help='Print {"ranks", "findings", "job"} as JSON.'),
        job: str = typer.Option(None, "--job", help="The scheduler job id, recorded in the report's job."),
        history: bool = typer.Option(
            False,
            "--history",
            help="Add each straggler host's recent findings from the store (--db / FLEETDX_DB_URL) as evidence.",
        ),
        db: str = typer.Option(None, "--db", help="Database URL for --history and --save." + _DB_DEFAULT),
        save: bool = typer.Option(
            False,
            "--save/--no-save",
            help="Keep the analysis in the store: fleetdx report --job ID and the service's job page show it.",
        ),
        max_events: int = typer.Option(
            50_000_000, "--max-events", min=1, help="Most events kept per trace (memory bound, about 50 B each)."
        ),
        jobs: int = typer.Option(
            min(4, os.cpu_count() or 1), "--jobs", "-j", min=1, help="Processes decomposing ranks in parallel."
        ),
        gpu: str = typer.Option(
            None,
            "--gpu",
            metavar="NAME",
            help="The GPU model for MFU when the traces do not name it (deviceProperties) or a StepTimer log is "
            "read: A100, H100-SXM, H100-PCIe, H100-NVL, H200-SXM, H200-NVL, B200, L40S, L4, A10, A30, V100-SXM2, "
            "V100-PCIe, T4, or a CUDA device name.",
        ),
        dtype: PeakDtype = typer.Option(  # noqa: B008 (typer's declaration style)
            None, "--dtype", help=_DTYPE_HELP
        ),
        flops_per_step: float = typer.Option(
            None,
            "--flops-per-step",
            min=0.0,
            metavar="FLOPS",
            help=_FLOPS_HELP,
        ),
        html_out: Path = typer.Option(  # noqa: B008 (typer's declaration style)
            None,
            "--html",
            help="Also write the analysis to FILE as one self-contained HTML page (opens offline, loads nothing): "
            "the findings with the straggler's evidence, stacked stage bars per rank, the step-time series.",
        ),
    ) -> None:
        """Why is my job slow? Name the stalling stage of the step and any straggler rank, from traces.

        Breaks each rank's steps into data / h2d / forward / backward / grad_sync / optimizer / checkpoint,
        GPU idle / compute / non-compute (as HTA), exposed communication, kernel sizes and step-time
        stability; a straggler rank is named with its host. Achieved TFLOP/s and MFU against the GPU's dense
        peak (FLOPs from traces captured with with_flops=True or record_shapes=True, or --flops-per-step), and
        the GPU time by kernel class (GEMM, elementwise, communication, memcpy, other).

        Examples: fleetdx steps traces/ ; fleetdx steps traces/ --baseline good-run/ --json ;
        fleetdx steps steps-logs/ --gpu H100-SXM --flops-per-step 3.2e15

        Exit: 0 nothing found, 1 a warning finding, 3 an input that cannot be decomposed (or a usage error).
        """
        from fleetdx.orchestrator.steps.run import StepsRequest, run

        request = request_of(
            StepsRequest,
            paths=paths,
            baseline=baseline,
            job_id=job,
            history=history,
            db=db,
            max_events=max_events,
            jobs=jobs,
            mfu={"gpu": gpu, "dtype": dtype.value if dtype else None, "flops_per_step": flops_per_step},
        )
        done = run(request)
        rep, loaded = done.report, done.loaded
        if save:
            _save(rep, db)
        for e in loaded.errors:
            err_console.print(f"[bold yellow]not used:[/] {escape(e)}", highlight=False, soft_wrap=True)
        if html_out is not None:
            from fleetdx.orchestrator.htmlreport import render_steps, write_html

            page = render_steps(rep, ranks=loaded.ranks, errors=loaded.errors, sources=[str(p) for p in paths])
            write_html(html_out, page)
        if as_json:
            print_json(rep.model_dump(mode="json"))
        else:
            said: dict[str, list[int]] = {}
            for r in loaded.ranks:
                for m in r.missing:
                    said.setdefault(m, []).append(r.rank)
            for m, ranks in said.items():
                who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {','.join(map(str, ranks))}"
                console.print(f"{who}: {escape(m)}", highlight=False, soft_wrap=True)
            for m in rep.missing_evidence:
                if m not in loaded.errors:
                    err_console.print(f"[bold yellow]missing:[/] {escape(m)}", highlight=False, soft_wrap=True)
            _render(rep)
            if html_out is not None:
                console.print(f"HTML report: {escape(str(html_out))}", highlight=False)
        raise typer.Exit(rep.exit_code)
