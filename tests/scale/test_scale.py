"""TF_CONFIG, MPS (with a fake control binary), counts, efficiency, and the scale command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.errors import ConfigFileError, InputError
from tfaccel.optimize.settings import Settings
from tfaccel.scale import mps
from tfaccel.scale.runner import gpu_counts, run_scale
from tfaccel.scale.tfconfig import make, validate
from tfaccel.trial.runner import StepPlan, TrialResult

runner = CliRunner()
GOOD = {"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker", "index": 1}}


def test_make_and_commands() -> None:
    cfg = make(["10.0.0.1:2222", "10.0.0.2:2222"], 1)
    assert json.loads(cfg.to_json()) == {
        "cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    lines = cfg.commands("python train.py")
    assert len(lines) == 2 and '"index": 0' in lines[0] and '"index": 1' in lines[1]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ("{not json", "not valid JSON"),
        ({"task": GOOD["task"]}, "'cluster'"),
        (
            {**GOOD, "cluster": {"worker": ["h1:2222", "h1:2222"]}},
            "cluster.worker[1]: h1:2222 is listed twice",
        ),
        ({**GOOD, "cluster": {"wrker": ["h1:1"]}}, "cluster.wrker: unknown task type"),
        ({**GOOD, "cluster": {"worker": ["h1"]}}, "cluster.worker[0]: not a host:port"),
        ({**GOOD, "cluster": {"worker": ["h1:99999"]}}, "cluster.worker[0]: not a host:port"),
        ({**GOOD, "task": {"type": "worker", "index": 2}}, "task.index: out of range"),
        ({**GOOD, "task": {"type": "chief", "index": 0}}, "task.type: names no task"),
    ],
)
def test_bad_tf_configs_name_the_field(config: object, field: str) -> None:
    with pytest.raises(ConfigFileError) as caught:
        validate(config)  # type: ignore[arg-type]
    assert field in caught.value.message


def test_points_use_only_the_gpus_the_user_left_visible() -> None:
    from tfaccel.hardware.capabilities import visible_devices

    assert visible_devices(4, "2,3") == ["2", "3"]
    assert visible_devices(1, "GPU-ab12, GPU-cd34") == ["GPU-ab12"]
    seen: list[str] = []

    def trial(workload, s, steps, timeout, extra, env_overrides) -> TrialResult:  # type: ignore[no-untyped-def]
        seen.append(env_overrides["CUDA_VISIBLE_DEVICES"])
        return TrialResult("k", "l", s.to_dict(), "ok", samples_per_s=1.0, device="GPU")

    run_scale("w", [1, 2], Settings(batch_size=8), StepPlan(), trial_fn=trial, devices=["5", "7"])
    assert seen == ["5", "5,7"]  # a shared server's GPUs 0-4 are never touched


def test_gpu_counts() -> None:
    assert gpu_counts(8, None) == [1, 2, 4, 8]
    assert gpu_counts(6, None) == [1, 2, 4, 6]
    assert gpu_counts(2, [2, 1]) == [1, 2]
    with pytest.raises(InputError) as caught:
        gpu_counts(2, [4])
    assert "Cannot run on 4 GPU(s)" in caught.value.message
    assert "the 2 visible GPU(s)" in caught.value.message
    with pytest.raises(InputError) as listed:
        gpu_counts(2, [3], ["GPU 5 NVIDIA H200", "GPU 7 NVIDIA H200"])
    assert "(GPU 5 NVIDIA H200; GPU 7 NVIDIA H200)" in listed.value.message


def test_efficiency_from_fake_trials() -> None:
    seen: list[tuple[int, dict[str, str]]] = []

    def trial(
        workload: str,
        s: Settings,
        steps: StepPlan,
        timeout: float,
        extra: dict,
        env_overrides: dict,
    ) -> TrialResult:
        n = len(env_overrides["CUDA_VISIBLE_DEVICES"].split(","))
        seen.append((n, env_overrides))
        assert s.strategy == "mirrored"  # one engine (tfaccel's step) at every count
        return TrialResult(
            "k",
            "l",
            s.to_dict(),
            "ok",
            samples_per_s=1000.0 * n * (1.0 if n == 1 else 0.9),
            extra={"engine": "tfaccel step"},
        )

    points = run_scale("w", [1, 2, 4], Settings(batch_size=256), StepPlan(), trial_fn=trial)
    assert [p.efficiency for p in points] == [1.0, pytest.approx(0.9), pytest.approx(0.9)]
    assert [p.global_batch for p in points] == [256, 512, 1024]
    assert seen[2][1]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_a_point_that_did_not_run_on_the_gpus_asked_for_is_an_error() -> None:
    def trial(workload, s, steps, timeout, extra, env_overrides) -> TrialResult:  # type: ignore[no-untyped-def]
        n = len(env_overrides["CUDA_VISIBLE_DEVICES"].split(","))
        # TensorFlow sees one GPU of the n that NVML lists; with none it runs on the CPU
        device, replicas = ("CPU", 1) if n == 4 else ("GPU", 1)
        return TrialResult(
            "k", "l", s.to_dict(), "ok", samples_per_s=1000.0, device=device,
            extra={"engine": "tfaccel step", "replicas": replicas},
        )  # fmt: skip

    points = run_scale("w", [1, 2, 4], Settings(batch_size=256), StepPlan(), trial_fn=trial)
    assert [p.status for p in points] == ["ok", "error", "error"]
    assert "asked for 2 GPU(s), ran on 1 replica(s)" in (points[1].error or "")
    assert "ran on the CPU" in (points[2].error or "") and points[2].samples_per_s is None


@pytest.fixture
def fake_control(tmp_path: Path) -> tuple[dict[str, str], Path]:
    log = tmp_path / "calls.log"
    binary = tmp_path / "bin" / "nvidia-cuda-mps-control"
    binary.parent.mkdir()
    binary.write_text(
        f'#!/bin/sh\necho "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY" >> {log}\ncat >> {log}\n'
    )
    binary.chmod(0o755)
    env = {
        "PATH": f"{binary.parent}:{os.environ['PATH']}",
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "log"),
    }
    return env, log


def test_mps_start_and_stop_print_by_default_and_run_with_execute(
    fake_control: tuple[dict[str, str], Path],
) -> None:
    env, log = fake_control
    cmds = mps.start(execute=False, env=env)
    assert cmds[-1] == "nvidia-cuda-mps-control -d" and not log.exists()
    mps.start(execute=True, env=env)
    mps.stop(execute=True, env=env)
    calls = log.read_text()
    assert f"args=-d pipe={env['CUDA_MPS_PIPE_DIRECTORY']}" in calls
    assert "quit" in calls
    assert Path(env["CUDA_MPS_LOG_DIRECTORY"]).is_dir()


def test_mps_status_reads_pipe_and_processes(
    fake_control: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, _ = fake_control
    pipe = Path(env["CUDA_MPS_PIPE_DIRECTORY"])
    pipe.mkdir()
    (pipe / "control").write_text("")
    s = mps.status(env, proc_root=str(tmp_path / "noproc"))
    assert s.running and s.control_binary and s.advice
    with pytest.raises(InputError, match="already running"):
        mps.start(execute=True, env=env)


def test_mps_cli_never_runs_without_yes(
    monkeypatch: pytest.MonkeyPatch, fake_control: tuple[dict[str, str], Path]
) -> None:
    env, log = fake_control
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    result = runner.invoke(app, ["mps", "start"])
    assert result.exit_code == 0 and "add --yes" in result.stdout and not log.exists()


@pytest.mark.slow
def test_scale_command_on_two_cpu_replicas(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    result = runner.invoke(
        app,
        [
            "scale",
            "--plot",
            str(tmp_path / "scale.png"),
            "tiny",
            "--cpu-replicas",
            "2",
            "--batch",
            "8",
            "--precision",
            "float32",
            "--warmup",
            "2",
            "--windows",
            "1",
            "--window",
            "5",
            "--all-reduce",
            "one-device",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)["points"]
    assert [p["gpus"] for p in points] == [1, 2]
    assert "2 GPU(s): " in result.stderr and "efficiency" in result.stderr  # as it went
    assert all(p["status"] == "ok" for p in points), points
    assert points[1]["engine"] == "tfaccel step" and points[1]["global_batch"] == 16
    assert points[0]["engine"] == "tfaccel step"  # one engine at every count
    # which all-reduce ran, and what one all-reduce of the gradients costs alone
    assert points[1]["cross_device_ops"] == "ReductionToOneDevice"
    assert points[1]["allreduce_ms"] > 0 and points[0]["allreduce_ms"] is None
    assert (tmp_path / "scale.png").read_bytes()[:4] == b"\x89PNG"


def test_an_interrupted_scale_run_keeps_its_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfaccel.scale.runner import ScalePoint, read_scale_report

    def one_point_then_ctrl_c(workload: str, counts: list[int], *a: object, **kw: object) -> None:
        on_point = kw["on_point"]
        on_point(1, None)  # type: ignore[operator]
        on_point(1, ScalePoint(1, 8, 100.0, 1.0, "tfaccel step", "ok"))  # type: ignore[operator]
        raise KeyboardInterrupt

    monkeypatch.setattr("tfaccel.scale.run_scale", one_point_then_ctrl_c)
    out = tmp_path / "scale.json"
    result = runner.invoke(app, ["scale", "tiny", "--cpu-replicas", "2", "--out", str(out)])
    assert result.exit_code == 130
    kept = read_scale_report(out)
    assert [p.gpus for p in kept.points] == [1] and kept.complete is False
    again = runner.invoke(app, ["scale", "tiny", "--cpu-replicas", "2", "--out", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


@pytest.mark.slow
def test_scale_with_batches_kept_on_the_devices() -> None:
    pytest.importorskip("tensorflow")
    args = ["scale", "tiny", "--cpu-replicas", "2", "--gpus", "2", "--batch", "8"]
    args += ["--precision", "float32", "--warmup", "2", "--windows", "1", "--window", "5"]
    result = runner.invoke(app, [*args, "--input", "device", "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["settings"]["input"] == "device"
    assert out["points"][0]["status"] == "ok", out["points"]


@pytest.mark.slow
def test_scale_with_batches_cast_on_the_host_inside_the_step() -> None:
    """--input staged: the pipeline keeps float32 batches, the step casts them to bf16
    on the host (on a GPU machine the cast's output is pinned memory)."""
    pytest.importorskip("tensorflow")
    args = ["scale", "tiny", "--cpu-replicas", "2", "--gpus", "2", "--batch", "8"]
    args += ["--precision", "mixed_bfloat16", "--input-cast", "compute", "--input", "staged"]
    args += ["--warmup", "2", "--windows", "1", "--window", "5", "--format", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["settings"]["input"] == "staged"
    point = out["points"][0]
    assert point["status"] == "ok", out["points"]
    assert point["input_bytes_per_sample"] == 32 * 32 * 3 * 2  # bf16 crosses


def test_search_keeps_only_what_beats_the_noise() -> None:
    from tfaccel.scale.runner import search_scale

    seen: list[dict] = []

    def trial(w, s, steps, timeout, extra, env_overrides):  # type: ignore[no-untyped-def]
        seen.append({**extra, "spe": s.steps_per_execution, "env": env_overrides})
        rate = 1000.0
        rate *= 1.10 if extra["cross_device_ops"] == "hierarchical" else 1.0  # kept
        rate *= 1.01 if extra["num_packs"] == 4 else 1.0  # within the noise
        rate *= 0.8 if s.steps_per_execution == 1 else 1.0
        return TrialResult("k", "l", s.to_dict(), "ok", samples_per_s=rate, spread=0.01)

    steps, best = search_scale(
        "w", 2, Settings(batch_size=64, steps_per_execution=10), StepPlan(), trial_fn=trial
    )
    assert best == {"cross_device_ops": "hierarchical", "num_packs": 1, "steps_per_execution": 10}
    assert [(x.option, x.kept) for x in steps] == [
        ("start", True),
        ("cross_device_ops", True),
        ("num_packs", False),
        ("steps_per_execution", False),
        ("steps_per_execution", False),
    ]
    assert all(x["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"} for x in seen)
    assert all("input" not in x for x in seen)
    seen.clear()
    search_scale("w", 2, Settings(batch_size=64), StepPlan(), trial_fn=trial, input_mode="device")
    assert seen and all(x["input"] == "device" for x in seen)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--all-reduce", "ring"], "'ring' is not one of"),
        (["--num-packs", "0"], "Invalid value for '--num-packs'"),
        (["--engine", "fit", "--search"], "apply to tfaccel's step"),
        (["--input", "disk"], "'disk' is not one of"),
        (["--engine", "fit", "--input", "device"], "apply to tfaccel's step"),
        (["--input", "staged", "--precision", "float32"], "casts the batches on the host"),
        (["--precision", "bfloat16"], "it is for inference, and scale measures training"),
        (["--windows", "0"], "Invalid value for '--windows'"),
        (["--warmup", "-1"], "Invalid value for '--warmup'"),
        (["--batch", "0"], "Invalid value for '--batch'"),
    ],
)
def test_scale_bad_options(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["scale", "tiny", "--cpu-replicas", "2", *args])
    assert result.exit_code == 2 and message in unboxed(result.output)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


WORKER = """
import json
import numpy as np, tensorflow as tf, keras
from tfaccel.trial.step import DistributedTrainer
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    opt = keras.optimizers.SGD(0.1)
t = DistributedTrainer(model, opt, "mse", strategy, global_batch=32, jit=True,
                       steps_per_execution=2)
x = np.ones((256, 8), "float32"); y = np.zeros((256, 4), "float32")
it = t.distribute(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32))
print("LOSS", json.dumps([round(v, 6) for v in t.run(it, 3)]), strategy.num_replicas_in_sync)
"""


@pytest.mark.slow
def test_two_workers_on_loopback(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    cfg = make([f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"], 0)
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    procs = []
    for i in range(2):
        env = {
            **os.environ,
            "TF_CONFIG": validate(
                {"cluster": cfg.cluster, "task": {"type": "worker", "index": i}}
            ).to_json(),
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "CUDA_VISIBLE_DEVICES": "",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script)],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-800:] for o in outs]
    losses = [next(line for line in o[0].splitlines() if line.startswith("LOSS")) for o in outs]
    # Keras fit fails under MultiWorkerMirroredStrategy in Keras 3.15; tfaccel's step
    # trains: both workers see the same falling losses, 2 replicas in sync.
    assert losses[0] == losses[1] and losses[0].endswith(" 2")
    values = json.loads(losses[0].split(" ", 1)[1].rsplit(" ", 1)[0])
    assert values[0] > values[-1]


def test_scale_starts_from_tunes_file_and_options_override_it(tmp_path: Path) -> None:
    from tfaccel.scale import scale_settings

    f = tmp_path / "tfaccel.json"
    tuned = Settings(precision="mixed_bfloat16", xla="jit", batch_size=512, prefetch="device")
    f.write_text(json.dumps({"schema": "tfaccel.settings/1", "settings": tuned.to_dict()}))
    s = scale_settings(json.loads(f.read_text()), None, None, None, 25)
    assert (s.precision, s.batch_size, s.prefetch, s.steps_per_execution) == (
        "mixed_bfloat16",
        512,
        "device",
        25,
    )
    d = scale_settings(None, None, None, None, None)
    assert (d.precision, d.xla, d.batch_size, d.steps_per_execution) == ("auto", "jit", 256, 10)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["scale", "tiny", "--cpu-replicas", "2", "--config", str(bad)])
    assert result.exit_code == 2 and "bad.json" in result.output


def test_points_are_compared_with_the_tuned_single_gpu(tmp_path: Path) -> None:
    from rich.console import Console

    from tfaccel.render.scale import scale_text
    from tfaccel.scale.runner import ScalePoint, ScaleReport, tuned_reference

    f = tmp_path / "tfaccel.json"
    f.write_text(json.dumps({"settings": {}, "measured": {"samples_per_s": 6400.0}}))
    points = (
        ScalePoint(1, 512, 4880.0, 1.0, "tfaccel step", "ok"),
        ScalePoint(2, 1024, 10400.0, 1.07, "tfaccel step", "ok"),
    )
    ref = tuned_reference(str(f), json.loads(f.read_text()), points)
    assert ref is not None and ref["ratio"]["2"] == pytest.approx(1.625)
    console = Console(record=True, width=200)
    scale_text(ScaleReport("resnet50", 512, {}, points, tuned_reference=ref), console)
    assert "2 GPU(s) 1.62x" in console.export_text()
    f.write_text(json.dumps({"settings": {}}))  # no measurement: nothing to compare with
    assert tuned_reference(str(f), json.loads(f.read_text()), points) is None


def test_scale_reports_read_back_and_plot_with_published_figures(tmp_path: Path) -> None:
    from rich.console import Console

    from tfaccel.render import dumps
    from tfaccel.render.scale import scale_plot, scale_text
    from tfaccel.scale.runner import ScalePoint, ScaleReport, published_for, read_scale_report

    points = tuple(
        ScalePoint(n, 256 * n, 1000.0 * n * e, e, "tfaccel step", "ok")
        for n, e in ((1, 1.0), (2, 0.95), (4, 0.9), (8, 0.85))
    )
    report = ScaleReport("resnet50", 256, {"precision": "mixed_bfloat16"}, points)
    f = tmp_path / "scale.json"
    f.write_text(dumps(report, schema="tfaccel.scale/1"))
    back = read_scale_report(f)
    assert back.points == points and back.workload == "resnet50"
    assert [p.gpus for p in published_for([1, 2, 4, 8])] == [4, 4, 8]
    assert published_for([1, 2]) == []
    console = Console(record=True, width=200)
    scale_text(back, console)
    text = console.export_text()
    assert "published: 4x A100, NVLink: efficiency 82%" in text
    assert "8x A100, ResNet-50 (NVIDIA): efficiency 91%-96%" in text
    png = scale_plot([("host", back)], tmp_path / "scale.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "tfaccel.tune-journal/1"}))
    with pytest.raises(ConfigFileError, match="not a tfaccel scale report"):
        read_scale_report(bad)


def test_host_input_traffic_and_the_input_hint() -> None:
    from rich.console import Console

    from tfaccel.render.scale import scale_text
    from tfaccel.scale.runner import ScalePoint, ScaleReport

    bf16_image = 224 * 224 * 3 * 2
    points = tuple(
        ScalePoint(
            n,
            512 * n,
            rate,
            eff,
            "tfaccel step",
            "ok",
            input="host",
            input_bytes_per_sample=bf16_image,
        )
        for n, rate, eff in ((1, 6000.0, 1.0), (2, 9000.0, 0.75))
    )
    assert points[1].input_gb_s == pytest.approx(9000 * bf16_image / 1e9)
    console = Console(record=True, width=250)
    scale_text(ScaleReport("resnet50", 512, {}, points, gpu_names=("NVIDIA H200",) * 2), console)
    text = console.export_text()
    assert "2.7" in text  # GB/s at 2 GPUs
    assert "efficiency 75% at 2 GPUs" in text and "--input device" in text
    on_cpus = Console(record=True, width=250)  # --cpu-replicas: no GPU to copy to
    scale_text(ScaleReport("tiny", 512, {}, points), on_cpus)
    assert "--input device" not in on_cpus.export_text()
    device = tuple(
        ScalePoint(n, 512 * n, 6000.0 * n, 1.0, "tfaccel step", "ok", input="device")
        for n in (1, 2)
    )
    assert device[1].input_gb_s is None


def test_what_every_point_shares_is_said_once_above_the_table() -> None:
    from rich.console import Console

    from tfaccel.render.scale import scale_text
    from tfaccel.scale.runner import ScalePoint, ScaleReport

    points = tuple(
        ScalePoint(n, 512 * n, 6000.0 * n, 1.0, "tfaccel step", "ok", cross_device_ops=ops)
        for n, ops in ((1, "OneDeviceAllReduce"), (2, "NcclAllReduce"))
    )
    console = Console(record=True, width=200)
    scale_text(ScaleReport("resnet50", 512, {}, points), console)
    text = console.export_text()
    assert "engine: tfaccel step" in text and text.count("tfaccel step") == 1
    assert "NcclAllReduce" in text and "OneDeviceAllReduce" in text  # differs: a column


def test_a_failed_point_shows_its_whole_error_below_the_table() -> None:
    from rich.console import Console

    from tfaccel.render.scale import scale_text
    from tfaccel.scale.runner import ScalePoint, ScaleReport

    error = "ResourceExhaustedError: OOM when allocating tensor with shape [1024,64,112,112]"
    points = (
        ScalePoint(1, 1024, 6000.0, 1.0, "tfaccel step", "ok"),
        ScalePoint(2, 2048, None, None, "tfaccel step", "oom", error=error),
    )
    console = Console(record=True, width=80)
    scale_text(ScaleReport("resnet50", 1024, {}, points), console)
    text = console.export_text()
    assert f"! 2 GPU(s) oom: {error}" in " ".join(text.split())


def test_input_bytes_per_sample_counts_16_bit_transfers() -> None:
    pytest.importorskip("tensorflow")
    import keras

    from tfaccel.workloads.synthetic import input_bytes_per_sample

    image = keras.Input((8, 8, 3), name="image")
    ids = keras.Input((16,), dtype="int32", name="token_ids")
    model = keras.Model({"image": image, "token_ids": ids}, keras.layers.Flatten()(image))
    assert input_bytes_per_sample(model) == 8 * 8 * 3 * 4 + 16 * 4
    assert input_bytes_per_sample(model, 2) == 8 * 8 * 3 * 2 + 16 * 4


def test_scale_counts_only_the_gpus_cuda_visible_devices_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.hardware.test_inventory import TopoNvml, h200
    from tfaccel.hardware import inventory

    real = inventory.read_inventory
    nvml = TopoNvml([h200(0, peer=1), h200(1, peer=0)])
    monkeypatch.setattr(inventory, "read_inventory", lambda: real(nvml))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    result = runner.invoke(app, ["scale", "tiny", "--gpus", "2"])
    assert result.exit_code == 2
    assert "the 1 visible GPU(s) (GPU 1 NVIDIA H200)" in " ".join(result.output.split())


def test_negative_cpu_replicas_are_refused_before_any_work() -> None:
    result = runner.invoke(app, ["scale", "tiny", "--cpu-replicas", "-1"])
    assert result.exit_code == 2 and "Invalid value for '--cpu-replicas'" in unboxed(result.output)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"cluster": {"worker": [["h", 1]]}, "task": {"type": "worker", "index": 0}}, "worker[0]"),
        (
            {"cluster": {"worker": ["HOST:2222", "host:2222"]}, "task": {"type": "worker"}},
            "listed twice",
        ),
        ({"cluster": {"worker": ["h:1"]}, "task": {"type": ["worker"], "index": 0}}, "task.type"),
    ],
)
def test_a_tf_config_of_the_wrong_types_names_its_field(config: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigFileError, match=says.replace("[", r"\[")):
        validate(config)


def test_scale_checks_and_says_a_tf_config_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = {"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(bad))
    result = CliRunner().invoke(app, ["scale", "--workers", "a:1,b:1"])
    assert result.exit_code == 2 and "TF_CONFIG task.index" in unboxed(result.output)
    good = {"cluster": {"worker": ["h:1", "g:1"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(good))
    result = CliRunner().invoke(app, ["scale", "--workers", "a:1,b:1"])
    assert result.exit_code == 0, result.output
    assert "TF_CONFIG in the environment: worker 1 of a cluster of 2" in unboxed(result.output)
