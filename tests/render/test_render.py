"""Rendering of doctor reports in every format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from rich.console import Console

from tfaccel.doctor import Check, DoctorReport, Status
from tfaccel.render import dumps, to_jsonable
from tfaccel.render.doctor import doctor_json, doctor_markdown, doctor_text

REPORT = DoctorReport(
    checks=(
        Check("tf.install", "TensorFlow installation", Status.OK, "tensorflow 2.21.0"),
        Check(
            "lib.cudnn",
            "libcudnn.so.9",
            Status.FAIL,
            "libcudnn.so.9 | not found",
            fix="pip install 'nvidia-cudnn-cu12<10.0,>=9.3.0.75'",
            see="ldconfig -p",
        ),
        Check("env.conda", "conda", Status.SKIP, "not a conda environment"),
    ),
    environment={
        "tfaccel": "0.1.0",
        "python": "3.11",
        "tensorflow": "2.21.0",
        "driver": None,
        "platform": "Linux",
    },
    seconds=1.25,
)


def test_json_round_trip() -> None:
    data = json.loads(doctor_json(REPORT))
    assert data["schema"] == "tfaccel.doctor/1"
    assert data["failed"] is True
    assert [c["status"] for c in data["checks"]] == ["ok", "fail", "skip"]
    assert data["checks"][1]["fix"].startswith("pip install")


def test_markdown_escapes_pipes_and_lists_everything() -> None:
    md = doctor_markdown(REPORT)
    assert "| fail | libcudnn.so.9 | libcudnn.so.9 \\| not found |" in md
    assert "<details><summary>environment</summary>" in md
    assert "tensorflow: 2.21.0" in md


def test_text_shows_fixes_and_hides_skips() -> None:
    console = Console(record=True, width=120)
    doctor_text(REPORT, console)
    out = console.export_text()
    assert "fix: pip install 'nvidia-cudnn-cu12<10.0,>=9.3.0.75'" in out
    assert "not a conda environment" not in out
    assert "1 skipped check(s) hidden" in out
    verbose = Console(record=True, width=120)
    doctor_text(REPORT, verbose, verbose=True)
    assert "not a conda environment" in verbose.export_text()


def test_to_jsonable_handles_the_usual_types() -> None:
    class Color(Enum):
        red = "r"

    @dataclass
    class D:
        p: Path
        c: Color
        t: tuple[int, ...]
        f: float

    assert to_jsonable(D(Path("/x"), Color.red, (1, 2), float("nan"))) == {
        "p": "/x",
        "c": "r",
        "t": [1, 2],
        "f": None,
    }
    assert json.loads(dumps({"a": 1}, schema="s")) == {"schema": "s", "a": 1}


def test_the_live_trial_line_gives_the_tables_noise_figure() -> None:
    """The spread (interquartile range over the median of the timed windows), by the
    name and value the summary table and the JSON give it (once "+-5%" for the
    table's 10 %)."""
    from tfaccel.render.tune import trial_line
    from tfaccel.trial.runner import TrialResult

    r = TrialResult("k", "float32 xla=off batch=32 spe=1", {}, "ok", samples_per_s=744.0,
                    spread=0.10, windows=(700.0, 744.0, 780.0), compile_s=4.4)  # fmt: skip
    line = trial_line("baseline", r).plain
    assert "spread 10%" in line and "\u00b1" not in line


def test_a_resumed_trials_note_is_not_cut_to_the_stage_column() -> None:
    """On a GPU, "dropout (from the journal)" showed as "dropout (from the jo": the
    note now follows the figures, whole, and the line still fits 80 columns."""
    from tfaccel.render.tune import trial_line
    from tfaccel.trial.runner import TrialResult

    r = TrialResult("k", "mixed_bfloat16 xla=jit batch=64 spe=25 dropout=philox16", {}, "ok",
                    samples_per_s=21979.0, spread=0.01, compile_s=53.3)  # fmt: skip
    lines = trial_line("allocator + prefetch (from the journal)", r).plain.splitlines()
    assert lines[0].startswith("allocator + prefetch ")
    assert lines[-1].endswith("compile 53.3 s  (from the journal)")
    assert max(len(x) for x in lines) <= 80


def test_every_knobs_stage_name_is_whole_in_the_live_line() -> None:
    """The stages that try one knob are named after it: "validation_batch_size"
    showed as "validation_batch_siz"."""
    from tfaccel.optimize.settings import KNOBS
    from tfaccel.render.tune import trial_line
    from tfaccel.trial.runner import TrialResult

    r = TrialResult("k", "float32 xla=off batch=64", {}, "ok", samples_per_s=1.0, spread=0.01)
    for knob in KNOBS:
        assert trial_line(knob.name, r).plain.startswith(knob.name + " ")


def test_bench_table_leaves_out_the_columns_no_row_fills() -> None:
    """On a CPU no benchmark has a peak to compare with: "% of peak" was a column of
    n/a that pushed the names onto three lines at 80 columns. Left out there (and the
    notes column where no row has a note); kept where one row fills it."""
    from rich.console import Console

    from tfaccel.bench.results import BenchReport
    from tfaccel.bench.timer import Measurement
    from tfaccel.render.bench import bench_text

    def table(*ms: Measurement) -> str:
        console = Console(record=True, width=80)
        bench_text(BenchReport("micro", {}, ms, 1.0), console)
        return console.export_text()

    cpu = Measurement("matmul float32 1024x1024x1024", "TFLOP/s", (0.17, 0.18, 0.17), warmup_s=0.1)
    text = table(cpu)
    assert "% of peak" not in text and "n/a" not in text and "notes" not in text
    assert "matmul float32 1024x1024x1024" in text  # on one line now
    gpu = Measurement("matmul bf16", "TFLOP/s", (700.0, 710.0, 705.0), peak=989.0)
    assert "% of peak" in table(cpu, gpu) and "71%" in table(cpu, gpu)
