"""The first stage: the baseline, Keras' defaults, the batch size kept, the device, the
noise of the first windows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult, beats, label_of, settings_key
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import Hardware, TuneOptions, TuneResult
from tfaccel.tune.search import Tuner

from .fakes import (
    H200,
    STEPS,
    FakeTrials,
    said,
    tuner,
    tuner_base,
)


def test_a_gpu_that_tensorflow_cannot_use_stops_the_tune_after_the_baseline(
    tmp_path: Path,
) -> None:
    from tfaccel.errors import GpuError

    class OnTheCpu(FakeTrials):
        def __call__(self, *a: object) -> TrialResult:  # type: ignore[override]
            return dataclasses.replace(super().__call__(*a), device="CPU")  # type: ignore[arg-type]

    trials = OnTheCpu()
    with pytest.raises(GpuError) as caught:
        tuner(tmp_path, trials).run()
    assert "runs on the CPU" in caught.value.message and "tfaccel doctor" in str(caught.value)
    assert len(trials.calls) == 1  # nothing after the baseline
    (tmp_path / "gpu").mkdir()
    on_gpu = FakeTrials()  # device None: as the fakes of a GPU tune report it
    tuner(tmp_path / "gpu", on_gpu).run()
    assert len(on_gpu.calls) > 1


def test_a_scripts_own_batch_size_is_read_by_its_baseline(tmp_path: Path) -> None:
    """Where a script's source does not say its batch size (`.batch(args.bs * n)`), the
    baseline runs at the script's own and says which: Keras' defaults run at it, the
    ladder starts from it, and a resumed tune finds the baseline in the journal."""
    base = FakeTrials(extra={"no_race": None})

    def own_128(w: str, s: Settings, steps: StepPlan, t: float) -> TrialResult:
        r = base(w, s.replace(batch_size=s.batch_size or 128), steps, t)
        key = settings_key(w, s, steps)  # as a trial keys it: at the settings it was given
        return dataclasses.replace(r, key=key, extra={**r.extra, "own_batch": 128})

    def run(path: Path) -> TuneResult:
        j = Journal(path / "j.jsonl")
        j.load("w")
        opts = TuneOptions(batch_size=None, max_batch=1024, steps=STEPS, race_s=0.0)
        return Tuner("w", H200, opts, j, trial_fn=own_128).run()  # type: ignore[arg-type]

    res = run(tmp_path)
    assert base.calls[0].batch_size == 128 and res.baseline is not None
    assert res.baseline.label == "float32 xla=off batch=128 spe=1"
    assert res.trials[0] is res.baseline
    assert res.keras_defaults is not None and res.keras_defaults.settings["batch_size"] == 128
    assert said(res, "batch size") == [
        "starting at the script's own batch size, 128 (read in the baseline trial)",
    ]
    assert said(res, "batch offer")[0] == "batch 512: +52% over batch 128"
    assert res.best_settings is not None and res.best_settings.batch_size == 128
    assert res.batch_offer is not None and res.batch_offer.from_batch == 128
    assert res.batch_offer.batch == 512
    ran = len(base.calls)
    again = run(tmp_path)
    assert len(base.calls) == ran and again.baseline is not None  # all from the journal
    assert (again.baseline.key, again.baseline.label) == (res.baseline.key, res.baseline.label)


class Failing(FakeTrials):
    """Every trial fails with `error`, the trial reporting `facts` (where in the script)."""

    def __init__(self, error: str, facts: dict[str, object]) -> None:
        super().__init__()
        self.error, self.facts = error, facts

    def __call__(self, w: str, s: Settings, steps: StepPlan, t: float) -> TrialResult:
        self.calls.append(s)
        key, label = settings_key(w, s, steps), label_of(s)
        return TrialResult(key, label, s.to_dict(), "error", error=self.error, extra=self.facts)


def test_a_script_failing_before_fit_stops_the_tune_after_the_baseline(tmp_path: Path) -> None:
    """The baseline changes nothing a script does before fit: a failure there is the
    script's own, and Keras' defaults would fail the same way."""

    trials = Failing("trial process exited with code 1: TypeError: bad layer", {"before_fit": True})
    res = tuner(tmp_path, trials).run()
    assert len(trials.calls) == 1 and res.keras_defaults is None and res.best is None
    (why,) = said(res, "baseline")
    assert why.startswith("the baseline ended before the script's timed fit (trial ")
    assert why.endswith(
        "TypeError: bad layer); before fit it changes nothing the "
        "script does (float32, no XLA), so any settings end the same way: "
        "nothing to tune"
    )


def test_a_baseline_that_fails_in_the_scripts_fit_names_it_and_whose_error_it_is(
    tmp_path: Path,
) -> None:
    """A script whose fit fails under Keras' own math (fit(x) of 4 features into a
    model of 3): the tune names the fit call and says the error is most likely the
    script's own, rather than "the baseline failed" alone."""

    shape_error = Failing(
        "ValueError: Input 0 of layer 'dense' is incompatible with the layer",
        {"measured": "model.fit at train.py:5"},
    )
    res = tuner(tmp_path, shape_error).run()
    (why,) = said(res, "baseline")
    assert why.startswith(
        "the baseline failed in the script's model.fit at train.py:5 (error: ValueError: "
    )
    assert "and Keras' defaults too (error)" in why
    assert "most likely the script's own: run the script without tfaccel" in why
    assert why.endswith("; nothing to tune")


def test_one_slow_window_does_not_set_the_noise() -> None:
    """The H200 ResNet-50 windows: spe=10 had one slow window (4,608 among ~5,300)."""
    from tfaccel.stats import spread as spread_of

    spe10 = (5134.0, 4608.0, 5241.0, 5355.0, 5336.0)
    cast = (5624.0, 5722.0, 5712.0, 5739.0, 5607.0)
    assert spread_of(spe10) == pytest.approx(0.0385, abs=1e-3)  # the range was 14 %
    assert spread_of((100.0, 104.0)) == pytest.approx(0.0392, abs=1e-3)  # few windows: range
    assert spread_of((100.0,)) is None

    def r(w: tuple[float, ...]) -> TrialResult:
        return TrialResult("k", "l", {}, "ok", samples_per_s=sorted(w)[2], spread=0.14, windows=w)

    win, gain, threshold = beats(r(cast), r(spe10), 0.03)
    assert win and gain == pytest.approx(0.09, abs=0.01) and threshold < 0.08


def test_keras_defaults_that_resolved_to_xla_are_not_measured_twice(tmp_path: Path) -> None:
    class Resolves(FakeTrials):
        def __call__(self, w: str, s: Settings, p: StepPlan, t: float) -> TrialResult:
            r = super().__call__(w, s, p, t)
            if s.xla == "auto":
                return dataclasses.replace(r, extra={"jit_compile": True})
            return r

    fake = Resolves()
    res = tuner(tmp_path, fake).run()
    assert ("tf32", "jit") not in {(s.precision, s.xla) for s in fake.calls}
    assert res.keras_defaults is not None and res.keras_defaults.ok


def test_keras_defaults_on_a_cpu_are_the_baseline_measured_once(tmp_path: Path) -> None:
    """Without a GPU Keras' jit_compile='auto' compiles nothing and float32 is the
    precision: the defaults are the baseline's settings, timed once and said so."""
    fake = FakeTrials()
    res = tuner(tmp_path, fake, Hardware(0, None)).run()
    assert res.keras_defaults is res.baseline
    assert not any(s.xla == "auto" for s in fake.calls)
    (note,) = said(res, "keras defaults")
    assert "measured once" in note


def test_rising_windows_are_measured_again_with_a_longer_warm_up(tmp_path: Path) -> None:
    """The baseline's windows climb (a warm-up that had not ended): it runs once more
    with twice the warm-up, under the plan's key, and the decision says so; a spread
    over 20 % says the machine looks busy."""
    base = FakeTrials()
    plans: list[StepPlan] = []

    def trials(w: str, s: Settings, steps: StepPlan, t: float) -> TrialResult:
        plans.append(steps)
        r = base(w, s, steps, t)
        if s.xla == "off" and s.precision == "float32" and steps.warmup == STEPS.warmup:
            return dataclasses.replace(r, windows=(800.0, 900.0, 1000.0))
        if s.steps_per_execution == 25:
            rate = r.samples_per_s or 0.0
            return dataclasses.replace(r, windows=(rate * 0.5, rate, rate * 1.5, rate))
        return r

    res = tuner(tmp_path, trials).run()  # type: ignore[arg-type]
    assert plans[:2] == [STEPS, dataclasses.replace(STEPS, warmup=2 * STEPS.warmup)]
    assert res.baseline is not None
    assert res.baseline.key == settings_key("w", tuner_base(), STEPS)
    noise = said(res, "noise")
    assert noise[0].startswith("float32 xla=off batch=64 spe=1: its windows still rose")
    assert any("the machine looks busy" in n for n in noise[1:])
