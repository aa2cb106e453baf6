"""The tune command and `tfaccel.tune.run` on the CPU, with real trials: end to end, its
starting batch, its exits for models that never run or cannot load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.fakes import BROKEN, user_module

pytest.importorskip("tensorflow")

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.trial.runner import StepPlan

SMALL = StepPlan(warmup=2, windows=2, window=3)
runner = CliRunner()


@pytest.mark.slow
def test_tune_command_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = [
        "tune",
        "tiny",
        "--batch",
        "32",
        "--max-batch",
        "64",
        "--warmup",
        "2",
        "--windows",
        "2",
        "--window",
        "3",
    ]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "tfaccel.tune/1" and data["best"]["status"] == "ok"
    written = json.loads((tmp_path / "tfaccel.json").read_text())
    assert written["settings"]["batch_size"] in (32, 64)
    assert (tmp_path / "tfaccel-tune.png").stat().st_size > 1000
    journal = (tmp_path / "tfaccel-tune.jsonl").read_text().splitlines()
    lines = [x for x in journal if not json.loads(x).get("repeat")]
    assert len(lines) == len(data["trials"])
    # the baseline ran twice, a process each: how far they lie apart sets the noise; a
    # third time where the two lay more than 20 % apart (a busy 2-core machine can).
    # Other repeats are the noise rule's second runs of a gain inside that noise: both
    # trials of the comparison, each one a trial of this tune.
    repeats = [json.loads(x)["result"] for x in journal if json.loads(x).get("repeat")]
    baseline_key = data["baseline"]["key"]
    baseline_runs = len([r for r in repeats if r["key"] == baseline_key])
    assert baseline_runs in (1, 2)
    trial_keys = {trial["key"] for trial in data["trials"]}
    assert {r["key"] for r in repeats} <= trial_keys
    assert data["drift_between_trials"] >= 0.0
    said = "the baseline again" if baseline_runs == 1 else "the baseline in 3 processes"
    assert any(d["stage"] == "noise" and said in d["text"] for d in data["decisions"])
    # The baseline counted the model's FLOPs: the tiny CNN's dense layers are 8.6 % of
    # its products (its two convolutions the rest).
    from tfaccel.environment import machine_id

    assert {json.loads(x)["machine"] for x in lines} == {machine_id()}
    baseline = json.loads(lines[0])["result"]
    assert baseline["extra"]["gemm_flop_share"] == pytest.approx(0.0858, abs=1e-3)
    # The same command again resumes entirely from the journal and replaces the files
    # this tune wrote ...
    again = runner.invoke(app, [*args, "--format", "json"])
    assert again.exit_code == 0, again.output
    finished = [x for x in lines if json.loads(x)["result"]["status"] != "error"]
    assert json.loads(again.stdout)["resumed"] == len(finished)  # errors run again
    after = (tmp_path / "tfaccel-tune.jsonl").read_text().splitlines()
    assert len(after) == len(journal) + len(lines) - len(finished)  # the repeat: resumed
    # ... but not a file of the user's, nor another workload's settings, without --force.
    (tmp_path / "mine.json").write_text('{"my": "notes"}')
    refused = runner.invoke(app, [*args, "--output", "mine.json"])
    assert refused.exit_code == 2 and "mine.json already exists" in refused.output
    assert (tmp_path / "mine.json").read_text() == '{"my": "notes"}'
    other = runner.invoke(app, ["tune", "resnet50", "--output", "tfaccel.json"])
    assert other.exit_code == 2 and "tfaccel.json already exists" in other.output
    # The settings load back into configure().
    import tfaccel

    try:
        report = tfaccel.configure.from_file(tmp_path / "tfaccel.json")
        assert report.settings.batch_size == written["settings"]["batch_size"]
    finally:
        tfaccel.configure.reset()


def test_tune_keeps_an_earlier_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine-tune.png").write_bytes(b"the user's plot")
    result = runner.invoke(app, ["tune", "tiny", "--output", "mine.json"])
    assert result.exit_code == 2 and "mine-tune.png already exists" in result.output
    assert (tmp_path / "mine-tune.png").read_bytes() == b"the user's plot"
    assert not (tmp_path / "tfaccel-tune.jsonl").exists()  # refused before any trial


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tune", "tiny", "--batch", "0"], "Invalid value for '--batch'"),
        (["tune", "tiny", "--batch", "64", "--max-batch", "32"], "--max-batch is below --batch"),
        (["tune", "tiny", "--time-budget", "0"], "'--time-budget': '0' is not a duration above 0"),
        (["tune", "tiny", "--confirm", "-1"], "Invalid value for '--confirm'"),
        (["tune", "tiny", "--race", "-1"], "'--race': '-1' is not a duration above 0"),
        (["tune", "tiny", "--precisions", "fp8"], "Unknown precision in --precisions"),
        (["tune", "tiny", "--precisions", "bfloat16"], "bfloat16 (weights in bf16) is for"),
        (["tune", "tiny", "--skip", "float8,float9"], "Unknown knob in --skip"),
        (["tune", "tiny", "--skip", ","], "Unknown knob in --skip"),
        (["tune", "tiny", "--journal", "/nonexistent/j.jsonl"], "/nonexistent does not exist"),
        (["tune", "tiny", "--output", "/nonexistent/t.json"], "/nonexistent does not exist"),
    ],
)
def test_tune_bad_flags(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in unboxed(result.output)


def test_max_batch_alone_caps_the_start() -> None:
    """`--max-batch 16` without `--batch` starts at 16, not at an error about a --batch
    the user never gave."""
    from tfaccel.cli.tune import _options
    from tfaccel.tune import Target, start_batch

    options = _options(None, 16, StepPlan(), "600s", None, None, None, 0)
    started, _ = start_batch(options, Target("tiny", None))
    assert (started.batch_size, started.max_batch) == (16, 16)


def test_race_0_races_nothing() -> None:
    """`--race 0` (documented: no race, no time kept for one) is taken, not refused as
    a duration below 1 s; a duration stays a duration."""
    from tfaccel.cli.tune import _options, _race_duration

    for value, seconds in (("0", 0.0), ("0s", 0.0), ("90", 90.0), ("2m", 120.0)):
        race = _race_duration(value)
        assert _options(None, 64, StepPlan(), "600s", None, None, None, 0, race).race_s == seconds


def test_the_python_api_starts_a_script_at_its_own_batch_size(tmp_path: Path) -> None:
    """`tfaccel.tune.run([...])` decides the batch size as the command line does: the
    script's own, read by its baseline trial (here the fake runner says 128, as the
    hook says the batches its fit gets), not Keras' 32."""
    from tfaccel import tune as tune_lib
    from tfaccel.render.tune import trial_line
    from tfaccel.trial.runner import TrialResult, label_of, settings_key
    from tfaccel.tune.result import Hardware

    script = tmp_path / "train.py"
    script.write_text(
        "import keras\nmodel.compile(loss='mse', steps_per_execution=8)\n"
        "model.fit(x, y, batch_size=128, epochs=2)\n"
    )
    tgt = tune_lib.prepare(["python", str(script)])
    seen: list[int | None] = []

    extras: list[Any] = []

    def runner(subject: Any, s: Any, p: StepPlan, t: float, **kw: Any) -> TrialResult:
        seen.append(s.batch_size)
        extras.append(kw.get("extra"))
        key = settings_key(subject.name, s, p)
        own = {"own_batch": 128} if s.batch_size is None else {}
        return TrialResult(
            key, label_of(s), s.to_dict(), "ok", 100.0, 0.0, (100.0, 100.0), extra=own
        )

    target = dataclasses.replace(tgt, fingerprint=None, runner=runner)
    out = tune_lib.Outputs(tmp_path / "t.json", tmp_path / "t.png", tmp_path / "t.jsonl")
    options = tune_lib.TuneOptions(steps=StepPlan(1, 1, 1), max_batch=128)
    lines: list[str] = []

    def live(stage: str, r: TrialResult | None, s: Any) -> None:
        if r is not None:
            lines.append(trial_line(stage, r).plain)

    res = tune_lib.run(target, options, out, hw=Hardware(0, None), on_trial=live)
    # the baseline and its repeat (the drift between trials) ask for the script's own
    assert seen[:2] == [None, None] and seen[2:] and set(seen[2:]) == {128}
    assert res.best_settings is not None
    assert res.best_settings.batch_size == 128
    # what was read of the script before the trials heads the report's decisions
    assert res.decisions[0].stage == "script"
    assert res.decisions[0].text.startswith("train.py compiles with steps_per_execution=8")
    # ... and the script as written is measured beside the baseline: a reference (its
    # own steps_per_execution kept), in the trials, the text and the JSON, never the answer
    written = res.as_written
    assert written is not None and written.label == "your script as written (steps_per_execution=8)"
    assert written in res.trials and res.best is not written
    assert extras.count({"as_written": True}) == 1
    # its live line names what it kept, not Keras' defaults' settings it started from
    (live_line,) = [x for x in lines if x.startswith("as written")]
    assert "your script as written (steps_per_execution=8)" in live_line
    from tfaccel.render.tune import tune_text
    from tfaccel.tune.output import result_json

    console = Console(record=True, width=200)
    tune_text(res, console)
    assert "1.00x your script as written (steps_per_execution=8) (100/s)" in (console.export_text())
    assert json.loads(result_json(res))["speedup_over_as_written"] == 1.0


@pytest.mark.parametrize(
    ("compile_args", "gpus", "measured"),
    [
        ("jit_compile=False", 0, False),  # keras-io's reproducibility recipe, on a CPU
        ("jit_compile='auto', steps_per_execution=1", 0, False),
        ("jit_compile=True", 0, True),  # XLA on a CPU: not the baseline
        ("jit_compile=False, steps_per_execution=spe", 0, True),  # a value not read
        ("jit_compile=False", 1, True),  # on a GPU Keras' defaults are TF32
    ],
)
def test_a_script_as_written_that_is_the_baseline_is_measured_once(
    tmp_path: Path, compile_args: str, gpus: int, measured: bool
) -> None:
    """On a machine without a GPU, a script whose own compile arguments resolve to the
    baseline's settings (jit_compile False or 'auto': no XLA there) is the baseline:
    its "as written" trial would measure the same configuration a third time, and its
    noise had read as "1.22x your script as written" on the 2-core CPU. It is measured
    once and said; any other choice of its own is measured as written."""
    from tfaccel import tune as tune_lib
    from tfaccel.trial.runner import TrialResult, label_of, settings_key
    from tfaccel.tune.result import Hardware

    script = tmp_path / "train.py"
    script.write_text(f"import keras\nmodel.compile(loss='mse', {compile_args})\nmodel.fit(x, y)\n")
    tgt = tune_lib.prepare(["python", str(script)])
    extras: list[Any] = []

    def runner(subject: Any, s: Any, p: StepPlan, t: float, **kw: Any) -> TrialResult:
        extras.append(kw.get("extra"))
        own = {"own_batch": 32} if s.batch_size is None else {}
        key = settings_key(subject.name, s, p, kw.get("extra"))
        return TrialResult(key, label_of(s), s.to_dict(), "ok", 100.0, 0.0, (100.0,), extra=own)

    target = dataclasses.replace(tgt, fingerprint=None, runner=runner)
    out = tune_lib.Outputs(tmp_path / "t.json", tmp_path / "t.png", tmp_path / "t.jsonl")
    options = tune_lib.TuneOptions(steps=StepPlan(1, 1, 1), max_batch=32)
    hw = Hardware(gpus, "9.0" if gpus else None)
    res = tune_lib.run(target, options, out, hw=hw)
    assert (extras.count({"as_written": True}) == 1) is measured
    assert (res.as_written is not None) is measured
    said = [d.text for d in res.decisions if d.stage == "as written"]
    if not measured:
        assert said == [
            f"the script's own {compile_args} is the baseline's setting on a machine without "
            "a GPU (no XLA there, float32): measured once, as the baseline"
        ]


@pytest.mark.parametrize("missing", ["keras", "tensorflow"])
def test_a_python_without_keras_or_tensorflow_is_refused_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """A PYTHONPATH that hides Keras (seen on a GPU machine): each trial would fail at
    `import keras` and the tune end with exit 5; refused first, with exit 3."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else find_spec(name)
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["tune", "tiny"])
    assert result.exit_code == 3, result.output
    assert f"{missing} is not importable by this Python" in unboxed(result.output)
    assert "baseline" not in result.output and not (tmp_path / "tfaccel.json").exists()


def test_tune_of_a_model_that_never_runs_exits_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_module(tmp_path, monkeypatch, "broken_models", BROKEN)
    result = runner.invoke(
        app,
        [
            "tune",
            "broken_models:crashes_in_fit",
            "--warmup",
            "1",
            "--windows",
            "1",
            "--window",
            "1",
            "--max-batch",
            "32",
        ],
    )
    assert result.exit_code == 5, result.output
    assert "the loss broke" in result.output and not (tmp_path / "tfaccel.json").exists()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("resnet5O", "did you mean resnet50?"),
        ("broken_models:unknown_loss", "Unknown loss 'no_such_loss'"),
        ("broken_models:raises", "JSONDecodeError"),
        ("broken_models:nothing_here", "has no callable 'nothing_here'"),
        ("no_such_module:build", "Cannot import module 'no_such_module'"),
    ],
)
def test_a_bad_entry_point_exits_2_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    user_module(tmp_path, monkeypatch, "broken_models", BROKEN)
    result = runner.invoke(app, ["tune", target])
    assert result.exit_code == 2, result.output
    assert message in result.output
    if target.endswith(":raises"):  # the user's own traceback, where their code raised
        assert 'broken_models.py", line' in result.output and "tfaccel/" not in result.output
    assert not (tmp_path / "tfaccel-tune.jsonl").exists()  # no journal: nothing ran


BATCHES_OF_24 = """
import numpy as np
import keras
import tensorflow as tf

def build():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    x, y = np.ones((24, 8), "float32"), np.zeros(24, "int32")
    return model, tf.data.Dataset.from_tensors((x, y)).repeat()
"""


def test_an_entry_point_is_tuned_from_the_size_of_its_own_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keras' defaults are measured at the batch the user's data comes in."""
    user_module(tmp_path, monkeypatch, "batches_of_24", BATCHES_OF_24)
    steps = ["--warmup", "1", "--windows", "1", "--window", "2", "--time-budget", "1s"]
    result = runner.invoke(app, ["tune", "batches_of_24:build", *steps, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "starting at its data's batch size, 24" in result.stderr
    trials = json.loads(result.stdout)["trials"]
    assert trials and trials[0]["settings"]["batch_size"] == 24


def test_tune_counts_only_the_gpus_its_trials_see(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfaccel.hardware.nvml import DriverInfo, GpuBrief
    from tfaccel.tune import hardware_of

    two = DriverInfo(
        True,
        None,
        "580.159.04",
        "13.0",
        (
            GpuBrief(0, "NVIDIA H200", "GPU-a", "9.0", 143771),
            GpuBrief(1, "NVIDIA H200", "GPU-b", "9.0", 143771),
        ),
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert hardware_of(two).gpus == 1  # so the 1-GPU knobs (device prefetch) are tried
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert hardware_of(two).gpus == 2


def test_a_script_that_runs_eagerly_is_measured_in_graph_mode_beside_it(tmp_path: Path) -> None:
    """Its baseline says its steps run eagerly (`run_eagerly=True`): the baseline runs
    once more in graph mode, a reference said with its gain in the decisions, the text
    and the JSON, never the answer; the XLA trials are not run (Keras turns XLA off
    under eager steps)."""
    from tfaccel import tune as tune_lib
    from tfaccel.render.tune import tune_text
    from tfaccel.trial.runner import TrialResult, label_of, settings_key
    from tfaccel.tune.output import result_json
    from tfaccel.tune.result import Hardware

    script = tmp_path / "train.py"
    script.write_text("import keras\nmodel.fit(x, y)\n")
    tgt = tune_lib.prepare(["python", str(script)])
    asked: list[tuple[str, Any]] = []

    def runner(subject: Any, s: Any, p: StepPlan, t: float, **kw: Any) -> TrialResult:
        extra = kw.get("extra")
        asked.append((s.xla, extra))
        graph = bool(extra and extra.get("graph"))
        facts = {"own_batch": 64, "eager": None if graph else "compile(run_eagerly=True)"}
        rate = 400.0 if graph else 100.0
        # graph mode's first run still warms up: measured again, and said by its name
        windows = (300.0, 350.0, 400.0) if graph and p.warmup == 1 else (rate, rate)
        return TrialResult(
            settings_key(subject.name, s, p, extra), label_of(s), s.to_dict(), "ok", rate,
            0.0, windows, extra=facts,
        )  # fmt: skip

    target = dataclasses.replace(tgt, fingerprint=None, runner=runner)
    out = tune_lib.Outputs(tmp_path / "t.json", tmp_path / "t.png", tmp_path / "t.jsonl")
    options = tune_lib.TuneOptions(steps=StepPlan(1, 1, 1), max_batch=64)
    res = tune_lib.run(target, options, out, hw=Hardware(1, "9.0"))
    assert [extra for _, extra in asked].count({"graph": True}) == 2
    assert (
        "the baseline in graph mode (run_eagerly=False): its windows still rose (400/s "
        "median): measured again with a warm-up of 2 steps"
    ) in [d.text for d in res.decisions if d.stage == "noise"]
    assert all(xla != "jit" for xla, _ in asked)  # no XLA trial: Keras would not run one
    assert res.graph_mode is not None and res.graph_mode_gain == 4.0
    assert res.best is not res.graph_mode and res.best_settings is not None
    said = {d.stage: d.text for d in res.decisions}
    assert said["graph mode"].startswith(
        "the script's compile(run_eagerly=True) runs each step as Python, without tf.function"
    )
    assert "in graph mode the baseline ran 4.0x (400/s): remove it where" in said["graph mode"]
    xla = [d.text for d in res.decisions if d.stage == "precision x XLA"]
    assert (
        "under XLA: not tried: Keras runs this model without XLA: the script's "
        "compile(run_eagerly=True) runs its steps as Python, and Keras turns jit_compile off "
        "under it"
    ) in xla
    console = Console(record=True, width=200)
    tune_text(res, console)
    assert "your script runs its steps eagerly: in graph mode its baseline ran 4.0x" in (
        console.export_text()
    )
    assert json.loads(result_json(res))["graph_mode_speedup_over_baseline"] == 4.0
    # in the plot a grey bar, said to be a reference, not a faster answer passed over
    from tfaccel.render.tune import tune_figure

    ax = tune_figure(res).axes[0]
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    bar = ax.patches[labels.index("the baseline in graph mode (run_eagerly=False)")]
    assert bar.get_facecolor()[:3] == pytest.approx((0.6, 0.6, 0.6))
    assert " a reference: not applied" in [t.get_text() for t in ax.texts]
    assert "grey: a reference (your script as written, in graph mode, or without op" in (
        ax.get_xlabel()
    )


def test_a_script_under_op_determinism_is_told_what_it_costs(tmp_path: Path) -> None:
    """Its baseline says the script turns on op determinism (Keras then withholds XLA):
    Keras' defaults run once more with the script's call left out, a reference said with
    its gain in the decisions, the text and the JSON, drawn grey, never the answer."""
    from tfaccel import tune as tune_lib
    from tfaccel.render.tune import tune_figure, tune_text
    from tfaccel.trial.runner import TrialResult, label_of, settings_key
    from tfaccel.tune.output import result_json
    from tfaccel.tune.result import Hardware
    from tfaccel.tune.stages.references import determinism_note

    script = tmp_path / "train.py"
    script.write_text("import keras\nmodel.fit(x, y)\n")
    tgt = tune_lib.prepare(["python", str(script)])
    turned = "the script's tf.config.experimental.enable_op_determinism()"
    asked: list[Any] = []

    def runner(subject: Any, s: Any, p: StepPlan, t: float, **kw: Any) -> TrialResult:
        extra = kw.get("extra")
        asked.append(extra)
        free = bool(extra and extra.get("nondeterministic"))
        facts = {"own_batch": 64, "determinism": None if free else turned}
        rate = 170.0 if free else 100.0
        return TrialResult(
            settings_key(subject.name, s, p, extra), label_of(s), s.to_dict(), "ok", rate,
            0.0, (rate, rate), extra=facts,
        )  # fmt: skip

    target = dataclasses.replace(tgt, fingerprint=None, runner=runner)
    out = tune_lib.Outputs(tmp_path / "t.json", tmp_path / "t.png", tmp_path / "t.jsonl")
    options = tune_lib.TuneOptions(steps=StepPlan(1, 1, 1), max_batch=64)
    res = tune_lib.run(target, options, out, hw=Hardware(1, "9.0"))
    assert asked.count({"nondeterministic": True}) == 1
    assert res.without_determinism_gain == pytest.approx(1.7)
    assert res.best is not res.without_determinism and res.best is not None
    assert res.best.samples_per_s == 100.0
    said = {d.stage: d.text for d in res.decisions}
    assert said["determinism"] == (
        f"TensorFlow's op determinism is on ({turned}), and Keras compiles no model with "
        "XLA under it; cuDNN takes its deterministic algorithms; kept in every trial and "
        "under tfaccel run; without it Keras' defaults ran 1.70x (170/s): where you need no "
        "bit-for-bit reproducibility, remove it and tune again"
    )
    console = Console(record=True, width=200)
    tune_text(res, console)
    assert "your script turns on op determinism: without it Keras' defaults ran 1.70x" in (
        console.export_text()
    )
    doc = json.loads(result_json(res))
    assert doc["without_determinism_speedup_over_keras_defaults"] == pytest.approx(1.7)
    ax = tune_figure(res).axes[0]
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    bar = ax.patches[labels.index("Keras' defaults without op determinism")]
    assert bar.get_facecolor()[:3] == pytest.approx((0.6, 0.6, 0.6))
    # a gain within the noise is said to be within it
    res.without_determinism = dataclasses.replace(res.without_determinism, samples_per_s=102.0)
    assert determinism_note(turned, res, 0.05).endswith(
        "without it Keras' defaults ran 1.02x (102/s), within the noise (5%): it costs this "
        "model nothing measurable here"
    )
    res.without_determinism = dataclasses.replace(res.without_determinism, samples_per_s=80.0)
    assert ", slower beyond the noise (5%): it costs this model nothing" in determinism_note(
        turned, res, 0.05
    )


@pytest.mark.parametrize(
    ("fact", "stayed", "reference", "said"),
    [
        (  # the graph mode: a switch made in a way the hook does not leave out
            "eager",
            "tf.config.run_functions_eagerly(True)",
            "graph_mode",
            "its steps stayed eager when asked for graph mode, so it was not measured",
        ),
        (  # op determinism from the environment, which the hook does not turn off
            "determinism",
            "TF_DETERMINISTIC_OPS in the environment",
            "without_determinism",
            "it stayed on when left out (TF_DETERMINISTIC_OPS in the environment): not measured",
        ),
    ],
)
def test_a_reference_whose_switch_stayed_on_is_said_and_gives_no_gain(
    fact: str, stayed: str, reference: str, said: str
) -> None:
    """Where the script's switch stayed on in its reference run (graph mode, or
    without op determinism), the reference ran as the trials did: no gain is said of
    it, and why."""
    from tfaccel.trial.runner import TrialResult
    from tfaccel.tune.result import Hardware, TuneResult
    from tfaccel.tune.stages.references import determinism_note, graph_note

    on = {fact: stayed}
    base = TrialResult("b", "base", {}, "ok", 100.0, 0.0, (100.0,), extra=on)
    ref = TrialResult("g", "ref", {}, "ok", 101.0, 0.0, (101.0,), extra=on)
    res = TuneResult("w", Hardware(1, "9.0"), baseline=base, keras_defaults=base)
    setattr(res, reference, ref)
    gain = f"{reference}_gain"
    assert getattr(res, gain) is None
    note = graph_note if fact == "eager" else determinism_note
    assert note(stayed, res).endswith(said)
    setattr(res, reference, dataclasses.replace(ref, samples_per_s=300.0, extra={fact: None}))
    assert getattr(res, gain) == 3.0
