"""The same-training stages after the references: precisions with and without XLA, arrays
in GPU memory, steps_per_execution and input transfers, XLA's GEMM options, the late
knobs, and those that fell short together."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

import pytest

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import Hardware, TuneOptions
from tfaccel.tune.search import Tuner

from .fakes import (
    H200,
    STEPS,
    FakeTrials,
    NoXlaModel,
    XlaDefaults,
    XlaWins,
    later,
    said,
    same,
    tuner,
    tuner_base,
)


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        # 25 slower beyond the noise: 10 is tried, and kept
        ({25: 0.9, 10: 1.2}, ["25: -10% (threshold 3%)", "10: +20% kept"]),
        # 25 failed: 10 is tried
        ({25: None, 10: 1.2}, ["25: error (boom)", "10: +20% kept"]),
        # 25 within the noise: the stage ends, and says why 10 was not tried
        (
            {25: 1.01, 10: 1.2},
            [
                "25: +1% (threshold 3%)",
                "10: not tried: 25 gained nothing beyond the noise, and a shorter "
                "execution saves less of the same host time",
            ],
        ),
    ],
)
def test_steps_per_execution_tries_a_shorter_one_only_after_a_slower_longer_one(
    tmp_path: Path, rates: dict[int, float | None], expected: list[str]
) -> None:
    base = FakeTrials()

    def trials(w: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = base(w, s, steps, timeout)
        spe = s.steps_per_execution
        if spe == 1:
            return r
        if rates[spe] is None:
            return dataclasses.replace(r, status="error", samples_per_s=None, error="boom")
        rate = (r.samples_per_s or 0) / 1.2 * rates[spe]  # type: ignore[operator]
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))

    res = tuner(tmp_path, trials, skip=("input_cast",)).run()  # type: ignore[arg-type]
    assert said(res, "steps_per_execution") == expected
    tried = [s.steps_per_execution for s in base.calls if s.steps_per_execution > 1]
    assert tried[0] == 25 and (10 in tried) == (rates[25] != 1.01)


def test_input_cast_is_tried_on_the_gpu_with_16_bit_and_float_inputs_only(
    tmp_path: Path,
) -> None:
    fake = FakeTrials()
    res = tuner(tmp_path, fake, skip=("steps_per_execution",)).run()
    assert res.best_settings is not None and res.best_settings.input_cast == "compute"
    assert said(res, "input_cast") == ["compute: +10% kept"]
    fp32 = FakeTrials()
    (tmp_path / "fp32").mkdir()
    tuner(tmp_path / "fp32", fp32, Hardware(1, "6.0")).run()
    assert all(s.input_cast == "off" for s in fp32.calls)
    tokens = FakeTrials(extra={"float_inputs": False})  # a model of token ids
    (tmp_path / "tokens").mkdir()
    res = tuner(tmp_path / "tokens", tokens).run()
    assert all(s.input_cast == "off" for s in tokens.calls)
    assert said(res, "input_cast") == [
        "not tried: the model's inputs are all integers (token ids, say), which "
        "input_cast leaves as they are"
    ]
    assert said(res, "steps_per_execution") == ["25: +20% kept"]  # alone


def test_a_script_feeding_fit_numpy_arrays_gets_no_tf_data_trials(tmp_path: Path) -> None:
    """`tfaccel run` passes a script's arrays to fit as they are: input_cast and device
    prefetch, which act on a tf.data pipeline, would measure what it cannot apply."""
    arrays = FakeTrials(extra={"fit_data": "arrays"})
    res = tuner(tmp_path, arrays).run()
    assert all(s.input_cast == "off" and s.prefetch == "auto" for s in arrays.calls)
    why = (
        "not tried: the script gives fit numpy arrays, which tfaccel run passes as they "
        "are (tf.data settings act on a tf.data.Dataset)"
    )
    assert said(res, "input_cast") == [why]
    assert said(res, "prefetch") == [why]
    assert said(res, "allocator") == ["cuda_malloc_async: +0% (threshold 3%)"]  # alone
    pipeline = FakeTrials(extra={"fit_data": "dataset"})
    (tmp_path / "pipeline").mkdir()
    tuner(tmp_path / "pipeline", pipeline).run()
    assert any(s.input_cast == "compute" for s in pipeline.calls)


@pytest.mark.parametrize("kind", ["train_on_batch", "train_step"])
def test_a_loop_of_its_own_gets_no_steps_per_execution_or_data_trials(
    tmp_path: Path, kind: str
) -> None:
    """A script's own loop hands each batch to train_on_batch (`script.loop`) or to a
    training step of its own (`script.tape`), one step a call: neither
    steps_per_execution nor a tf.data setting could act on it, so none is tried, each
    said; nor is a batch change, for want of a race; nor, for a step of its own, XLA
    (its tf.function's own)."""
    from tfaccel.script.loop import LOOP_FACTS
    from tfaccel.script.tape import TAPE_FACTS

    facts = LOOP_FACTS if kind == "train_on_batch" else TAPE_FACTS
    loop = FakeTrials(extra=dict(facts))
    res = tuner(tmp_path, loop).run()
    assert all(s.steps_per_execution == 1 and s.input_cast == "off" for s in loop.calls)
    assert all(s.prefetch == "auto" and not s.device_arrays for s in loop.calls)
    assert said(res, "steps_per_execution") == [f"not tried: {facts['spe_blocker']}"]
    to = "train_on_batch" if kind == "train_on_batch" else "its own training step"
    why = (
        f"not tried: the script hands each batch to {to} itself (tf.data settings act "
        "on a tf.data.Dataset that fit reads)"
    )
    assert said(res, "input_cast") == [why]
    assert said(res, "prefetch") == [why]
    assert res.batch_note and res.batch_note.startswith(facts["no_race"])
    assert all(s.batch_size in (None, loop.calls[0].batch_size) for s in loop.calls)
    xla_tried = any(s.xla == "jit" for s in loop.calls)
    assert xla_tried == (kind == "train_on_batch")
    if kind == "train_step":
        assert f"under XLA: not tried: {facts['xla_blocker']}" in said(res, "precision x XLA")
        assert any(s.precision == "mixed_bfloat16" for s in loop.calls)  # without XLA


def test_a_scripts_arrays_are_tried_in_gpu_memory_before_steps_per_execution(
    tmp_path: Path,
) -> None:
    """Numpy arrays given to fit: one trial keeps them in GPU memory (the same batches),
    kept where it pays, before steps_per_execution; arrays too large are said, untried."""
    base = FakeTrials(extra={"fit_data": "arrays"})

    def trials(w: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = base(w, s, steps, timeout)
        if s.device_arrays:
            r = dataclasses.replace(r, samples_per_s=(r.samples_per_s or 0) * 1.3)
        return r

    res = tuner(tmp_path, trials).run()
    assert said(res, "device_arrays") == ["on: +30% kept"]
    first = next(i for i, s in enumerate(base.calls) if s.device_arrays)
    assert all(s.steps_per_execution == 1 for s in base.calls[: first + 1])
    assert res.best_settings is not None and res.best_settings.device_arrays
    big = FakeTrials(extra={"fit_data": "arrays", "device_arrays_blocker": "too large"})
    (tmp_path / "big").mkdir()
    res = tuner(tmp_path / "big", big).run()
    assert said(res, "device_arrays") == ["not tried: too large"]
    assert not any(s.device_arrays for s in big.calls)


@pytest.mark.parametrize(
    ("spe", "cast", "alone"),
    [
        # the pair slower beyond the noise: each alone finds the one that pays
        (0.8, 1.1, ["25: -20% (threshold 3%)", "10: -20% (threshold 3%)"]),
        # the pair within the noise: decided, neither alone is tried
        (1.0, 1.0, []),
    ],
)
def test_steps_per_execution_and_input_cast_share_a_trial(
    tmp_path: Path, spe: float, cast: float, alone: list[str]
) -> None:
    base = FakeTrials()

    def trials(w: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = base(w, s, steps, timeout)
        rate = (r.samples_per_s or 0) / (1.2 if s.steps_per_execution > 1 else 1.0)
        rate /= 1.1 if s.input_cast == "compute" else 1.0
        rate *= (spe if s.steps_per_execution > 1 else 1.0) * (
            cast if s.input_cast == "compute" else 1.0
        )
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))

    res = tuner(tmp_path, trials).run()  # type: ignore[arg-type]
    (pair, *rest) = said(res, "steps_per_execution + input_cast")
    assert pair.startswith("spe=25, input_cast=compute, together: ")
    assert said(res, "steps_per_execution") == alone
    if alone:
        assert said(res, "input_cast") == ["compute: +10% kept"]
        assert res.best_settings is not None and res.best_settings.input_cast == "compute"
        assert res.best_settings.steps_per_execution == 1
    else:
        assert rest == [
            "each alone not tried: together they gained nothing beyond the noise, and "
            "neither has run slower beyond it in any tune measured"
        ]
        assert said(res, "input_cast") == []


def test_no_16_bit_trials_without_tensor_cores(tmp_path: Path) -> None:
    fake = FakeTrials()
    tuner(tmp_path, fake, Hardware(1, "6.0")).run()
    assert {s.precision for s in fake.calls} == {"float32"}
    fake_cpu = FakeTrials()
    (tmp_path / "cpu").mkdir()
    tuner(tmp_path / "cpu", fake_cpu, Hardware(0, None)).run()
    assert {s.precision for s in fake_cpu.calls} == {"float32"}
    assert not any(s.allocator != "default" for s in fake_cpu.calls)  # no GPU-only knobs
    (tmp_path / "asked").mkdir()  # asked for bf16 on the CPU: said why it was not tried
    res = tuner(tmp_path / "asked", FakeTrials(), Hardware(0, None), ("mixed_bfloat16",)).run()
    precision_notes = said(res, "precision x XLA")
    assert (
        precision_notes[0]
        == "asked for but not tried: mixed_bfloat16: slower on the CPU, not faster"
    )


@pytest.mark.parametrize(("slower", "tried"), [(1.0, True), (8.6, False)])
def test_the_runtime_knobs_are_left_out_where_a_step_is_long(
    tmp_path: Path, slower: float, tried: bool
) -> None:
    """They save host time per step, at most 2 ms (twice the most measured): on the
    best's steps of 9 ms that may beat the 3 % floor; on steps of 75 ms it cannot."""
    base = FakeTrials()

    def trials(w: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = base(w, s, steps, timeout)
        rate = (r.samples_per_s or 0) / slower
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))

    res = tuner(tmp_path, trials).run()  # type: ignore[arg-type]
    runtime = [s for s in base.calls if s.allocator != "default" or s.prefetch != "auto"]
    assert bool(runtime) == tried
    if not tried:
        why = (
            "not tried: a step takes 75 ms, and this knob saves host time per step, at "
            "most 2 ms: under the 3% noise floor"
        )
        assert said(res, "allocator") == said(res, "prefetch") == [why]


def test_the_runtime_knobs_share_one_trial(tmp_path: Path) -> None:
    """The allocator and device prefetch, in one trial; alone where the other does not
    apply (two GPUs: no device prefetch) or is skipped."""
    fake = FakeTrials()
    res = tuner(tmp_path, fake).run()
    both = [s for s in fake.calls if s.allocator != "default" or s.prefetch != "auto"]
    assert len(both) == 1
    assert (both[0].allocator, both[0].prefetch) == ("cuda_malloc_async", "device")
    (said_both,) = said(res, "allocator + prefetch")
    assert said_both.startswith("cuda_malloc_async, prefetch=device, together: +0%")
    two = FakeTrials()
    (tmp_path / "two").mkdir()
    tuner(tmp_path / "two", two, Hardware(2, "9.0")).run()
    alone = [s for s in two.calls if s.allocator != "default" or s.prefetch != "auto"]
    assert [(s.allocator, s.prefetch) for s in alone] == [("cuda_malloc_async", "auto")]
    skip = FakeTrials()
    j = Journal(tmp_path / "skip.jsonl")
    j.load("w")
    opts = TuneOptions(batch_size=64, steps=STEPS, skip=("allocator",))
    res = Tuner("w", H200, opts, j, trial_fn=skip).run()
    alone = [s for s in skip.calls if s.allocator != "default" or s.prefetch != "auto"]
    assert [(s.allocator, s.prefetch) for s in alone] == [("default", "device")]
    assert said(res, "allocator") == ["not tried: --skip"]


def test_default_precisions_leave_float16_out_where_bfloat16_runs(tmp_path: Path) -> None:
    fake = FakeTrials()
    res = tuner(tmp_path, fake).run()
    tried = {(s.precision, s.xla) for s in fake.calls}
    assert ("mixed_float16", "off") not in tried and ("mixed_float16", "jit") not in tried
    assert ("float32", "jit") not in tried  # TF32 stands for float32 under XLA
    assert {("tf32", "off"), ("mixed_bfloat16", "off"), ("mixed_bfloat16", "jit")} <= tried
    assert any("not tried: mixed_float16" in d.text for d in res.decisions)
    volta = FakeTrials()
    (tmp_path / "v").mkdir()
    tuner(tmp_path / "v", volta, Hardware(1, "7.0")).run()
    assert "mixed_float16" in {s.precision for s in volta.calls}


@pytest.mark.parametrize(("share", "tried"), [(None, True), (0.9, True), (0.0005, False)])
def test_cublaslt_is_tried_unless_the_model_is_convolutions(
    tmp_path: Path, share: float | None, tried: bool
) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    trials = FakeTrials(gemm_share=share)
    t = Tuner("w", H200, TuneOptions(batch_size=64, steps=STEPS), j, trial_fn=trials)
    t.run()
    assert any(s.xla_options == ("cublaslt",) for s in trials.calls) is tried
    notes = said(t.result, "xla_options")
    if not tried:
        assert notes and "matrix products are 0% of the forward pass's FLOPs" in notes[0]


class GuardedKnobTrials(FakeTrials):
    """A knob that changes the arithmetic: its trials (`applies`) `gain` faster, or,
    with `nan`, their losses diverge instead."""

    gain = 1.0

    def __init__(self, nan: bool = False) -> None:
        super().__init__()
        self.nan = nan

    def applies(self, s: Settings) -> bool:
        raise NotImplementedError

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if not self.applies(s):
            return r
        if self.nan:
            return dataclasses.replace(r, losses=(6.9, float("nan"), float("nan")))
        rate = (r.samples_per_s or 0) * self.gain
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


class LayerNormTrials(GuardedKnobTrials):
    """cuDNN's layer norms 10 % faster; with `nan`, their losses diverge instead."""

    gain = 1.1

    def applies(self, s: Settings) -> bool:
        return "cudnn_layer_norm" in s.xla_options


@pytest.mark.parametrize("nan", [False, True])
def test_cudnn_layer_norm_is_tried_on_hopper_behind_the_accuracy_guard(
    tmp_path: Path, nan: bool
) -> None:
    trials = LayerNormTrials(nan)
    res = tuner(tmp_path, trials).run()
    tried = [s for s in same(trials.calls) if "cudnn_layer_norm" in s.xla_options]
    # one trial of its own; once kept, the later knobs' trials carry it
    assert tried and tried[0].precision == "mixed_bfloat16" and (len(tried) == 1) is nan
    assert ("cudnn_layer_norm" in res.best_settings.xla_options) is not nan
    guard = said(res, "accuracy guard")
    notes = said(res, "xla_options")
    if nan:
        assert any("cudnn_layer_norm" in t and "NaN" in t for t in guard)
    else:
        assert "cudnn_layer_norm: +10% kept" in notes
    # Ampere: no trial of it
    ampere = LayerNormTrials()
    (tmp_path / "a").mkdir()
    tuner(tmp_path / "a", ampere, hw=Hardware(1, "8.0")).run()
    assert not any("cudnn_layer_norm" in s.xla_options for s in ampere.calls)


class NearMissTrials(FakeTrials):
    """cuBLASLt and cuDNN's layer norms each 2 % faster, under the 3 % threshold; with
    `additive=False` the two gains are the same one and do not add up."""

    def __init__(self, additive: bool = True, diverge: bool = False, each: float = 1.02) -> None:
        super().__init__()
        self.additive = additive
        self.diverge = diverge
        self.each = each

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        knobs = sum(k in s.xla_options for k in ("cublaslt", "cudnn_layer_norm"))
        if not knobs:
            return r
        rate = (r.samples_per_s or 0) * (self.each**knobs if self.additive else self.each)
        r = dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate), spread=0.0)
        if self.diverge and knobs == 2:
            r = dataclasses.replace(r, losses=(6.9, 9.0, 12.0))
        return r


@pytest.mark.parametrize(
    ("additive", "diverge", "kept"),
    [(True, False, True), (False, False, False), (True, True, False)],
)
def test_knobs_that_each_fall_short_are_tried_together(
    tmp_path: Path, additive: bool, diverge: bool, kept: bool
) -> None:
    trials = NearMissTrials(additive, diverge)
    res = tuner(tmp_path, trials).run()
    both = [s for s in same(trials.calls) if set(s.xla_options) == {"cublaslt", "cudnn_layer_norm"}]
    assert len(both) == 1  # one trial of the two together, after the others
    assert same(trials.calls)[-1] == both[0]
    assert (res.best_settings == both[0]) is kept
    notes = said(res, "together")
    if diverge:
        guard = said(res, "accuracy guard")
        assert any("cublaslt,cudnn_layer_norm" in t and "rejected" in t for t in guard)
        assert not notes
    else:
        assert len(notes) == 1 and "xla_options=cublaslt (+2.0%)" in notes[0]
        assert notes[0].endswith("+4.0% kept" if kept else "+2.0% (threshold 3%)")
    # each alone was not kept
    for d in res.decisions:
        if d.stage == "xla_options":
            assert "kept" not in d.text


@pytest.mark.parametrize(("each", "together"), [(1.007, True), (1.003, False)])
def test_a_near_miss_is_a_gain_beyond_half_a_percent_and_the_spread(
    tmp_path: Path, each: float, together: bool
) -> None:
    """Gains of 0.7 % (steps_per_execution 25 on BERT) are candidates for the trial
    together; gains of 0.3 % are not told apart from nothing."""
    trials = NearMissTrials(each=each)
    res = tuner(tmp_path, trials).run()
    both = [s for s in trials.calls if set(s.xla_options) == {"cublaslt", "cudnn_layer_norm"}]
    assert bool(both) is together
    assert not res.best_settings or not res.best_settings.xla_options  # +1.4 %: not kept


def test_a_single_near_miss_is_not_tried_again(tmp_path: Path) -> None:
    class OneNearMiss(FakeTrials):
        def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
            r = super().__call__(w, s, st, t)
            if "cublaslt" in s.xla_options:
                rate = (r.samples_per_s or 0) * 1.02
                r = dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate), spread=0.0)
            return r

    trials = OneNearMiss()
    res = tuner(tmp_path, trials).run()
    assert not [d for d in res.decisions if d.stage == "together"]
    assert sum("cublaslt" in s.xla_options for s in trials.calls) == 1


class DropoutTrials(FakeTrials):
    """Dropout's masks: mask_once +2 % (Keras' numbers), philox16 +10 % (another
    stream: its losses move by `drift`); `layers` is what the baseline reports."""

    def __init__(self, drift: float = 0.0, layers: int | None = 37, lt: float = 1.0) -> None:
        super().__init__()
        self.drift, self.layers, self.lt = drift, layers, lt

    def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        r = super().__call__(w, s, st, t)
        gain = {"keras": 1.0, "mask_once": 1.02, "philox16": 1.10}[s.dropout]
        gain *= self.lt if "cublaslt" in s.xla_options else 1.0
        rate = (r.samples_per_s or 0) * gain
        losses = r.losses
        if s.dropout == "philox16":
            losses = tuple(x * (1 + self.drift) for x in losses)
        extra = {**r.extra, "dropout_layers": self.layers} if s.xla == "off" else r.extra
        return dataclasses.replace(
            r, samples_per_s=rate, windows=(rate, rate), losses=losses, extra=extra
        )


@pytest.mark.parametrize(("drift", "kept"), [(0.01, "philox16"), (0.5, "keras")])
def test_dropout_masks_are_tried_under_xla_behind_the_guard(
    tmp_path: Path, drift: float, kept: str
) -> None:
    trials = DropoutTrials(drift)
    res = tuner(tmp_path, trials).run()
    tried = [
        s
        for s in same(trials.calls)
        if s.dropout != "keras" and not s.float8 and s.attention == "keras" and not later(s)
    ]
    assert all(s.xla == "jit" and s.precision == "mixed_bfloat16" for s in tried)
    assert res.best_settings is not None and res.best_settings.dropout == kept
    notes = said(res, "dropout")
    if kept == "philox16":
        # Keras' masks computed once save a part of what philox16 saves: not tried
        assert [s.dropout for s in tried] == ["philox16"]
        assert notes == ["philox16: +10% kept"]
    else:
        assert [s.dropout for s in tried] == ["philox16", "mask_once"]
        guard = said(res, "accuracy guard")
        assert any("dropout=philox16" in g and "rejected" in g for g in guard)
        assert notes == ["mask_once: +2% (threshold 3%)"]


def test_dropout_masks_are_not_tried_on_a_model_without_dropout(tmp_path: Path) -> None:
    trials = DropoutTrials(layers=0)
    res = tuner(tmp_path, trials).run()
    assert all(s.dropout == "keras" for s in trials.calls)
    assert any(d.stage == "dropout" and "no dropout layer" in d.text for d in res.decisions)


def test_a_near_miss_of_an_earlier_best_is_tried_again_on_a_later_one(tmp_path: Path) -> None:
    """cuBLASLt +2 % fell short on the best of its time; dropout's masks won after it,
    so cuBLASLt is tried once more on top of them, alone."""
    trials = DropoutTrials(lt=1.02)
    res = tuner(tmp_path, trials).run()
    last = same(trials.calls)[-1]
    assert last.dropout == "philox16" and "cublaslt" in last.xla_options
    notes = said(res, "together")
    assert notes == [
        "xla_options=cublaslt (+2.0%), under the threshold on an earlier best: on this one: "
        "+2.0% (threshold 3%)"
    ]


class Float8Trials(FakeTrials):
    """FP8 products 25 % faster; with `drift` their losses move that far."""

    def __init__(self, drift: float = 0.0, gemm_share: float | None = 0.97) -> None:
        super().__init__(gemm_share=gemm_share)
        self.drift = drift

    def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        r = super().__call__(w, s, st, t)
        if not s.float8:
            return r
        rate = (r.samples_per_s or 0) * 1.25
        losses = tuple(x * (1 + self.drift) for x in r.losses)
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate), losses=losses)


@pytest.mark.parametrize(("drift", "kept"), [(0.02, True), (0.5, False)])
def test_float8_is_tried_on_fp8_tensor_cores_behind_the_guard(
    tmp_path: Path, drift: float, kept: bool
) -> None:
    trials = Float8Trials(drift)
    res = tuner(tmp_path, trials).run()
    tried = [s for s in same(trials.calls) if s.float8 and s.attention == "keras" and not later(s)]
    assert len(tried) == 1 and tried[0].xla == "jit" and tried[0].precision == "mixed_bfloat16"
    assert res.best_settings is not None and res.best_settings.float8 is kept
    if kept:
        assert said(res, "float8") == ["on: +25% kept"]
    else:
        guard = said(res, "accuracy guard")
        assert any("float8" in g and "rejected" in g for g in guard)


@pytest.mark.parametrize(("cc", "share"), [("8.0", 0.97), ("9.0", 0.01)])
def test_float8_is_not_tried_without_fp8_tensor_cores_or_on_convolutions(
    tmp_path: Path, cc: str, share: float
) -> None:
    trials = Float8Trials(gemm_share=share)
    tuner(tmp_path, trials, Hardware(1, cc)).run()
    assert not any(s.float8 for s in trials.calls)


class AttentionTrials(FakeTrials):
    """cuDNN's flash attention `gain` faster where a call fits (`calls`); the baseline
    reports `layers` attention layers, `dropping` of them with dropout; `drift` moves
    the losses."""

    def __init__(
        self,
        gain: float = 1.12,
        drift: float = 0.0,
        layers: int | None = 12,
        calls: int = 12,
        dropping: int = 0,
    ) -> None:
        super().__init__()
        self.gain, self.drift, self.layers, self.calls_traced = gain, drift, layers, calls
        self.dropping = dropping  # how many of the layers have attention dropout

    def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        r = super().__call__(w, s, st, t)
        counts = {"attention_layers": self.layers, "attention_dropout_layers": self.dropping}
        extra = {**r.extra, **counts} if s.xla == "off" else r.extra
        if s.attention != "cudnn":
            return dataclasses.replace(r, extra=extra)
        gain = self.gain if self.calls_traced else 1.0
        rate = (r.samples_per_s or 0) * gain
        losses = tuple(x * (1 + self.drift) for x in r.losses)
        extra = {**extra, "cudnn_attention_calls": self.calls_traced}
        return dataclasses.replace(
            r, samples_per_s=rate, windows=(rate, rate), losses=losses, extra=extra
        )


@pytest.mark.parametrize(("drift", "kept"), [(0.01, "cudnn"), (0.5, "keras")])
def test_cudnn_attention_is_tried_under_xla_in_16_bit_behind_the_guard(
    tmp_path: Path, drift: float, kept: str
) -> None:
    trials = AttentionTrials(drift=drift)
    res = tuner(tmp_path, trials).run()
    tried = [s for s in same(trials.calls) if s.attention == "cudnn" and not later(s)]
    assert len(tried) == 1 and tried[0].xla == "jit" and tried[0].precision == "mixed_bfloat16"
    assert res.best_settings is not None and res.best_settings.attention == kept
    if kept == "cudnn":
        assert said(res, "attention") == ["cudnn: +12% kept"]
    else:
        guard = said(res, "accuracy guard")
        assert any("attention=cudnn" in g and "rejected" in g for g in guard)


@pytest.mark.parametrize(
    ("hw", "layers", "precisions", "why"),
    [
        (Hardware(0, None), 12, None, None),  # the CPU
        (Hardware(1, "7.5"), 12, None, None),  # no flash attention before 8.0
        (H200, 12, ("float32", "tf32"), None),  # no 16-bit heads
        (H200, 0, None, "no multi-head attention"),
    ],
)
def test_cudnn_attention_is_not_tried_where_it_cannot_run(
    tmp_path: Path,
    hw: Hardware,
    layers: int,
    precisions: tuple[str, ...] | None,
    why: str | None,
) -> None:
    trials = AttentionTrials(layers=layers)
    res = tuner(tmp_path, trials, hw, precisions).run()
    assert not any(s.attention == "cudnn" for s in trials.calls)
    notes = said(res, "attention")
    assert notes == ([f"not tried: the model has {why}"] if why else [])


def test_cudnn_attention_is_not_tried_where_every_attention_layer_drops_out(
    tmp_path: Path,
) -> None:
    """BERT: dropout in each attention layer, whose training calls stay on Keras' (cuDNN's
    dropout crashes TF 2.21): no trial; one layer without dropout is worth a trial."""
    trials = AttentionTrials(dropping=12)
    res = tuner(tmp_path, trials).run()
    assert not any(s.attention == "cudnn" for s in trials.calls)
    notes = said(res, "attention")
    assert notes and "each of the model's 12 attention layers has dropout" in notes[0]
    some = AttentionTrials(dropping=11)
    (tmp_path / "some").mkdir()
    tuner(tmp_path / "some", some).run()
    assert any(s.attention == "cudnn" for s in some.calls)


def test_layer_counts_come_from_any_trial_when_the_baseline_lacks_them(tmp_path: Path) -> None:
    """A journal's baseline of a version that did not count attention layers: a later
    trial's count decides."""

    class Later(AttentionTrials):
        def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
            r = super().__call__(w, s, st, t)
            if s.xla == "off":  # the baseline: no counts
                return dataclasses.replace(r, extra={"no_race": r.extra["no_race"]})
            counts = {"attention_layers": 12, "attention_dropout_layers": 12}
            return dataclasses.replace(r, extra={**r.extra, **counts})

    trials = Later()
    res = tuner(tmp_path, trials).run()
    assert not any(s.attention == "cudnn" for s in trials.calls)
    assert any(d.stage == "attention" and "has dropout" in d.text for d in res.decisions)


def test_skipped_knobs_are_left_as_they_are(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    trials = AttentionTrials()
    skip = ("attention", "steps_per_execution", "dropout")
    opts = TuneOptions(batch_size=64, steps=STEPS, skip=skip)
    res = Tuner("w", H200, opts, j, trial_fn=trials).run()
    assert all(s.attention == "keras" and s.dropout == "keras" for s in trials.calls)
    assert {s.steps_per_execution for s in trials.calls} == {1}
    notes = [(d.stage, d.text) for d in res.decisions if d.text == "not tried: --skip"]
    assert notes == [
        ("steps_per_execution", "not tried: --skip"),
        ("dropout", "not tried: --skip"),
        ("attention", "not tried: --skip"),
    ]


def test_a_cudnn_attention_trial_where_no_call_fitted_says_so(tmp_path: Path) -> None:
    res = tuner(tmp_path, AttentionTrials(calls=0)).run()
    notes = said(res, "attention")
    assert notes[0] == "cudnn: +0% (threshold 3%)"
    assert "no attention call fitted" in notes[1] and "Keras' own ran" in notes[1]
    assert res.best_settings is not None and res.best_settings.attention == "keras"


class EinsumTrials(GuardedKnobTrials):
    """Flat einsums 12 % faster, or NaN losses with `nan`; `layers` EinsumDense layers
    (None: the trials do not count them)."""

    gain = 1.12

    def __init__(self, nan: bool = False, layers: int | None = 48) -> None:
        super().__init__(nan)
        self.layers = layers

    def applies(self, s: Settings) -> bool:
        return s.einsum != "keras"

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if self.layers is None:
            return r
        return dataclasses.replace(r, extra={**r.extra, "einsum_layers": self.layers})


@pytest.mark.parametrize("nan", [False, True])
def test_flat_einsums_are_tried_last_behind_the_accuracy_guard(tmp_path: Path, nan: bool) -> None:
    trials = EinsumTrials(nan)
    res = tuner(tmp_path, trials).run()
    tried = [s for s in same(trials.calls) if s.einsum == "flat"]
    assert len(tried) == 1 and tried[0].xla == "jit" and tried[0].precision == "mixed_bfloat16"
    assert res.best_settings is not None
    if nan:
        guard = said(res, "accuracy guard")
        assert any("einsum=flat" in g and "NaN" in g for g in guard)
        assert res.best_settings.einsum == "keras"
    else:
        assert said(res, "einsum") == ["flat: +12% kept"]
        assert res.best_settings.einsum == "flat"


@pytest.mark.parametrize(("hw", "layers"), [(Hardware(0, None), None), (H200, None)])
def test_flat_einsums_are_tried_on_any_device_unless_the_model_has_none(
    tmp_path: Path, hw: Hardware, layers: int | None
) -> None:
    trials = EinsumTrials(layers=layers)
    tuner(tmp_path, trials, hw).run()
    assert any(s.einsum == "flat" for s in trials.calls)  # unknown count: tried
    none = EinsumTrials(layers=0)
    (tmp_path / "none").mkdir()
    res = tuner(tmp_path / "none", none, hw).run()
    assert not any(s.einsum == "flat" for s in none.calls)
    notes = said(res, "einsum")
    assert notes == ["not tried: the model has no EinsumDense layer"]


def test_flat_einsums_can_be_skipped(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    trials = EinsumTrials()
    opts = TuneOptions(batch_size=64, steps=STEPS, skip=("einsum",))
    res = Tuner("w", H200, opts, j, trial_fn=trials).run()
    assert not any(s.einsum == "flat" for s in trials.calls)
    assert said(res, "einsum") == ["not tried: --skip"]


def test_no_trials_without_xla_where_the_defaults_prove_its_gain(tmp_path: Path) -> None:
    fake = XlaWins()
    res = tuner(tmp_path, fake).run()
    assert [s.xla for s in fake.calls].count("off") == 1  # the baseline alone
    (why,) = [t for t in said(res, "precision x XLA") if t.startswith("without XLA")]
    # the figures it stands on: 1.5 (TF32) x 1.4 (auto) x 2 = 4.2x the baseline
    assert "Keras' defaults (XLA, TF32) ran 4.2x the baseline (no XLA)" in why
    # where XLA's share cannot be told from TF32's (2.1x), they run
    fake = XlaDefaults()
    (tmp_path / "b").mkdir()
    tuner(tmp_path / "b", fake).run()
    assert [s.xla for s in fake.calls].count("off") > 1


def test_without_tf32_the_defaults_gain_is_xlas_alone(tmp_path: Path) -> None:
    fake = XlaWins(0.9)  # float32 + XLA (no TF32 on 7.0): 1.26x the baseline
    tuner(tmp_path, fake, hw=Hardware(1, "7.0")).run()
    assert [s.xla for s in fake.calls].count("off") > 1
    fake = XlaWins()  # 2.8x
    (tmp_path / "b").mkdir()
    res = tuner(tmp_path / "b", fake, hw=Hardware(1, "7.0")).run()
    assert [s.xla for s in fake.calls].count("off") == 1
    (why,) = [t for t in said(res, "precision x XLA") if t.startswith("without XLA")]
    assert "(XLA) ran 2.8x" in why and "TF32" not in why


def test_steps_per_execution_is_not_timed_on_a_keras_that_numbers_batches_per_execution(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from tfaccel import _compat

    monkeypatch.setattr(_compat, "keras_version", lambda: "3.10.0")
    trials = FakeTrials()
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    res = Tuner("w", H200, TuneOptions(batch_size=64, steps=STEPS), j, trial_fn=trials).run()
    assert all(s.steps_per_execution == 1 for s in trials.calls)
    said_spe = [d.text for d in res.decisions if d.stage == "steps_per_execution"]
    assert said_spe == [
        "not tried: timing steps_per_execution needs Keras >= 3.11.0 (batch numbers per "
        "step in callbacks); this is 3.10.0"
    ]


def test_cudnn_layer_norm_is_not_tried_on_a_model_without_layer_norms(tmp_path: Path) -> None:
    """The option rewrites layer norms only: on a model without one its trial times the
    same program, and could only win by the noise."""
    trials = LayerNormTrials()
    trials.extra = {**trials.extra, "layer_norm_layers": 0}
    res = tuner(tmp_path, trials).run()
    assert not any("cudnn_layer_norm" in s.xla_options for s in trials.calls)
    assert "cudnn_layer_norm not tried: the model has no LayerNormalization" in said(
        res, "xla_options"
    )


def test_a_model_keras_runs_without_xla_gets_no_trial_under_xla(tmp_path: Path) -> None:
    """Keras compiles no model with XLA that holds an LSTM on cuDNN: a trial asking for
    XLA would time the model without it under another name (on an H100, three such
    trials of one LSTM script, the same settings, ran 443, 483 and 553 samples/s), and
    the knobs that act under XLA would act on nothing."""
    trials = NoXlaModel()
    res = tuner(tmp_path, trials, precisions=("tf32",)).run()  # the answer: Keras' defaults
    calls = same(trials.calls)
    assert not any(s.xla == "jit" or s.xla_options or s.dropout != "keras" for s in calls)
    refused = (
        "under XLA: not tried: Keras runs this model without XLA: it holds layers that "
        "Keras compiles no model with XLA for (4 LSTM), so jit_compile=True and 'auto' "
        "fall back to False"
    )
    defaults = "tf32 xla=auto batch=64 spe=1"
    once = (
        f"tf32 xla=off batch=64 spe=1: Keras' defaults ({defaults}) ran without XLA, the "
        "same settings: measured once"
    )
    assert said(res, "precision x XLA")[1:] == [refused, once]
    # TF32 without XLA is Keras' defaults' trial, not a second one
    assert tuner_base().replace(precision="tf32") not in calls
    assert said(res, "xla_options") == ["not tried: Keras runs this model without XLA (above)"]
    # a model XLA compiles gets its XLA trials
    xla = XlaDefaults()
    (tmp_path / "xla").mkdir()
    tuner(tmp_path / "xla", xla).run()
    assert any(s.xla == "jit" for s in xla.calls)


def test_a_script_under_op_determinism_gets_no_trial_under_xla(tmp_path: Path) -> None:
    """Keras compiles no model with XLA while TensorFlow's op determinism is on (a
    script's `enable_op_determinism()`, on a CPU: its "xla=jit" trial ran at the
    baseline's rate, compiling nothing): no XLA trial is run, and the decision says
    what turned determinism on."""
    turned = "the script's tf.config.experimental.enable_op_determinism()"
    trials = NoXlaModel({"determinism": turned, "no_xla_layers": {}})
    res = tuner(tmp_path, trials, precisions=("tf32",)).run()
    assert not any(s.xla == "jit" for s in same(trials.calls))
    assert said(res, "precision x XLA")[1] == (
        "under XLA: not tried: Keras runs this model without XLA: TensorFlow's op "
        f"determinism is on ({turned}), and Keras compiles no model with XLA under it"
    )


def test_an_xla_trial_keras_ran_without_xla_is_no_xla_figure(tmp_path: Path) -> None:
    """A trial asked for XLA whose jit_compile Keras resolved to False for a reason no
    fact of the baseline names: it fails with that reason, and its figure (here the
    fastest) never stands under the XLA label."""

    class Unnamed(FakeTrials):
        def __call__(self, w: str, s: Settings, p: StepPlan, t: float) -> TrialResult:
            r = super().__call__(w, s, p, t)
            rate = (r.samples_per_s or 0.0) * (2.0 if s.xla == "jit" else 1.0)
            extra = {**r.extra, "jit_compile": False, "no_xla_layers": {}}
            return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate), extra=extra)

    res = tuner(tmp_path, Unnamed(), precisions=("tf32",)).run()
    jit = [t for t in res.trials if t.settings.get("xla") == "jit"]
    assert jit and all(t.status == "error" for t in jit)
    assert jit[0].error == (
        "Keras ran it without XLA (its jit_compile=True resolved to False), so its figure "
        "is not XLA's"
    )
    assert res.best_settings is not None and res.best_settings.xla != "jit"


class DriftingTrials(FakeTrials):
    """A machine whose figures drift between processes: each settings' second run
    comes out `second` times its first (the windows of each spread 1 %); only the
    baseline's where `only_baseline` (a model whose cuDNN autotuning without XLA picks
    other convolutions in each process)."""

    def __init__(self, second: float, only_baseline: bool = False) -> None:
        super().__init__()
        self.second = second
        self.only_baseline = only_baseline

    def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        r = super().__call__(w, s, st, t)
        if self.calls.count(s) == 2 and (s == tuner_base() or not self.only_baseline):
            rate = (r.samples_per_s or 0) * self.second
            r = dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))
        return r


@pytest.mark.parametrize(("second", "floor", "busy"), [(0.99, 0.03, False), (0.75, 0.5, True)])
def test_the_baseline_runs_twice_and_its_drift_sets_the_smallest_gain(
    tmp_path: Path, second: float, floor: float, busy: bool
) -> None:
    """Every trial is a process of its own: on an H100 one LSTM script's same settings
    ran 443, 483 and 553 samples/s in three trials whose windows spread 1-7 %. The
    baseline runs again after Keras' defaults, and gains count beyond twice the drift
    between its figures (steps_per_execution's +20 % here: kept on a quiet machine,
    not where the figures drift 25 %); two figures further apart than `stats.BUSY` have
    it run a third time, which here lands where the first did."""
    trials = DriftingTrials(second)
    res = tuner(tmp_path, trials, precisions=("tf32",), repeat_baseline=True).run()
    defaults = tuner_base().replace(xla="auto", precision="tf32")
    runs = [tuner_base(), defaults, tuner_base(), *([tuner_base()] if busy else [])]
    assert trials.calls[: len(runs)] == runs
    first = 1000 * 2**0.3  # the fake's float32 rate at batch 64
    rates = [first, first * second, *([first] if busy else [])]
    assert res.drift_between_trials == pytest.approx(
        (max(rates) - min(rates)) / statistics.median(rates)
    )
    noise = said(res, "noise")[0]
    figures = ", ".join(f"{rate:,.0f}" for rate in rates)
    again = "in 3 processes" if busy else "again, in a process of its own"
    assert noise.startswith(f"the baseline {again}: {figures} samples/s")
    # the baseline's figure: the median of all runs' windows, in the table too
    assert res.baseline is not None and res.trials[0] is res.baseline
    assert res.baseline.samples_per_s == pytest.approx(statistics.median(rates))
    assert f"a gain counts beyond {floor:.0%}" in noise
    assert ("the machine is busy" in noise) is busy and "left out" not in noise
    spe = said(res, "steps_per_execution + input_cast") or said(res, "steps_per_execution")
    assert any("kept" in text for text in spe) is not busy
    # where every process drifts, measuring the gain's two trials again shows it: their
    # runs' windows spread as far as the baseline's
    again = said(res, "noise")[1:]
    assert bool(again) is busy and all("within their noise (57%)" in text for text in again)
    # resumed, the repeat comes from the journal: not measured again
    again = DriftingTrials(second)
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    opts = TuneOptions(batch_size=64, steps=STEPS, precisions=("tf32",))
    resumed = Tuner("w", H200, opts, j, trial_fn=again).run()
    assert again.calls == [] and resumed.drift_between_trials == res.drift_between_trials


def test_a_gain_hidden_by_the_baselines_drift_alone_is_measured_again(tmp_path: Path) -> None:
    """A baseline (float32, no XLA: cuDNN's autotuning picks its convolutions in each
    process) whose processes scatter, 1,231, 1,760 and 1,231 samples/s, while every
    other trial's figures hold: twice that drift (86 %) would hide XLA's and
    steps_per_execution's gains. A gain beyond both trials' windows but within the
    baseline's drift has each trial measured once more, in a process of its own, and is
    judged by their runs' windows; a resumed tune replays the repeats."""
    trials = DriftingTrials(1.43, only_baseline=True)
    res = tuner(tmp_path, trials, precisions=("tf32",), repeat_baseline=True).run()
    assert res.drift_between_trials == pytest.approx(0.43)
    spe = said(res, "steps_per_execution + input_cast") or said(res, "steps_per_execution")
    assert any("+20% kept" in text for text in spe), spe
    # XLA's +7 % over Keras' defaults, then steps_per_execution's +20 % over XLA
    xla, spe_again = said(res, "noise")[1:]
    assert xla.startswith("tf32 xla=jit batch=64 spe=1 against tf32 xla=auto batch=64 spe=1")
    assert spe_again.startswith("tf32 xla=jit batch=64 spe=25 against tf32 xla=jit")
    assert "within twice the baseline's drift between processes (86%)" in spe_again
    assert spe_again.endswith("over both runs +20%, beyond their noise (3%)")
    defaults = tuner_base().replace(xla="auto", precision="tf32")
    assert trials.calls.count(defaults) == 2  # Keras' defaults, once more
    assert trials.calls.count(defaults.replace(xla="jit")) == 2  # measured again once
    assert res.keras_defaults is not None and res.keras_defaults.extra["processes"] == 2
    assert res.best is not None and res.best.extra["processes"] == 2
    assert res.best in res.trials  # the table shows the figure the answer holds
    resumed = DriftingTrials(1.43, only_baseline=True)
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    opts = TuneOptions(batch_size=64, steps=STEPS, precisions=("tf32",))
    again_res = Tuner("w", H200, opts, j, trial_fn=resumed).run()
    assert resumed.calls == []
    assert again_res.best is not None and again_res.best.key == res.best.key


class ColdFirst(FakeTrials):
    """A machine whose first process runs the baseline `slow` times its later figure
    (its kernels compiled and its convolutions autotuned cold), every later process
    alike."""

    def __init__(self, slow: float) -> None:
        super().__init__()
        self.slow = slow

    def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        r = super().__call__(w, s, st, t)
        if len(self.calls) == 1:
            rate = (r.samples_per_s or 0) * self.slow
            r = dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))
        return r


def test_a_first_process_on_a_cold_machine_is_left_out_of_the_baselines_figure(
    tmp_path: Path,
) -> None:
    """On H100s the WGAN-GP script's baseline ran 2,444-2,540 samples/s in a tune's first
    process and 3,580-3,638 in the next, three tunes alike: twice that drift (75 %)
    hid every gain under it. The baseline runs a third time; where the later two agree
    and the first stands apart from both, the first is left out of its figure and of
    the drift, and gains count beyond the noise floor without second runs."""
    trials = ColdFirst(0.68)
    res = tuner(tmp_path, trials, precisions=("tf32",), repeat_baseline=True).run()
    assert trials.calls[:4] == [
        tuner_base(),
        tuner_base().replace(xla="auto", precision="tf32"),
        tuner_base(),
        tuner_base(),
    ]
    assert res.drift_between_trials == pytest.approx(0.0)
    noise = said(res, "noise")
    assert len(noise) == 1, noise  # no second runs of any other trial
    assert noise[0].startswith("the baseline in 3 processes: 837, 1,231, 1,231")
    assert "the first 32% below the later runs, which agree (0% apart)" in noise[0]
    assert "left out of the figure" in noise[0] and "a gain counts beyond 3%" in noise[0]
    later = 1000 * 2**0.3  # the fake's float32 rate at batch 64
    assert res.baseline is not None and res.baseline.samples_per_s == pytest.approx(later)
    assert res.baseline.extra["processes"] == 2
    spe = said(res, "steps_per_execution + input_cast") or said(res, "steps_per_execution")
    assert any("+20% kept" in text for text in spe), spe
    # resumed: both repeats from the journal, the same figure, nothing measured
    again = ColdFirst(0.68)
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    opts = TuneOptions(batch_size=64, steps=STEPS, precisions=("tf32",))
    resumed = Tuner("w", H200, opts, j, trial_fn=again).run()
    assert again.calls == [] and resumed.drift_between_trials == pytest.approx(0.0)
    assert resumed.baseline is not None
    assert resumed.baseline.samples_per_s == pytest.approx(later)


@pytest.mark.parametrize(
    ("rates", "cold"),
    [
        ([2444, 3580, 3600], True),  # the WGAN's baseline on an H100, a third run agreeing
        ([4000, 3580, 3600], False),  # within 20 % of the later runs: noise, not a cold start
        ([443, 553, 483], False),  # an LSTM's processes on an H100: every one apart
        ([2444, 3580], False),  # two runs cannot tell which one stands apart
        # a faster first has no cold cause; left out, it would raise every speed-up
        ([5000, 3580, 3600], False),
        ([5643, 3365, 4017], False),  # a busy 2-core CPU's baseline
    ],
)
def test_a_cold_first_run_is_one_that_stands_apart_from_two_agreeing_later_ones(
    rates: list[float], cold: bool
) -> None:
    from tfaccel.tune.figures import cold_first

    assert cold_first(rates) is cold


def test_a_trial_is_run_again_as_it_was_asked_for(tmp_path: Path) -> None:
    """A trial labelled with the batch it read ("batch=32": the baseline of a script)
    was asked for the script's own (None): measured again (the noise rule's second run,
    or on another machine), it is asked for the same, not at an explicit batch that
    would re-batch a dataset of batches under the same key."""
    from tfaccel.trial.runner import settings_key
    from tfaccel.tune.figures import request_of

    t = tuner(tmp_path, FakeTrials())
    own = tuner_base().replace(batch_size=None)
    read = own.replace(batch_size=32).to_dict()
    asked_own = TrialResult(settings_key("w", own, STEPS), "l", read, "ok", 1.0)
    assert request_of(t, asked_own) == own
    asked_32 = TrialResult(
        settings_key("w", own.replace(batch_size=32), STEPS), "l", read, "ok", 1.0
    )
    assert request_of(t, asked_32) == own.replace(batch_size=32)


def test_a_figure_of_another_machine_is_never_swapped_for_this_ones_runs(
    tmp_path: Path,
) -> None:
    """A resumed tune compares figures of one machine: a trial's runs merged here stand
    for this machine's figure of it, never for another machine's."""
    from tfaccel.tune.figures import as_one

    t = tuner(tmp_path, FakeTrials())
    t.journal.machine = "here"
    ours = TrialResult("k", "l", {}, "ok", 1.0, windows=(1.0,))
    merged = dataclasses.replace(ours, extra={"processes": 2})
    t.merged["k"] = merged
    t.journal.results["k"], t.journal.machine_of["k"] = ours, "here"
    assert as_one(t, ours) is merged  # a stale copy of this machine's figure
    theirs = dataclasses.replace(ours, samples_per_s=2.0)
    t.journal.results["k"], t.journal.machine_of["k"] = theirs, "there"
    assert as_one(t, theirs) is theirs


def test_a_threshold_above_the_floor_says_what_raised_it() -> None:
    """A decision's threshold above the one the noise line gave names its cause: the
    trial's own windows, the best's, or the drift between processes."""
    from tfaccel.tune.figures import threshold_text

    opts = TuneOptions(batch_size=64, steps=STEPS)

    def trial(label: str, *windows: float) -> TrialResult:
        return TrialResult("k" + label, label, {}, "ok", windows[0], windows=windows)

    calm, busy = trial("calm", 100.0, 100.0), trial("busy", 90.0, 110.0)
    assert threshold_text(opts, calm, calm, 0.03) == "3%"
    assert threshold_text(opts, busy, calm, 0.4) == "40%: its windows spread 20%"
    assert threshold_text(opts, calm, busy, 0.4) == "40%: busy's windows spread 20%"
    drift = "71%: twice the drift between processes"
    assert threshold_text(opts, calm, calm, 0.71) == drift


def test_augmentation_inside_the_model_is_named_as_what_keeps_it_from_xla() -> None:
    """keras-io's image classifiers augment inside the model: Keras then compiles none
    of it with XLA (Keras' defaults, XLA with TF32, trained ResNet-50 3.1x as fast as
    float32 without XLA on the H200); the tune says where the augmentation could go
    instead, and changes no code."""
    from tfaccel.tune.core import xla_refused

    def baseline(layers: dict[str, int]) -> TrialResult:
        return TrialResult("k", "l", {}, "ok", 1.0, extra={"no_xla_layers": layers})

    why = xla_refused(baseline({"RandomFlip": 1, "RandomRotation": 1}))
    assert why is not None
    assert "(1 RandomFlip, 1 RandomRotation)" in why
    assert "RandomFlip, RandomRotation augment the data: mapped over a tf.data" in why
    lstm = xla_refused(baseline({"LSTM": 2}))
    assert lstm is not None and "augment" not in lstm
    assert xla_refused(baseline({})) is None


class ValidatingScript(FakeTrials):
    """A script whose fit validates a third of its epoch at its batch of 32; evaluated
    at a larger batch, its epochs run `faster` times as fast."""

    def __init__(self, faster: float, blocker: str | None = None, share: float = 0.3) -> None:
        timing = {"train": 20000, "validation": 25000, "every": 1, "batch": 32, "share": share}
        super().__init__(extra={"validation_timing": timing, "validation_batch_blocker": blocker})
        self.faster = faster

    def __call__(self, w: str, s: Settings, st: StepPlan, t: float) -> TrialResult:
        r = super().__call__(w, s, st, t)
        if s.validation_batch_size:
            rate = (r.samples_per_s or 0) * self.faster
            r = dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))
        return r


def test_a_scripts_validation_is_tried_at_a_larger_batch(tmp_path: Path) -> None:
    """keras-io's bidirectional LSTM script validated 25,000 examples at its batch of 32
    after each epoch, 32 % of the epoch on an H200: evaluation reads the weights and
    changes none, so a larger validation batch is a same-training trial, kept where it
    pays (here +30 %), at the validation's size or 1,024, whichever is smaller."""
    trials = ValidatingScript(1.3)
    res = tuner(tmp_path, trials, precisions=("tf32",)).run()
    tried = [s for s in trials.calls if s.validation_batch_size]
    assert tried and tried[0].validation_batch_size == 1024
    assert any("+30% kept" in text for text in said(res, "validation_batch_size"))
    assert res.best_settings is not None and res.best_settings.validation_batch_size == 1024


@pytest.mark.parametrize(
    ("blocker", "share", "why"),
    [
        ("a stateful layer (m) carries its state", 0.3, "not tried: a stateful layer (m)"),
        (None, 0.01, "not tried: its validation is 1% of the epoch, under the noise"),
    ],
)
def test_a_validation_batch_is_not_tried_where_it_cannot_pay(
    tmp_path: Path, blocker: str | None, share: float, why: str
) -> None:
    trials = ValidatingScript(1.3, blocker, share)
    res = tuner(tmp_path, trials, precisions=("tf32",)).run()
    assert not any(s.validation_batch_size for s in trials.calls)
    assert said(res, "validation_batch_size")[0].startswith(why)
