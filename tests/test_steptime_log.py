"""The training-log step-time parser (probes/parsers/steptime_log.py) on real lines (tests/fixtures/steplogs/,
facts read from the files by eye), on synthesised variants (launcher prefixes, several ranks, colours, a
resumed job: each named so), and fuzzed: any input gives a model or a ParseError, nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers import steptime_log
from fleetdx.probes.parsers.steptime_log import LogFormat, StepTimeLog, parse_steptime_log

FIX = Path(__file__).parent / "fixtures" / "steplogs"


def _read(name: str) -> StepTimeLog:
    return parse_steptime_log((FIX / name).read_text(encoding="utf-8"), source=name)


def _utc(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


# ------------------------------------------------------------------------------------------------ real lines


def test_megatron_lines_without_stamp_are_one_series_of_unknown_rank() -> None:
    (s,) = _read("megatron_epfllm-megatron-llm-11.log").series
    assert s.format is LogFormat.MEGATRON and s.rank is None and s.rank_from is None
    assert [x.step for x in s.steps] == [122, 123, 124, 125]
    assert [x.step_ms for x in s.steps] == [86545.2, 87871.6, 89474.8, 89075.2]
    assert all(x.ts is None for x in s.steps) and "mean per iteration" in s.timing


def test_megatron_stamp_and_throughput_per_gpu() -> None:
    (s,) = _read("megatron-throughput_nvidia-megatron-lm-756.log").series
    assert [(x.step, x.step_ms, x.tflops) for x in s.steps] == [
        (71, 5361.6, 243.6),
        (72, 5470.7, 238.7),
        (73, 5829.9, 224.0),
    ]
    assert s.steps[0].ts == _utc(2024, 4, 6, 3, 2, 12)


def test_megatron_timer_and_setup_lines_are_not_steps() -> None:
    log = _read("megatron-bert-timers_nvidia-nccl-743.log")
    (s,) = log.series
    assert [(x.step, x.step_ms, x.line) for x in s.steps] == [(10, 356.2, 7)]
    assert log.lines_read == 8


def test_torchtitan_step_time_is_the_time_between_step_lines() -> None:
    (s,) = _read("torchtitan-rank0_pytorch-torchtitan-3393.log").series
    assert s.format is LogFormat.TORCHTITAN and s.rank == 0 and s.rank_from == "the line's rank prefix"
    assert [x.step for x in s.steps] == list(range(14, 22))
    assert s.steps[0].step_ms is None  # no line before it: throughput only
    # 16:04:46,338 -> 16:04:47,456 -> 16:04:48,577 -> 16:04:49,702
    assert [round(x.step_ms or 0, 3) for x in s.steps[1:4]] == [1118.0, 1121.0, 1125.0]
    assert [x.tokens_per_s for x in s.steps[:2]] == [7282.0, 7334.0] and s.steps[0].tflops == 0.52
    assert s.steps[0].ts == pytest.approx(_utc(2026, 5, 18, 16, 4, 46) + 0.338)


def test_torchtitan_interval_of_ten_steps_with_gc_and_profiler_lines_between() -> None:
    (s,) = _read("torchtitan-gc-profiler_pytorch-torchtitan-1287.log").series
    assert [x.step for x in s.steps] == [200, 210, 220, 230, 240, 250]
    # 22:30:50,322 -> 22:31:04,970: 14.648 s over 10 steps; 22:31:46,869 -> 22:32:00,846: 13.977 s
    assert s.steps[1].step_ms == pytest.approx(1464.8)
    assert s.steps[5].step_ms == pytest.approx(1397.7)
    assert s.steps[1].tokens_per_s == 5593.0 and s.steps[1].tflops == 323.92


def test_ranks_printing_without_prefix_are_counted_once() -> None:
    (s,) = _read("torchtitan-unprefixed-8ranks_pytorch-torchtitan-2389.log").series
    assert s.rank is None and [x.step for x in s.steps] == [4, 5]
    assert s.repeated == 6  # seven step-4 lines: one kept
    assert s.steps[1].step_ms == pytest.approx(1637.0)  # 19:46:17,508 -> 19:46:19,145


def test_nemo_global_step_and_train_step_timing() -> None:
    (s,) = _read("nemo_nvidia-bionemo-recipes-740.log").series
    assert s.format is LogFormat.NEMO
    assert [x.step for x in s.steps] == [120, 121, 122, 123, 124, 125]
    assert [x.step_ms for x in s.steps] == pytest.approx([31.46, 31.63, 32.15, 31.57, 31.7, 31.47])


def test_tf_slim_lines_printed_twice() -> None:
    (s,) = _read("tfslim-duplicate-handler_tensorflow-models-2980.log").series
    assert s.format is LogFormat.TF_SLIM
    assert [x.step for x in s.steps] == list(range(1, 9)) and s.repeated == 8
    assert s.steps[0].step_ms == pytest.approx(57126.0) and s.steps[4].step_ms == pytest.approx(20205.0)


def test_deepspeed_throughput_lines_are_no_step_lines() -> None:
    with pytest.raises(ParseError, match="step lines of Megatron-LM"):
        _read("deepspeed-throughput-only_deepspeed-1825.log")


# ------------------------------------------------------------------------------------------- synthesised


MEGATRON = (FIX / "megatron_epfllm-megatron-llm-11.log").read_text(encoding="utf-8").splitlines()
TITAN = (FIX / "torchtitan-rank0_pytorch-torchtitan-3393.log").read_text(encoding="utf-8").splitlines()


def test_synthesised_megatron_world_size_dump_names_the_last_rank() -> None:
    # Megatron's argument dump prints "  world_size ...... 8" (arguments.py _print_args); line synthesised
    text = "  world_size ...................................... 8\n" + "\n".join(MEGATRON)
    (s,) = parse_steptime_log(text).series
    assert s.rank == 7 and s.rank_from == "Megatron prints on the last rank (world_size 8)"
    assert parse_steptime_log(text).world_size == 8


@pytest.mark.parametrize(
    ("prefix", "rank", "local_rank", "task"),
    [
        ("[rank5]:", 5, None, None),
        ("[1,5]<stdout>:", 5, None, None),
        ("5: ", None, None, 5),
        ("[default5]:", None, 5, None),
        ("2024-10-18T20:47:35Z [rank5]: ", 5, None, None),
    ],
)
def test_synthesised_launcher_prefixes_give_the_rank(
    prefix: str, rank: int | None, local_rank: int | None, task: int | None
) -> None:
    (s,) = parse_steptime_log("\n".join(prefix + ln for ln in MEGATRON)).series
    assert (s.rank, s.local_rank, s.task) == (rank, local_rank, task)
    assert [x.step_ms for x in s.steps] == [86545.2, 87871.6, 89474.8, 89075.2]


def test_synthesised_interleaved_ranks_are_separate_series() -> None:
    bodies = [ln.removeprefix("[rank0]:") for ln in TITAN]
    lines = [f"[rank{r}]:{b}" for b in bodies for r in (0, 1, 2)]
    log = parse_steptime_log("\n".join(lines))
    assert [s.rank for s in log.series] == [0, 1, 2]
    assert all(len(s.steps) == 8 and s.repeated == 0 for s in log.series)


def test_synthesised_colours_validate_lines_and_a_resumed_job() -> None:
    head = "[titan] 2026-05-18 16:04:46"
    coloured = f"{head},338 - root - INFO - \x1b[31mstep: 14  \x1b[32mloss:  3.24405  \x1b[34mtps: 7,282\x1b[39m"
    validate = f"{head},900 - root - INFO - validate step: 14  loss:  3.1  memory:  9.46GiB(64.99%)  tps: 9,000"
    later = "[titan] 2026-05-18 16:04:47,456 - root - INFO - step: 15  loss:  3.10680  tps: 7,334"
    resumed = "[titan] 2026-05-18 17:00:00,000 - root - INFO - step: 10  loss:  3.5  tps: 7,000"
    (s,) = parse_steptime_log("\n".join([coloured, validate, later, resumed])).series
    assert [x.step for x in s.steps] == [14, 15] and s.repeated == 1
    assert s.steps[1].step_ms == pytest.approx(1118.0)  # the validate line is not a step


def test_synthesised_nemo_progress_bar_redraws() -> None:
    bar = (
        "Epoch 0: : 99%|█████████▉| 99/100 [10:45<00:03, reduced_train_loss=0.0173, global_step=98.00, "
        "consumed_samples=25344.0, train_step_timing in s=3.128]\r"
        "Epoch 0: : 100%|██████████| 100/100 [10:48<00:00, reduced_train_loss=0.0172, global_step=99.00, "
        "consumed_samples=25600.0, train_step_timing in s=3.130]"
    )
    (s,) = parse_steptime_log(bar).series
    assert [(x.step, x.step_ms) for x in s.steps] == [(98, 3128.0), (99, 3130.0)]


def test_streams_an_iterator_and_bounds_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steptime_log, "MAX_STEPS", 3)

    def lines() -> Iterator[str]:
        yield from MEGATRON

    (s,) = parse_steptime_log(lines()).series
    assert len(s.steps) == 3 and s.dropped == 1


def test_binary_and_empty_input_are_parse_errors() -> None:
    with pytest.raises(ParseError, match="NUL"):
        parse_steptime_log(MEGATRON[0] + "\n\x00\x01")
    with pytest.raises(ParseError, match="step lines"):
        parse_steptime_log("")


# ---------------------------------------------------------------------------------------------------- fuzz

TEXTS = [p.read_text(encoding="utf-8") for p in sorted(FIX.glob("*.log"))]
FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
NOISE = st.sampled_from(
    ["\x1b[31m", "[rank3]:", "3: ", "[default1]:", "\r", "|", "step: ", "iteration ", "/", " 1e999", "nan", "\x00"]
)


@FUZZ
@given(st.sampled_from(TEXTS), st.integers(0, 3000), st.integers(0, 3000), st.lists(NOISE, max_size=6))
def test_mutated_logs_parse_or_raise_parse_error(text: str, a: int, b: int, noise: list[str]) -> None:
    lo, hi = sorted((a % (len(text) + 1), b % (len(text) + 1)))
    mutated = text[:lo] + "".join(noise) + text[hi:]
    try:
        log = parse_steptime_log(mutated)
    except ParseError:
        return
    for s in log.series:
        assert all(x.step_ms is None or x.step_ms >= 0 for x in s.steps)
        assert [x.step for x in s.steps] == sorted({x.step for x in s.steps})


@FUZZ
@given(st.text(max_size=400))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    try:
        parse_steptime_log(text)
    except ParseError:
        pass


#: the real logs with step lines and no rank prefix of their own
UNPREFIXED = [t for t in TEXTS if "[rank" not in t and "SamplesPerSec" not in t]


@FUZZ
@given(st.sampled_from(UNPREFIXED), st.integers(0, 4095))
def test_a_rank_prefix_on_every_line_changes_only_the_rank(text: str, rank: int) -> None:
    plain = parse_steptime_log(text)
    prefixed = parse_steptime_log("\n".join(f"[rank{rank}]:{ln}" for ln in text.splitlines()))
    assert [[(x.step, x.step_ms) for x in s.steps] for s in plain.series] == [
        [(x.step, x.step_ms) for x in s.steps] for s in prefixed.series
    ]
    assert {s.rank for s in prefixed.series} == {rank}
