"""Profile analysis on committed CPU traces, advice rules, gates, diff, bad input."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("xprof")

from tfaccel.cli import app
from tfaccel.errors import InputError
from tfaccel.profile.advice import advise, check_gates, diff, parse_gates
from tfaccel.profile.analyze import ProfileReport, analyze

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """Copies: XProf caches converted data next to the trace, the repo stays clean."""
    shutil.copytree(FIXTURES, tmp_path / "fx")
    return tmp_path / "fx"


def test_normal_cpu_run(traces: Path) -> None:
    r = analyze(traces / "cpu_normal")
    assert r.hardware == "CPU_ONLY" and len(r.steps) >= 5
    assert r.step_ms_avg is not None and r.step_ms_avg > 0
    assert r.breakdown_pct["host_compute"] > 80
    assert r.gpu_utilization_pct is None and r.memcpy_pct is None  # no device in the trace
    names = [t.name for t in r.top_ops]
    assert len(names) == len(set(names)) and "IDLE" not in names
    assert r.peak_memory_bytes and r.peak_memory_bytes > 1_000_000
    assert r.memory_at_peak_by_op
    assert {f.id: f.severity for f in advise(r)}["input"] == "ok"


def test_input_bound_run_is_classified_and_advised(traces: Path) -> None:
    r = analyze(traces / "cpu_input")
    assert r.breakdown_pct["input"] > 20
    f = {f.id: f for f in advise(r)}["input"]
    assert f.severity == "fail" and "highly input-bound" in f.text
    assert f.action is not None and "prefetch" in f.action and "AUTOTUNE" in f.action
    assert f.expected is not None and "step time down" in f.expected


def test_diff_and_gates(traces: Path) -> None:
    a, b = analyze(traces / "cpu_normal"), analyze(traces / "cpu_input")
    rows = {row.metric: row for row in diff(a, b)}
    assert rows["input"].better is False and rows["input"].change_pct is not None
    gates = check_gates(b, parse_gates([], ["input=20"]))
    assert [g.passed for g in gates] == [False]
    assert check_gates(a, parse_gates([], ["input=20"]))[0].passed
    with pytest.raises(InputError, match="Cannot read the gate"):
        parse_gates(["happiness=3"], [])


def _synthetic(**kw: object) -> ProfileReport:
    base = ProfileReport(
        logdir="x",
        run="r",
        note=None,
        hardware="GPU",
        steps=(),
        step_ms_avg=100.0,
        step_ms_std=1.0,
        breakdown_pct={"input": 1.0, "kernel_launch": 1.0, "compilation": 0.0},
        gpu_utilization_pct=90.0,
        memcpy_pct=1.0,
        memcpy_us={},
        launch_latency_us_median=5.0,
        launch_latency_us_p90=8.0,
        kernel_launches=500,
        launches_per_step=50,
        pct_16bit=90.0,
        tensor_core_eligible_pct=60.0,
        tensor_core_used_pct=58.0,
        kernel_avg_us=200.0,
        top_kernels=(),
        top_ops=(),
        peak_memory_bytes=None,
        memory_capacity_bytes=None,
        memory_at_peak_by_op=(),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_healthy_gpu_step_has_no_warnings() -> None:
    findings = [f for f in advise(_synthetic()) if f.id != "steps"]  # no steps in this fake
    assert {f.id for f in findings} >= {
        "input",
        "launch",
        "utilization",
        "memcpy",
        "launch_latency",
        "sixteen_bit",
        "tensor_cores",
    }
    assert all(f.severity == "ok" for f in findings), findings


@pytest.mark.parametrize(
    ("changes", "finding", "severity", "action_word"),
    [
        ({"gpu_utilization_pct": 40.0}, "utilization", "fail", "batch"),
        ({"breakdown_pct": {"input": 1.0, "kernel_launch": 20.0}}, "launch", "fail", "xla='jit'"),
        (
            {"breakdown_pct": {"input": 1.0, "kernel_launch": 5.0}},
            "launch",
            "warn",
            "steps_per_execution",
        ),
        ({"memcpy_pct": 12.0}, "memcpy", "warn", "prefetch='device'"),
        ({"launch_latency_us_median": 25.0}, "launch_latency", "warn", "xla='jit'"),
        ({"pct_16bit": 5.0}, "sixteen_bit", "warn", "precision='auto'"),
        ({"tensor_core_used_pct": 10.0}, "tensor_cores", "warn", "multiples of 8"),
        ({"kernel_avg_us": 4.0, "kernel_launches": 50000}, "small_kernels", "warn", "xla='jit'"),
    ],
)
def test_rules_map_to_configure_options(
    changes: dict[str, object], finding: str, severity: str, action_word: str
) -> None:
    found = {f.id: f for f in advise(_synthetic(**changes))}
    assert found[finding].severity == severity
    assert action_word in (found[finding].action or "")


def test_utilization_names_the_input_pipeline_when_it_is_the_cause() -> None:
    f = {
        f.id: f for f in advise(_synthetic(gpu_utilization_pct=40.0, breakdown_pct={"input": 30.0}))
    }["utilization"]
    assert "input pipeline is the first suspect" in f.text


def test_several_runs_newest_first_or_chosen(traces: Path) -> None:
    both = traces / "both"
    for name in ("cpu_normal", "cpu_input"):
        shutil.copytree(traces / name / "plugins", both / "plugins", dirs_exist_ok=True)
    r = analyze(both)
    assert r.note is not None and "analysing the newest" in r.note
    runs = sorted(p.name for p in (both / "plugins/profile").iterdir())
    chosen = analyze(both, run=runs[0])
    assert chosen.run == runs[0]
    with pytest.raises(InputError, match="No run 'nope'"):
        analyze(both, run="nope")


@pytest.mark.parametrize("case", ["missing", "empty_dir", "empty_file", "truncated", "foreign"])
def test_bad_logdirs_name_the_file(traces: Path, tmp_path: Path, case: str) -> None:
    run = tmp_path / case / "plugins/profile/run1"
    src = next((traces / "cpu_normal").rglob("*.xplane.pb"))
    if case != "missing":
        (tmp_path / case).mkdir()
    if case in ("empty_file", "truncated", "foreign"):
        run.mkdir(parents=True)
        f = run / "host.xplane.pb"
        f.write_bytes(
            {
                "empty_file": b"",
                "truncated": src.read_bytes()[:4000],
                "foreign": b"GIF89a not a profile",
            }[case]
        )
    with pytest.raises(InputError) as caught:
        analyze(tmp_path / case)
    msg = caught.value.message
    expected = {
        "missing": "does not exist",
        "empty_dir": "No profile in",
        "empty_file": "is empty",
        "truncated": "could not be read",
        "foreign": "could not be read",
    }[case]
    assert expected in msg
    if case in ("empty_file", "truncated", "foreign"):
        assert "host.xplane.pb" in msg


def test_cli_analyze_json_html_and_gate(traces: Path, tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    ok = runner.invoke(
        app,
        [
            "profile",
            "analyze",
            str(traces / "cpu_normal"),
            "--html",
            str(html),
            "--format",
            "json",
            "--fail-over",
            "input=20",
        ],
    )
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["schema"] == "tfaccel.profile/1" and data["gates"][0]["passed"] is True
    page = html.read_text()
    assert "<img alt='step time breakdown'" in page and "findings" in page
    bad = runner.invoke(
        app, ["profile", "analyze", str(traces / "cpu_input"), "--fail-over", "input=20"]
    )
    assert bad.exit_code == 1 and "gate input <= 20: " in bad.stdout and "FAILED" in bad.stdout
    d = runner.invoke(
        app, ["profile", "diff", str(traces / "cpu_normal"), str(traces / "cpu_input")]
    )
    assert d.exit_code == 0 and "worse" in d.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["profile"], "Nothing to profile"),
        (["profile", "analyze"], "analyze takes one LOGDIR"),
        (["profile", "diff", "a"], "diff takes two LOGDIRs"),
        (["profile", "analyze", "x", "--fail-under", "speed=1"], "Cannot read the gate"),
    ],
)
def test_cli_bad_input(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in result.output


def test_launch_latency_from_trace_correlation_ids() -> None:
    from tfaccel.profile.analyze import _trace_launches

    trace = {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
            {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "/device:GPU:0"}},
            {
                "ph": "X",
                "pid": 1,
                "name": "cudaLaunchKernel",
                "ts": 100.0,
                "dur": 3,
                "args": {"correlation_id": 11},
            },
            {
                "ph": "X",
                "pid": 7,
                "name": "volta_sgemm",
                "ts": 104.0,
                "dur": 50,
                "args": {"correlation_id": 11},
            },
            {
                "ph": "X",
                "pid": 1,
                "name": "cuLaunchKernel",
                "ts": 200.0,
                "dur": 3,
                "args": {"correlation_id": 12},
            },
            {
                "ph": "X",
                "pid": 7,
                "name": "relu",
                "ts": 230.0,
                "dur": 5,
                "args": {"correlation_id": 12},
            },
            {
                "ph": "X",
                "pid": 1,
                "name": "cudaMemcpyAsync",
                "ts": 300.0,
                "dur": 3,
                "args": {"correlation_id": 13},
            },
        ]
    }
    gaps, kernels = _trace_launches(trace)
    assert sorted(gaps) == [4.0, 30.0]  # the memcpy is not a kernel launch
    assert kernels == 2
