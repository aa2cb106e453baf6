"""Profile analysis on committed CPU traces, advice rules, gates, diff, bad input."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("xprof")

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.errors import InputError
from tfaccel.profile.advice import advise, check_gates, diff, parse_gates
from tfaccel.profile.analyze import analyze
from tfaccel.profile.report import ProfileReport, StepBreakdown

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
    assert "device_arrays=True" in f.action  # the remedy for numpy arrays given to fit
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


def _steps(*ms: float) -> tuple[StepBreakdown, ...]:
    return tuple(StepBreakdown(str(i), t, {}) for i, t in enumerate(ms))


def test_diff_calls_a_change_only_beyond_the_noise() -> None:
    a = _synthetic(steps=_steps(99, 100, 100, 101))  # 100 ms steps, IQR 1 %
    rows = {r.metric: r for r in diff(a, _synthetic(step_ms_avg=98.0, gpu_utilization_pct=92.0))}
    assert rows["step_ms"].better is None and rows["step_ms"].threshold_pct == 3.0
    assert rows["utilization"].better is None  # +2.2 %
    rows = {r.metric: r for r in diff(a, _synthetic(step_ms_avg=90.0))}
    assert rows["step_ms"].better is True
    # steps that vary by 10 %: a 10 % faster mean is within the noise (twice 10 %)
    noisy = _steps(80, 85.5, 90, 94.5, 100)  # IQR 10 % of the median
    rows = {r.metric: r for r in diff(a, _synthetic(step_ms_avg=90.0, steps=noisy))}
    assert rows["step_ms"].better is None and rows["step_ms"].threshold_pct == pytest.approx(20)
    rows = {r.metric: r for r in diff(a, _synthetic(step_ms_avg=70.0, steps=noisy))}
    assert rows["step_ms"].better is True  # 30 % less, beyond twice 10 %
    from rich.console import Console

    from tfaccel.render.profile import diff_text

    console = Console(record=True, width=200)
    diff_text(a, a, diff(a, _synthetic(step_ms_avg=98.0)), console)
    assert "within noise (±3%)" in console.export_text()


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
        ({"memcpy_pct": 12.0}, "memcpy", "warn", "on the GPU"),
        (
            {"memcpy_pct": 12.0, "memcpy_us": {"H2D": 9000.0, "D2H": 100.0}},
            "memcpy",
            "warn",
            "input_cast='compute'",
        ),
        ({"launch_latency_us_median": 25.0}, "launch_latency", "warn", "xla='jit'"),
        ({"pct_16bit": 5.0}, "sixteen_bit", "warn", "precision='auto'"),
        ({"tensor_core_used_pct": 10.0}, "tensor_cores", "warn", "multiples of 8"),
        ({"kernel_avg_us": 4.0, "kernel_launches": 50000}, "small_kernels", "warn", "xla='jit'"),
        (  # already XLA's fusions: launch them as CUDA graphs
            {
                "kernel_avg_us": 2.1,
                "kernel_launches": 84783,
                "extra": {"xla_op_categories_pct": {"fusion": 90.0}},
            },
            "small_kernels",
            "warn",
            "xla_options=['command_buffers']",
        ),
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
    if case == "truncated":  # XProf's own complaint, kept from its log
        assert "XProf said: E" in msg


def test_xprofs_log_stays_out_of_the_terminal(
    traces: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import shutil

    shutil.copytree(traces / "cpu_normal", tmp_path / "run")  # no cached op stats yet
    for cached in (tmp_path / "run").rglob("*op_stats*"):
        cached.unlink()
    capfd.readouterr()
    report = analyze(tmp_path / "run")
    assert report.steps
    err = capfd.readouterr().err
    assert "I0000" not in err and "xplane" not in err


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
    assert f"tensorboard --logdir {traces / 'cpu_normal'}" in page  # the same trace, elsewhere
    bad = runner.invoke(
        app, ["profile", "analyze", str(traces / "cpu_input"), "--fail-over", "input=20"]
    )
    assert bad.exit_code == 1 and "gate input <= 20: " in bad.stdout and "FAILED" in bad.stdout
    assert "(Profile tab), or xprof --logdir" in " ".join(bad.stdout.split())
    d = runner.invoke(
        app, ["profile", "diff", str(traces / "cpu_normal"), str(traces / "cpu_input")]
    )
    assert d.exit_code == 0 and "worse" in d.stdout
    chart = tmp_path / "d.html"
    drawn = runner.invoke(
        app,
        [
            "profile",
            "diff",
            str(traces / "cpu_normal"),
            str(traces / "cpu_input"),
            "--html",
            str(chart),
        ],
    )
    assert drawn.exit_code == 0 and "<img alt='B against A'" in chart.read_text()
    gated = runner.invoke(app, ["profile", "diff", "a", "b", "--fail-over", "input=5"])
    assert gated.exit_code == 2 and "No such option: --fail-over" in unboxed(gated.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["profile"], "Nothing to profile"),
        (["profile", "analyze"], "Missing argument 'LOGDIR'"),
        (["profile", "diff", "a"], "Missing argument 'B'"),
        (["profile", "analyze", "a", "b"], "unexpected extra argument"),
        (["profile", "analyze", "x", "--fail-under", "speed=1"], "Cannot read the gate"),
    ],
)
def test_cli_bad_input(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in unboxed(result.output)


def test_profile_verbs_have_their_own_help_and_capture_is_the_default() -> None:
    """analyze and diff are subcommands with help of their own; a command after --
    (or the capture's own options first) is the capture."""
    helped = unboxed(runner.invoke(app, ["profile", "diff", "--help"]).output)
    assert "Every metric of two traces" in helped and "--fail-under" not in helped
    listed = unboxed(runner.invoke(app, ["profile", "--help"]).output)
    assert all(verb in listed for verb in ("capture", "analyze", "diff"))
    for argv in (
        ["profile", "--steps", "0", "--", "python"],
        ["profile", "capture", "--steps", "0"],
    ):
        refused = runner.invoke(app, argv)  # the capture's own range, checked by its parser
        assert refused.exit_code == 2 and "Invalid value for '--steps'" in unboxed(refused.output)


def _x(pid: int, tid: int, name: str, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur, "args": args}


def test_trace_facts_in_the_shape_xprof_writes_for_a_gpu() -> None:
    """As in the H200 traces: host launch events carry the kernel's name, a Steps thread
    marks the steps, copies run on their own stream with their sizes."""
    from tfaccel.profile.trace import trace_facts as _trace_facts

    meta = [
        {"ph": "M", "name": "process_name", "pid": 701, "args": {"name": "/host:CPU"}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "Stream #13"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 8, "args": {"name": "Stream #14"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 99, "args": {"name": "Steps"}},
    ]
    events = [
        _x(1, 99, "train 1", 0.0, 1000.0),  # the step: 0..1000 us
        # A 400 us H2D copy of 4 MB before the kernels: nothing overlaps it.
        _x(701, 5, "MemcpyH2D", 0.0, 5.0, correlation_id=1),
        _x(1, 8, "MemcpyH2D", 10.0, 400.0, correlation_id=1, memcpy_details="size:4000000"),
        # Two kernels, launched by calls of 3 and 5 us, 30 and 70 us before they start.
        _x(701, 5, "sm90_xmma_gemm_bf16bf16", 420.0, 3.0, correlation_id=2),
        _x(1, 1, "sm90_xmma_gemm_bf16bf16", 450.0, 300.0, correlation_id=2),
        _x(701, 5, "loop_fusion", 690.0, 5.0, correlation_id=3),
        _x(1, 1, "loop_fusion", 760.0, 100.0, correlation_id=3),
        # A kernel outside the step window is not counted in the shares.
        _x(701, 5, "late", 1990.0, 5.0, correlation_id=4),
        _x(1, 1, "late", 2000.0, 100.0, correlation_id=4),
    ]
    f = _trace_facts({"traceEvents": meta + events})
    assert sorted(f.launch_call_us) == [3.0, 5.0, 5.0]  # memcpy calls are not launches
    assert sorted(f.queue_delay_us) == [10.0, 30.0, 70.0]
    assert f.kernel_gaps_us == [10.0, 1140.0]  # idle between kernels on one stream
    assert f.memcpy_us == {"H2D": 400.0} and f.memcpy_bytes == {"H2D": 4000000}
    assert f.window_us == 1000.0
    assert f.memcpy_exposed_us == 400.0  # no kernel beside the copy
    assert f.kernel_busy_us == 400.0  # 300 + 100 inside the step


def test_tensor_core_kernels_by_name() -> None:
    from tfaccel.profile.hlo import uses_tensor_cores

    assert uses_tensor_cores("sm80_xmma_fprop_implicit_gemm_indexed_bf16bf16_bf16f32_f32")
    assert uses_tensor_cores("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32")
    assert uses_tensor_cores("cutlass_tensorop_s1688gemm_64x64_32x6_nn_align4")
    assert uses_tensor_cores("volta_h884gemm_64x64_ldg8_nn")
    assert not uses_tensor_cores("sm80_xmma_fprop_implicit_gemm_indexed_f32f32_f32f32_f32")
    assert not uses_tensor_cores("input_reduce_fusion_220")
    assert not uses_tensor_cores("void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3>")


def _gpu_fixture(tmp_path: Path, name: str) -> Path:
    """A trimmed trace of ResNet-50 training on an H200 (tools/trim_trace.py)."""
    import gzip

    run = tmp_path / name / "plugins" / "profile" / "2026_11_30_21_40_54"
    run.mkdir(parents=True)
    packed = FIXTURES / f"h200_resnet50_{name}.xplane.pb.gz"
    (run / "vm.xplane.pb").write_bytes(gzip.decompress(packed.read_bytes()))
    return tmp_path / name


def test_h200_input_bound_run(tmp_path: Path) -> None:
    """One thread decoding JPEGs, no prefetch: XProf books the wait as 'All others';
    the host's tf.data time says it was input."""
    r = analyze(_gpu_fixture(tmp_path, "slow_input"))
    assert r.hardware == "GPU"
    assert r.breakdown_pct["input"] > 50
    assert r.gpu_utilization_pct is not None and r.gpu_utilization_pct < 50
    assert r.extra["host_input_ms_per_step"] > 400
    found = {f.id: f for f in advise(r)}
    assert found["input"].severity == "fail" and "num_parallel_calls" in (
        found["input"].action or ""
    )


def test_h200_keras_defaults_run(tmp_path: Path) -> None:
    """float32 images copied host-to-device each step, with no kernel beside the copy."""
    r = analyze(_gpu_fixture(tmp_path, "defaults"))
    assert r.breakdown_pct["input"] < 5
    assert r.memcpy_pct is not None and r.memcpy_pct > 15
    assert r.memcpy_us["H2D"] > 0 and r.extra["memcpy_bytes"]["H2D"] > 10**8
    assert r.extra["memcpy_overlapped_pct"] < 10
    # One CUDA launch call costs the host a few microseconds.
    assert r.launch_latency_us_median is not None and 1 < r.launch_latency_us_median < 10
    assert r.tensor_core_used_pct is not None and r.tensor_core_used_pct > 30  # TF32 xmma
    assert r.peak_memory_bytes is not None and r.peak_memory_bytes > 10 * 2**30  # GPU_0_bfc
    memcpy = next(f for f in advise(r) if f.id == "memcpy")
    assert memcpy.severity == "fail" and "uint8" in (memcpy.action or "")
    assert "input_cast='compute'" in (memcpy.action or "")


def test_h200_bf16_xla_run_counts_16_bit_kernels(tmp_path: Path) -> None:
    """Under XLA XProf's op-based 16-bit share is 0 %; the kernels name bf16."""
    r = analyze(_gpu_fixture(tmp_path, "tuned"))
    assert r.pct_16bit is not None and r.pct_16bit > 20
    assert r.extra["kernel_16bit_pct"] == r.pct_16bit
    sixteen = next(f for f in advise(r) if f.id == "sixteen_bit")
    assert sixteen.severity == "ok" and "at least" in sixteen.text  # a lower bound


def test_h200_timeline_shows_the_copy_before_the_kernels(tmp_path: Path) -> None:
    """The tuned run's step: the input's copy first, then the kernels (the HTML draws it)."""
    from tfaccel.render.profile import profile_html

    r = analyze(_gpu_fixture(tmp_path, "tuned"))
    tl = r.extra["timeline"]
    rows = {row["kind"]: row["spans"] for row in tl["rows"]}
    first_copy, first_kernel = rows["copies"][0], rows["kernels"][0]
    assert first_copy[0] < first_kernel[0]
    assert first_copy[1] - first_copy[0] > 0.2 * tl["step_ms"]  # a long copy, alone
    page = profile_html(r, advise(r), tmp_path / "p.html").read_text()
    assert "timeline of one step" in page


# Rows as XProf's hlo_stats gives them for KerasHub BERT in bf16 under XLA (H200).
HLO_ROWS = [
    {
        "category": "custom-call",
        "hlo_op_expression": "%custom-call.69 = (bf16[32768,3072]{1,0}, s8[33554432]{0}) "
        "custom-call(bf16[32768,768]{1,0} %bitcast.3343.0, bf16[768,3072]{1,0} "
        '%wrapped_convert.68), custom_call_target="__cublas$gemm"',
        "total_self_time": 600.0,
    },
    {
        "category": "input fusion",
        "hlo_op_expression": "%input_scatter_fusion.1 = f32[2,768]{1,0} fusion(f32[2,768]{1,0} "
        "%gte.2197, f32[256,128,768]{2,1,0} %fusion.3574, s32[256,128]{1,0} %arg1.1), "
        "kind=kInput, calls=%fused_scatter.1",
        "total_self_time": 100.0,
    },
    {
        "category": "input fusion",
        "hlo_op_expression": "%input_add_reduce_fusion.7 = (f32[128,3072]{1,0}, "
        "bf16[256,128,3072]{2,1,0}) fusion(bf16[256,128,3072]{2,1,0} %gte.1161, "
        "bf16[3072]{0} %wrapped_convert.34), kind=kInput, calls=%fused_add_reduce.7",
        "total_self_time": 300.0,
    },
]


def test_xla_16_bit_share_comes_from_the_operand_types() -> None:
    """Under XLA, XProf's 16-bit figure is 0 % (it counts TensorFlow ops) and cuBLAS's
    Hopper GEMMs (nvjet_*) name no type: the HLO ops' operands say what ran in bf16."""
    from tfaccel.profile.hlo import hlo_operand_types, uses_tensor_cores, xla_op_facts

    assert hlo_operand_types(HLO_ROWS[0]["hlo_op_expression"]) == ["bf16", "bf16"]
    # The tuple result's f32 is not an operand; the scatter's operands are f32 only.
    assert hlo_operand_types(HLO_ROWS[1]["hlo_op_expression"]) == ["f32", "f32"]
    assert hlo_operand_types(HLO_ROWS[2]["hlo_op_expression"]) == ["bf16", "bf16"]
    assert hlo_operand_types("%p = f32[] parameter(0)") == []
    facts = xla_op_facts(HLO_ROWS)
    assert facts["xla_16bit_pct"] == pytest.approx(90.0)
    assert facts["xla_op_categories_pct"] == {
        "custom-call": pytest.approx(60.0),
        "input fusion": pytest.approx(40.0),
    }
    assert xla_op_facts([]) == {}
    # The input's copy (_Recv) is not compute: it does not dilute the share.
    recv = {"category": "_Recv", "hlo_op_expression": "", "total_self_time": 1000.0}
    assert xla_op_facts([*HLO_ROWS, recv])["xla_16bit_pct"] == pytest.approx(90.0)
    assert uses_tensor_cores("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT")
    assert not uses_tensor_cores("input_scatter_fusion_1")


def test_time_by_op_type_sums_the_per_layer_ops() -> None:
    from tfaccel.profile.hlo import op_types

    rows = [
        {"type": "MatMul", "total_self_time": 30.0, "occurrences": 10},
        {"type": "Sum", "total_self_time": 15.0, "occurrences": 10},
        {"type": "MatMul", "total_self_time": 35.0, "occurrences": 10},
        {"type": "Cast", "total_self_time": 20.0, "occurrences": 5},
    ]
    top = op_types(rows, top=2)
    assert [(t.name, t.kind, t.total_us, t.count) for t in top] == [
        ("MatMul", "2 ops", 65.0, 20),
        ("Cast", "1 ops", 20.0, 5),
    ]
    assert top[0].share_pct == pytest.approx(65.0)


# hlo_stats rows of KerasHub GPT-2 decoding at batch 1 under mixed_bfloat16 (H200 lease
# of 2026-12-01, shortened): one layer's FFN product as XLA's dot-strength-reduction
# leaves it (multiply + reduce), the LM head as a GEMM, and the embedding's cast.
GPT2_ROWS = [
    {
        "category": "loop fusion",
        "hlo_op_name": "loop_multiply_fusion.13",
        "hlo_op_expression": "%loop_multiply_fusion.13 = bf16[3072,768]{1,0} "
        "fusion(f32[3072,768]{1,0} %p.1, bf16[3072]{0} %p.2), kind=kLoop",
        "tf_op_name": "while/transformer_layer_0_1/feedforward_output_dense_1/Tensordot/"
        "MatMul:MatMul",
        "total_self_time": 40.0,
    },
    {
        "category": "custom fusion",
        "hlo_op_name": "input_reduce_fusion.95",
        "hlo_op_expression": "%input_reduce_fusion.95 = bf16[768]{0} fusion(bf16[3072,768]"
        "{1,0} %loop_multiply_fusion.13), kind=kCustom, calls=%fused_reduce.95",
        "tf_op_name": "while/transformer_layer_0_1/feedforward_output_dense_1/Tensordot/"
        "MatMul:MatMul",
        "total_self_time": 30.0,
    },
    {
        "category": "custom fusion",
        "hlo_op_name": "gemm_fusion_dot.297",
        "hlo_op_expression": "%gemm_fusion_dot.297 = bf16[50257,1]{0,1} fusion(bf16[768,1]"
        "{1,0} %b.1, bf16[768,50257]{0,1} %b.2), kind=kCustom",
        "tf_op_name": "while/token_embedding_3/Tensordot/MatMul:MatMul",
        "total_self_time": 15.0,
    },
    {
        "category": "loop fusion",
        "hlo_op_name": "wrapped_convert.68",
        "hlo_op_expression": "%wrapped_convert.68 = bf16[50257,768]{1,0} fusion(f32[50257,768]"
        "{1,0} %get-tuple-element.2749), kind=kLoop",
        "tf_op_name": "while/token_embedding_1/GatherV2/Cast:Cast",
        "total_self_time": 15.0,
    },
]


def test_expanded_matmuls_and_weight_casts_are_found_and_advised() -> None:
    from tfaccel.profile.hlo import xla_op_facts

    facts = xla_op_facts(GPT2_ROWS)
    assert facts["xla_expanded_matmul_pct"] == pytest.approx(70.0)  # not the GEMM
    assert facts["xla_cast_to_16bit_pct"] == pytest.approx(15.0)
    found = {f.id: f for f in advise(_synthetic(extra=facts))}
    assert found["expanded_matmul"].severity == "warn"
    assert "xla_options=['gemv_as_gemm']" in (found["expanded_matmul"].action or "")
    assert found["casts"].severity == "warn"
    assert "precision='bfloat16'" in (found["casts"].action or "")
    # Training in bf16 (BERT-like rows): GEMMs only, no finding fires.
    training = xla_op_facts(HLO_ROWS)
    assert training["xla_expanded_matmul_pct"] == 0.0
    assert training["xla_cast_to_16bit_pct"] == 0.0
    quiet = {f.id: f for f in advise(_synthetic(extra=training))}
    assert quiet["expanded_matmul"].severity == quiet["casts"].severity == "ok"


def test_the_gemv_advice_names_the_tensorflow_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfaccel import _compat
    from tfaccel.profile.hlo import xla_op_facts

    extra = xla_op_facts(GPT2_ROWS)
    for version, note in (("2.16.2", "needs TensorFlow >= 2.20; this is 2.16.2"), ("2.21.0", "")):
        monkeypatch.setattr(_compat, "installed_version", lambda v=version: v)
        action = {f.id: f for f in advise(_synthetic(extra=extra))}["expanded_matmul"].action
        assert action is not None and "gemv_as_gemm" in action
        assert (note in action) if note else ("needs TensorFlow" not in action)


# BERT-like XLA ops of one layer's backward pass (names as TensorFlow gives them under
# Keras' einsum): the query kernel's gradient per sequence and its sum over the batch,
# the query input's gradient (no sum), attention's batched product (equal batches: no
# sum), and a feed-forward GEMM.
SCOPE = "gradient_tape/bert/transformer_layer_3_1/self_attention_layer_1"
BROADCAST_ROWS = [
    {
        "category": "custom-call",
        "hlo_op_name": "custom-call.352",
        "tf_op_name": f"{SCOPE}/query_1/MatMul/MatMul_1:BatchMatMulV2",
        "total_self_time": 10.0,
    },
    {
        "category": "input fusion",
        "hlo_op_name": "input_reduce_fusion.116",
        "tf_op_name": f"{SCOPE}/query_1/MatMul/Sum_1:Sum",
        "total_self_time": 7.0,
    },
    {
        "category": "custom fusion",
        "hlo_op_name": "gemm_fusion_dot.82",
        "tf_op_name": f"{SCOPE}/query_1/MatMul/MatMul:BatchMatMulV2",
        "total_self_time": 5.0,
    },
    {
        "category": "custom fusion",
        "hlo_op_name": "gemm_fusion_dot.90",
        "tf_op_name": f"{SCOPE}/MatMul/MatMul_1:BatchMatMulV2",
        "total_self_time": 8.0,
    },
    {
        "category": "custom-call",
        "hlo_op_name": "custom-call.400",
        "tf_op_name": "gradient_tape/bert/ffn/Tensordot/MatMul/MatMul_1:MatMul",
        "total_self_time": 70.0,
    },
]


def test_per_sequence_weight_gradients_are_found_and_advised() -> None:
    """The gradient of a product whose weight is broadcast over the batch (Keras' einsum
    for EinsumDense) is counted with its sum: 17 of 100 here; lease L's BERT-base
    profile on the H200 read 15.9 % (72 of 453 ms)."""
    from tfaccel.profile.hlo import xla_op_facts

    facts = xla_op_facts(BROADCAST_ROWS)
    assert facts["xla_broadcast_grad_pct"] == pytest.approx(17.0)
    found = {f.id: f for f in advise(_synthetic(extra=facts))}
    assert found["broadcast_grad"].severity == "warn"
    assert "einsum='flat'" in (found["broadcast_grad"].action or "")
    # No sum, nothing counted: attention's products and the GEMMs of a flat einsum.
    flat = [r for r in BROADCAST_ROWS if not r["tf_op_name"].endswith(":Sum")]
    assert xla_op_facts(flat)["xla_broadcast_grad_pct"] == 0.0
    quiet = {f.id: f for f in advise(_synthetic(extra=xla_op_facts(HLO_ROWS)))}
    assert quiet["broadcast_grad"].severity == "ok"


@pytest.mark.parametrize("width", [80, 120])
def test_op_names_fit_one_line_with_their_end_kept(traces: Path, width: int) -> None:
    """Issue 45: op names wrapped over 5-6 lines at 80 columns. Each row is now one
    line: the name's end (the op's own name) after an ellipsis; the JSON keeps it whole.
    A CPU trace's GPU rows are left out with one line saying why."""
    import dataclasses

    from rich.console import Console

    from tfaccel.profile.report import TopItem
    from tfaccel.render import to_jsonable
    from tfaccel.render.profile import profile_text

    name = "StatefulPartitionedCall/model/transformer_block_11/attention/dense_1/MatMul"
    item = TopItem(name=name, kind="_MklNativeConv2DBackpropFilterWithBias", total_us=1000.0,
                   count=3, share_pct=50.0)  # fmt: skip
    report = dataclasses.replace(analyze(traces / "cpu_normal"), top_ops=(item,) * 3)
    console = Console(record=True, width=width)
    profile_text(report, [], [], console)
    text = console.export_text()
    table = text[text.index("top ops") :].splitlines()[2:5]  # the three rows
    assert all(line.split()[0].endswith("/dense_1/MatMul") for line in table), table
    assert all(len(line.rstrip()) <= width for line in text.splitlines() if "--logdir" not in line)
    assert "n/a" not in text and "no GPU activity in this trace" in text
    assert to_jsonable(report)["top_ops"][0]["name"] == name


def test_short_name_keeps_the_end_at_a_slash() -> None:
    from tfaccel.render.profile import short_name

    assert short_name("a/b", 10) == "a/b"
    assert short_name("StatefulPartitionedCall/sgd_1/Mul_2", 20) == "\u2026/sgd_1/Mul_2"
    assert short_name("x" * 30, 10) == "\u2026" + "x" * 9


def test_a_folder_name_that_is_not_utf8_is_said_before_xprof(traces: Path, tmp_path: Path) -> None:
    import shutil

    name = os.fsdecode(b"run-\xff")  # bytes no UTF-8 text spells, as Python holds them
    shutil.copytree(traces / "cpu_normal", tmp_path / name)
    with pytest.raises(InputError) as caught:
        analyze(tmp_path / name)
    assert "is not UTF-8 text" in caught.value.message and "run-\\udcff" in caught.value.message


def test_a_folder_that_cannot_be_listed_is_not_called_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for a user without read permission on it (root reads every folder, so the
    refusal is the file system's, reproduced)."""
    from tfaccel.profile import load

    def refuse(path: object) -> list[str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(load.os, "listdir", refuse)
    with pytest.raises(InputError) as caught:
        analyze(tmp_path)
    assert "Cannot read the folder" in caught.value.message
    assert "Permission denied" in caught.value.message
