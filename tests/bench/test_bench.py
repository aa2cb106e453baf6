"""The harness with an injected clock, results files, compare, and the suite on the CPU."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from itertools import count
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.clitext import unboxed
from tfaccel.bench.results import BenchReport, compare, load_report, report_json
from tfaccel.bench.timer import Measurement, measure
from tfaccel.cli import app
from tfaccel.errors import ConfigFileError

runner = CliRunner()


def test_measure_separates_warmup_and_syncs_before_each_read() -> None:
    ticks = iter(
        [
            0.0,
            5.0,  # warm-up: 5 s (compilation)
            10.0,
            12.0,  # repeat 1: 10 calls in 2 s
            20.0,
            21.0,  # repeat 2: 10 calls in 1 s
            30.0,
            32.0,
        ]
    )  # repeat 3: 2 s
    synced = []
    m = measure(
        "x",
        lambda: "result",
        work=3.0,
        unit="TFLOP/s",
        repeats=3,
        number=10,
        clock=lambda: next(ticks),
        sync=synced.append,
        peak=30.0,
    )
    assert m.warmup_s == 5.0
    assert m.samples == (15.0, 30.0, 15.0)  # work * number / seconds
    assert m.median == 15.0 and m.percent_of_peak == 50.0
    assert synced == ["result"] * 4  # after warm-up and after each repeat


def test_per_call_time_is_lower_is_better() -> None:
    clock = count(0.0, 0.5)
    m = measure(
        "lat",
        lambda: None,
        work=1,
        unit="x",
        repeats=2,
        number=5,
        per_call_time=True,
        clock=lambda: next(clock),
    )
    assert m.unit == "us" and not m.higher_is_better
    assert m.samples == (100000.0, 100000.0)  # 0.5 s / 5 calls


def test_noise_and_throttle_warnings() -> None:
    quiet = Measurement("q", "GB/s", (100, 101, 99, 100, 100))
    noisy = Measurement("n", "GB/s", (50, 100, 150, 100, 60))
    hot = Measurement(
        "h",
        "GB/s",
        (1, 1, 1, 1),
        telemetry={"throttled": True, "throttle_reasons": ["sw_power_cap"]},
    )
    assert quiet.warnings == ()
    assert noisy.warnings and "noisy" in noisy.warnings[0]
    assert "sw_power_cap" in hot.warnings[0]


def test_results_round_trip_and_compare(tmp_path: Path) -> None:
    a = BenchReport(
        "micro",
        {"gpus": []},
        (
            Measurement("matmul", "TFLOP/s", (100.0, 100.0, 100.0), peak=200.0),
            Measurement("latency", "us", (10.0, 10.0, 10.0), higher_is_better=False),
        ),
        1.0,
    )
    b = BenchReport(
        "micro",
        {"gpus": []},
        (
            Measurement("matmul", "TFLOP/s", (150.0, 150.0, 150.0)),
            Measurement("latency", "us", (20.0, 20.0, 20.0), higher_is_better=False),
        ),
        1.0,
    )
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(report_json(a))
    pb.write_text(report_json(b))
    data = json.loads(pa.read_text())
    assert data["schema"] == "tfaccel.bench/1" and data["measurements"][0]["percent_of_peak"] == 50
    rows = {r.name: r for r in compare(load_report(pa), load_report(pb))}
    assert rows["matmul"].ratio == 1.5 and rows["matmul"].better is True
    assert rows["latency"].ratio == 2.0 and rows["latency"].better is False
    result = runner.invoke(app, ["bench", "compare", str(pa), str(pb)])
    assert result.exit_code == 0 and "1.50x" in result.stdout and "worse" in result.stdout
    as_json = runner.invoke(app, ["bench", "compare", str(pa), str(pb), "--format", "json"])
    data = json.loads(as_json.stdout)
    assert data["environment_differences"] == {} and len(data["rows"]) == 2
    chart = tmp_path / "c.html"
    drawn = runner.invoke(app, ["bench", "compare", str(pa), str(pb), "--html", str(chart)])
    assert drawn.exit_code == 0 and "<img alt='B against A'" in chart.read_text()
    # the CI gate: latency doubled (worse beyond the noise), so B against A fails; A
    # against itself passes
    gate = runner.invoke(app, ["bench", "compare", str(pa), str(pb), "--fail-worse"])
    assert gate.exit_code == 1 and "worse" in gate.stdout
    same = runner.invoke(app, ["bench", "compare", str(pa), str(pa), "--fail-worse"])
    assert same.exit_code == 0
    for flag in (["--quick"], ["--batch", "8"], ["--output", "x.json"]):
        refused = runner.invoke(app, ["bench", "compare", str(pa), str(pb), *flag])
        assert refused.exit_code == 2 and f"No such option: {flag[0]}" in unboxed(refused.output)


def test_compare_says_what_is_noise_what_is_missing_and_what_differs() -> None:
    from tfaccel.bench.results import environment_differences

    def report(driver: str, *ms: Measurement) -> BenchReport:
        env = {"gpus": [{"name": "NVIDIA H200"}], "driver": driver, "tensorflow": "2.21.0"}
        return BenchReport("micro", env, ms, 1.0)

    a = report(
        "580.1",
        Measurement("steady", "GB/s", (100.0, 100.0, 100.0, 100.0)),
        Measurement("noisy", "GB/s", (70.0, 100.0, 130.0, 100.0)),  # IQR / median 15 %
        Measurement("gone", "us", (1.0,)),
    )
    b = report(
        "590.2",
        Measurement("steady", "GB/s", (102.0, 102.0, 102.0, 102.0)),  # +2 %: under 3 %
        Measurement("noisy", "GB/s", (125.0, 125.0, 125.0, 125.0)),  # +25 %: under 30 %
        Measurement("new", "us", (2.0,)),
    )
    rows = {r.name: r for r in compare(a, b)}
    assert rows["steady"].better is None and rows["steady"].threshold == pytest.approx(0.03)
    assert rows["noisy"].better is None and rows["noisy"].threshold == pytest.approx(0.3)
    assert rows["gone"].only == "A" and rows["new"].only == "B"
    assert environment_differences(a, b) == {"driver": ("580.1", "590.2")}
    cut = dataclasses.replace(b, complete=False)  # what an interrupted suite leaves
    assert environment_differences(a, cut)["complete"] == (True, False)
    from rich.console import Console

    from tfaccel.render.bench import compare_text

    console = Console(record=True, width=200)
    compare_text(list(rows.values()), "a.json", "b.json", console, environment_differences(a, b))
    text = console.export_text()
    assert "driver differs: A 580.1, B 590.2" in text and "within noise (±30%)" in text
    assert "only in A" in text and "only in B" in text


def test_foreign_result_file_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(ConfigFileError, match="is not a tfaccel bench result"):
        load_report(p)
    p.write_text("{not json")
    with pytest.raises(ConfigFileError, match="is not valid JSON"):
        load_report(p)


def test_micro_suite_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    out, html = tmp_path / "m.json", tmp_path / "m.html"
    result = runner.invoke(
        app, ["bench", "micro", "--quick", "--out", str(out), "--html", str(html)]
    )
    assert result.exit_code == 0, result.output
    names = [m.name for m in load_report(out).measurements]
    assert any(n.startswith("matmul bfloat16") for n in names)
    assert "launch latency (eager)" in names and "launch latency (function)" in names
    assert not any(n.startswith("H2D") for n in names)  # no GPU, no transfer to measure
    # ... and what was skipped is said, with why, in the text and the file
    skipped = dict(load_report(out).skipped)
    assert skipped["h2d pinned=False"] == "no GPU: there is no host-device transfer to measure"
    assert "needs 2 or more GPUs" in skipped["all-reduce"]
    assert "skipped: all-reduce: needs 2 or more GPUs" in result.output
    assert "data:image/png;base64" in html.read_text()
    assert load_report(out).complete and "launch latency (eager)  " in result.output
    again = runner.invoke(app, ["bench", "micro", "--quick", "--out", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_an_interrupted_suite_keeps_what_finished(tmp_path: Path) -> None:
    from tfaccel.bench.suite import run_suite

    out = tmp_path / "partial.json"

    def interrupted() -> Measurement:
        raise KeyboardInterrupt

    benches = [
        ("first", lambda: Measurement("first", "GB/s", (1.0, 2.0, 3.0))),
        ("second", interrupted),
        ("third", lambda: Measurement("third", "GB/s", (1.0,))),
    ]
    with pytest.raises(KeyboardInterrupt):
        run_suite("x", benches, sample=False, on_partial=lambda r: out.write_text(report_json(r)))
    kept = load_report(out)
    assert [m.name for m in kept.measurements] == ["first"] and kept.complete is False


def test_workload_bench_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    out = tmp_path / "w.json"
    result = runner.invoke(app, ["bench", "tiny", "--quick", "--batch", "16", "--out", str(out)])
    assert result.exit_code == 0, result.output
    ms = load_report(out).measurements
    assert len(ms) == 4 and all(m.error is None and m.median for m in ms)
    assert {m.params["xla"] for m in ms} == {"off", "jit"}
    # no 16-bit math on the CPU: the "auto" rows say what they resolved to, apart
    assert len({m.name for m in ms}) == 4
    assert sum("train auto=float32" in m.name for m in ms) == 2
    # The tiny CNN's products per image: two 3x3 convolutions and two dense layers.
    fwd = 2 * (32 * 32 * 32 * 27 + 16 * 16 * 64 * 288 + 4096 * 128 + 128 * 10)
    for m in ms:
        assert m.params["forward_gflops_per_sample"] == pytest.approx(fwd / 1e9)
        assert m.params["model_tflops"] == pytest.approx(3 * fwd * (m.median or 0) / 1e12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "nothing"], "Unknown benchmark 'nothing'"),
        (["bench", "compare", "a.json"], "Missing argument 'B.json'"),
    ],
)
def test_bad_input(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in unboxed(result.output)


def test_bench_verbs_have_their_own_help_and_run_is_the_default() -> None:
    helped = unboxed(runner.invoke(app, ["bench", "compare", "--help"]).output)
    assert "Two result files side by side" in helped and "--quick" not in helped
    listed = unboxed(runner.invoke(app, ["bench", "--help"]).output)
    assert "run" in listed and "compare" in listed
    for argv in (["bench", "tiny", "--batch", "0"], ["bench", "run", "tiny", "--batch", "0"]):
        refused = runner.invoke(app, argv)  # the run's own range, checked by its parser
        assert refused.exit_code == 2 and "Invalid value for '--batch'" in unboxed(refused.output)


@pytest.mark.gpu
def test_micro_on_the_gpu_reaches_a_fair_share_of_peak() -> None:
    from tfaccel.bench import micro
    from tfaccel.bench.suite import local_spec

    spec = local_spec()
    m = micro.matmul("bfloat16", (8192, 8192, 8192), peak=spec.peak("bf16") if spec else None)
    assert m.median and m.median > 50  # TFLOP/s: any tensor-core GPU of this decade
    lat = micro.launch_latency("function", 1000)
    assert lat.median and lat.median < 100


def test_detector_generation_and_conv3d_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("keras_hub")
    out = tmp_path / "x.json"
    result = runner.invoke(app, ["bench", "yolo", "gpt2", "conv3d", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    by = {m.name: m for m in load_report(out).measurements}
    yolo = [m for n, m in by.items() if n.startswith("yolo-style 4K inference")]
    assert yolo and all(m.median for m in yolo)
    assert {m.params["xla"] for m in yolo} == {True, False}  # does XLA help?
    assert by["gpt2 generate batch=1 float32"].unit == "tokens/s"
    assert by["gpt2 generate batch=1 bfloat16"].median  # weights in bf16
    ttft = by["gpt2 time to first token batch=1 float32"]
    assert ttft.unit == "ms" and not ttft.higher_is_better and ttft.median
    conv = [m for n, m in by.items() if n.startswith("conv3d")]
    assert len(conv) == 3 and all(m.median for m in conv)
    assert [m.params["xla"] for m in conv] == [True, True, False]
    assert by["gpt2 generate batch=1 float32 xla=off"].median
    assert by["gpt2 generate batch=1 bfloat16 loop=tfaccel"].params["loop"] == "tfaccel"
    assert by["gpt2 generate batch=1 bfloat16 loop=fused"].median
    assert by["gpt2 generate batch=1 bfloat16 loop=fused_generate"].median
    assert conv[0].params["tflops_per_watt"] is None  # no GPU power reading here


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "bfloat16"])
def test_tfaccels_decoding_loop_writes_kerashubs_tokens(policy: str) -> None:
    pytest.importorskip("keras_hub")
    import keras
    import numpy as np

    from tfaccel.bench.inference import greedy_decoder
    from tfaccel.workloads.builtin import gpt2_causal_lm

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(8)  # the same model whatever ran before
        lm = gpt2_causal_lm(1000, 2, 64, 4, 256, 128)
        lm.compile(sampler="greedy", jit_compile=True)
        rng = np.random.default_rng(1)
        ids = np.zeros((2, 20), "int32")
        mask = np.zeros((2, 20), bool)
        for row, n in ((0, 8), (1, 5)):  # prompts of two lengths: the loop starts at 5
            ids[row, :n] = rng.integers(1, 1000, n)
            mask[row, :n] = True
        want = lm.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
        got = greedy_decoder(lm, 2, 20, 5)(ids, mask).numpy()
        fused = greedy_decoder(lm, 2, 20, 5, fused=True)(ids, mask).numpy()
    finally:
        keras.mixed_precision.set_global_policy(previous)
    np.testing.assert_array_equal(got, want["token_ids"])
    # The fused step rounds differently in 16 bits (one-pass layer norms, a float32
    # softmax), so a near-tie may go the other way there: its 16-bit check is the
    # logits test below.
    if policy == "float32":
        np.testing.assert_array_equal(fused, want["token_ids"])
    # Both loops start at 5, the shorter prompt, and keep the longer one's given tokens
    # at 5-7. (Token 0 is a word like any other: a new position may hold it.)
    for out in (got, fused):
        assert (out[0, :8] == ids[0, :8]).all() and (out[1, :5] == ids[1, :5]).all()


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "bfloat16"])
def test_the_fused_decoding_step_gives_kerashubs_logits(policy: str) -> None:
    """Every new token of a greedy generation, teacher-forced: one step of
    `_fused_decoder_step` against KerasHub's `call_with_cache` on the same cache. In
    float32 the logits, keys and values are the same (1e-4); in 16 bits the logits stay
    within rounding, and the next token is the same wherever KerasHub's best two logits
    are further apart than that rounding."""
    pytest.importorskip("keras_hub")
    import keras
    import numpy as np
    import tensorflow as tf

    from tfaccel.bench.inference import _fused_decoder_step, fused_caches
    from tfaccel.workloads.builtin import gpt2_causal_lm

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(4)
        lm = gpt2_causal_lm(300, 3, 48, 4, 192, 64)
        dtype = tf.as_dtype(lm.compute_dtype)
        weights, step = _fused_decoder_step(lm, dtype)
        w = weights()
        ids = np.random.default_rng(2).integers(1, 300, (3, 16)).astype("int32")
        cache = tf.zeros([3, 3, 2, 16, 4, 12], dtype)
        _, _, cache = lm.call_with_cache(ids, cache, 0)
        tol = 1e-4 if policy == "float32" else None
        for index in range(16):
            want, _, want_cache = lm.call_with_cache(ids[:, index : index + 1], cache, index)
            ks, vs = fused_caches([cache[:, i] for i in range(3)])
            logits, ks, vs = step(w, ids[:, index], ks, vs, index)
            want32 = tf.cast(want[:, 0], tf.float32).numpy()
            got32 = tf.cast(logits, tf.float32).numpy()
            # 16 bits: 2^-8 of the largest logit, a few units in the last place
            bound = tol or 4 * 2.0**-8 * np.abs(want32).max()
            np.testing.assert_allclose(got32, want32, rtol=0, atol=bound)
            top2 = np.sort(want32, axis=-1)[:, -2:]
            clear = top2[:, 1] - top2[:, 0] > 2 * bound
            assert (got32.argmax(-1) == want32.argmax(-1))[clear].all()
            if policy == "float32":
                for i in range(3):
                    got_k = tf.transpose(ks[i], [0, 2, 1, 3]).numpy()
                    np.testing.assert_allclose(got_k, want_cache[:, i, 0].numpy(), atol=1e-5)
                    got_v = tf.transpose(vs[i], [0, 2, 1, 3]).numpy()
                    np.testing.assert_allclose(got_v, want_cache[:, i, 1].numpy(), atol=1e-5)
            cache = want_cache
    finally:
        keras.mixed_precision.set_global_policy(previous)


def test_the_fused_decoder_refuses_blocks_it_does_not_implement() -> None:
    pytest.importorskip("keras_hub")
    import tensorflow as tf

    from tfaccel.bench.inference import _fused_decoder_step
    from tfaccel.workloads.builtin import gpt2_causal_lm

    lm = gpt2_causal_lm(100, 1, 32, 2, 64, 32)
    block = lm.backbone.transformer_layers[0]
    block.normalize_first = False  # a post-norm block
    with pytest.raises(ValueError, match="pre-norm decoder-only"):
        _fused_decoder_step(lm, tf.float32)
    del block._feedforward_layer_norm  # a decoder block of another make
    with pytest.raises(ValueError, match="has no _feedforward_layer_norm"):
        _fused_decoder_step(lm, tf.float32)


def test_the_4k_detector_is_v8s_sized() -> None:
    pytest.importorskip("keras")
    from tfaccel.workloads.models import UHD, conv3d_flops, yolo_style

    model = yolo_style()
    assert model.input_shape == (None, *UHD, 3)
    assert 9e6 < model.count_params() < 14e6  # YOLOv8s: about 11 M
    assert conv3d_flops(4, (64, 128, 128), 64, 64) == 2 * 4 * 64 * 128 * 128 * 64 * 27 * 64


def test_allreduce_reduces_among_replicas_on_two_logical_cpus(tmp_path: Path) -> None:
    """The all-reduce keeps the sum on every replica (not a gather to the host)."""
    script = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfaccel.bench import micro
names = [d.name for d in tf.config.list_logical_devices("CPU")]
m = micro.allreduce(mib=1, repeats=2, number=1, devices=names)
print("RESULT", m.params["gpus"], m.params["ops"], m.median > 0)
from tfaccel.trial.step import per_replica_values
s = tf.distribute.MirroredStrategy(names)
v = per_replica_values(s, lambda ctx: tf.ones((2,)) * float(ctx.replica_id_in_sync_group))
print("PLACED", [t.device.split("/")[-1] for t in s.experimental_local_results(v)])
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert "RESULT 2 ReductionToOneDevice True" in out.stdout, out.stderr[-2000:]
    # each replica's value sits on its own device, not all on the default one
    assert "PLACED ['device:CPU:0', 'device:CPU:1']" in out.stdout, out.stdout


def test_remat_saving_reports_why_a_trial_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfaccel.bench import suite
    from tfaccel.trial import runner

    def fake(workload, settings, steps, *a, **k):  # type: ignore[no-untyped-def]
        if settings.gradient_checkpointing:
            return runner.TrialResult("k", "l", {}, "oom", error="OOM when allocating")
        return runner.TrialResult(
            "k", "l", {}, "ok", samples_per_s=1.0, peak_memory_bytes=10, device="GPU"
        )

    monkeypatch.setattr(runner, "run_trial", fake)
    m = suite.remat_saving("resnet50", 128)
    assert m.error == "checkpointing on: oom (OOM when allocating)"

    def both_ok(workload, settings, steps, *a, **k):  # type: ignore[no-untyped-def]
        peak = 6 if settings.gradient_checkpointing else 10
        return runner.TrialResult(
            "k", "l", {}, "ok", samples_per_s=1.0, peak_memory_bytes=peak, device="GPU"
        )

    monkeypatch.setattr(runner, "run_trial", both_ok)
    assert suite.remat_saving("resnet50", 128).median == pytest.approx(40.0)


def test_xla_options_are_checked_and_recorded(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("tensorflow")
    from tfaccel.optimize import environment
    from tfaccel.optimize.settings import XLA_OPTIONS

    bad = runner.invoke(app, ["bench", "micro", "--quick", "--xla-options", "fast"])
    assert bad.exit_code == 2 and "Unknown xla_options entry" in bad.output
    assert "cublaslt" in bad.output  # what was expected
    # As in a fresh process: TensorFlow not started, no flags of tfaccel's set yet.
    monkeypatch.setattr(environment, "runtime_initialized", lambda: False)
    monkeypatch.setattr(environment, "_XLA_ADDED", [])
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=2")
    out = tmp_path / "m.json"
    result = runner.invoke(
        app, ["bench", "micro", "--quick", "--xla-options", "cublaslt", "--out", str(out)]
    )  # an option every supported TensorFlow knows
    assert result.exit_code == 0, result.output
    assert load_report(out).environment["xla_flags"] == (
        f"--xla_gpu_autotune_level=2 {' '.join(XLA_OPTIONS['cublaslt'])}"
    )


@pytest.mark.gpu
def test_fused_generation_on_the_gpu_at_gpt2s_size() -> None:
    """GPT-2 124M on the GPU, float32 with TF32 off: KerasHub's `generate` writes the
    same tokens with and without `fuse_generation`, greedy and top-k (seeded)."""
    pytest.importorskip("keras_hub")
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    from tfaccel.optimize.decoding import fuse_generation
    from tfaccel.workloads.builtin import gpt2_causal_lm

    rng = np.random.default_rng(5)
    ids = np.zeros((4, 48), "int32")
    ids[:, :16] = rng.integers(1, 50257, (4, 16))
    mask = np.zeros((4, 48), bool)
    mask[:, :16] = True
    inputs = {"token_ids": ids, "padding_mask": mask}
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        keras.utils.set_random_seed(6)
        plain = gpt2_causal_lm()
        keras.utils.set_random_seed(6)
        fused = fuse_generation(gpt2_causal_lm())
        for make in (lambda: "greedy", lambda: keras_hub.samplers.TopKSampler(k=10, seed=3)):
            plain.compile(sampler=make())
            fused.compile(sampler=make())
            want = plain.generate(inputs, stop_token_ids=None)["token_ids"]
            got = fused.generate(inputs, stop_token_ids=None)["token_ids"]
            np.testing.assert_array_equal(got, want)
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32)


@pytest.mark.gpu
def test_the_fused_decoder_on_the_gpu_at_gpt2s_size() -> None:
    """GPT-2 124M on the GPU: in float32 (TF32 off) the fused loop writes `generate`'s
    tokens; in bf16 one step's logits stay within bf16 rounding of KerasHub's
    `call_with_cache` and pick the same next token for nearly every sequence."""
    pytest.importorskip("keras_hub")
    import keras
    import numpy as np
    import tensorflow as tf

    from tfaccel.bench.inference import _fused_decoder_step, fused_caches, greedy_decoder
    from tfaccel.workloads.builtin import gpt2_causal_lm

    rng = np.random.default_rng(3)
    batch, prompt, length = 4, 16, 48
    ids = np.zeros((batch, length), "int32")
    ids[:, :prompt] = rng.integers(1, 50257, (batch, prompt))
    mask = np.zeros((batch, length), bool)
    mask[:, :prompt] = True
    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        lm = gpt2_causal_lm()
        lm.compile(sampler="greedy", jit_compile=True)
        want = lm.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
        got = greedy_decoder(lm, batch, length, prompt, fused=True)(ids, mask).numpy()
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    np.testing.assert_array_equal(got, want["token_ids"])

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("bfloat16")
    try:
        lm = gpt2_causal_lm()
        tokens = rng.integers(1, 50257, (16, 33)).astype("int32")
        cache = tf.zeros([16, 12, 2, 33, 12, 64], "bfloat16")
        _, _, cache = lm.call_with_cache(tokens, cache, 0)
        want_logits, _, _ = lm.call_with_cache(tokens[:, 32:], cache, 32)
        weights, step = _fused_decoder_step(lm, tf.bfloat16)
        ks, vs = fused_caches([cache[:, i] for i in range(12)])
        logits, _, _ = tf.function(step, jit_compile=True)(weights(), tokens[:, 32], ks, vs, 32)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    want32 = tf.cast(want_logits[:, 0], tf.float32).numpy()
    got32 = tf.cast(logits, tf.float32).numpy()
    # bf16 keeps 8 bits: on CPU the largest difference read 7 % of the logits' spread
    # (2-3 units in the last place), the mean 1 %, and 15 of 16 next tokens agreed.
    diff = np.abs(got32 - want32)
    assert diff.max() < 0.15 * want32.std() and diff.mean() < 0.05 * want32.std()
    assert (got32.argmax(-1) == want32.argmax(-1)).sum() >= 14


def test_a_built_in_model_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its entry point, revision, bench batch and `bench all` membership are its row of
    workloads.BUILTINS; the other tables are read from it."""
    from tfaccel.bench import suite
    from tfaccel.workloads import BUILTIN, BUILTINS, REVISION

    assert {name: row.entry for name, row in BUILTINS.items()} == BUILTIN
    assert {n: r.revision for n, r in BUILTINS.items() if r.revision is not None} == REVISION
    asked: list[tuple[str, int]] = []
    monkeypatch.setattr(suite, "workload_benches", lambda w, b, q=False: asked.append((w, b)) or [])
    suite.select(["all"])
    assert asked == [(n, r.bench_batch) for n, r in BUILTINS.items() if r.in_bench_all]
    asked.clear()
    suite.select(["bert", "tiny"])  # (gpt2 by name is bench's own extra benchmark)
    assert asked == [("bert", BUILTINS["bert"].bench_batch), ("tiny", 128)]
