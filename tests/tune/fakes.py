"""What the search's tests share: a trial function standing in for the child process
(a throughput model of an H200-like GPU), a Tuner over it, and readers of its decisions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, TrialResult, label_of, settings_key
from tfaccel.tune.journal import Journal
from tfaccel.tune.result import Hardware, TuneOptions, TuneResult
from tfaccel.tune.search import Tuner

STEPS = StepPlan(2, 2, 2)


class FakeTrials:
    """Throughput model of an H200-like GPU: 16-bit and XLA help, batch helps up to 512."""

    def __init__(
        self,
        nan_for: str | None = None,
        oom_above: int = 512,
        gemm_share: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.calls: list[Settings] = []
        # what every trial reports besides: by default a model of synthetic data, which
        # no race can judge (a race's tests say otherwise)
        self.extra = {"no_race": "its data is synthetic", **(extra or {})}
        self.nan_for = nan_for
        self.oom_above = oom_above
        self.gemm_share = gemm_share  # what a baseline trial that counts FLOPs reports

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        self.calls.append(s)
        key = settings_key(workload, s, steps)
        b = s.batch_size or 32
        if b > self.oom_above:
            return TrialResult(key, label_of(s), s.to_dict(), "oom", error="OOM")
        rate = 1000.0
        rate *= {"float32": 1.0, "tf32": 1.5, "mixed_bfloat16": 3.0, "mixed_float16": 2.9}[
            s.precision
        ]
        rate *= {"off": 1.0, "auto": 1.4, "jit": 1.5, "autoclustering": 1.1}[s.xla]
        rate *= min(b, 512) ** 0.3 / 32**0.3
        rate *= 1.2 if s.steps_per_execution >= 10 else 1.0
        rate *= 1.1 if s.input_cast == "compute" else 1.0
        losses = (6.9, 6.8, 6.7)
        if s.precision == self.nan_for:
            losses = (6.9, float("nan"), float("nan"))
        return TrialResult(
            key,
            label_of(s),
            s.to_dict(),
            "ok",
            samples_per_s=rate,
            spread=0.01,
            windows=(rate, rate),
            compile_s=60.0 if s.xla == "jit" else 1.0,
            losses=losses,
            precision=s.precision,
            extra=({"gemm_flop_share": self.gemm_share} if s.xla == "off" else {}) | self.extra,
        )


H200 = Hardware(1, "9.0")


class FakeClock:
    """A tune's clock (`Tuner(clock=...)`) that fake trials advance: `taking(seconds,
    fn)` is `fn` (a trial or race function), each call of it `seconds` long."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def taking(self, seconds: float, fn: Callable[..., TrialResult]) -> Callable[..., TrialResult]:
        def call(*args: Any, **kwargs: Any) -> TrialResult:
            self.now += seconds
            return fn(*args, **kwargs)

        return call


def said(res: TuneResult, stage: str) -> list[str]:
    """The decisions of `stage`, without the ", against LABEL" that names the best
    each trial was compared with."""
    return [d.text.split(", against ")[0] for d in res.decisions if d.stage == stage]


def same(calls: list[Settings], batch: int = 64) -> list[Settings]:
    """The trials of the same-training stages (at the user's batch, 64 in `tuner`), not
    the batch offer's after them."""
    return [s for s in calls if s.batch_size == batch]


def later(s: Settings) -> bool:
    """A trial of the last stage-7 knob, flat einsums (it carries what the other knobs
    kept)."""
    return s.einsum != "keras"


def tuner(
    tmp_path: Path,
    fake: FakeTrials,
    hw: Hardware = H200,
    precisions: tuple[str, ...] | None = None,
    skip: tuple[str, ...] = (),
    **options: Any,
) -> Tuner:
    j = Journal(tmp_path / "j.jsonl")
    j.load("w")
    # the baseline's repeat (the drift between trials) has tests of its own
    options.setdefault("repeat_baseline", False)
    opts = TuneOptions(batch_size=64, steps=STEPS, precisions=precisions, skip=skip, **options)
    return Tuner("w", hw, opts, j, trial_fn=fake)


def options(**given: Any) -> TuneOptions:
    """A fake tune's options at batch 64 and STEPS, without the baseline's repeat (the
    drift between trials has tests of its own)."""
    return TuneOptions(batch_size=64, steps=STEPS, repeat_baseline=False, **given)


class XlaDefaults(FakeTrials):
    """Keras' defaults compile with XLA, as they do on a GPU."""

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        return dataclasses.replace(r, extra={**r.extra, "jit_compile": s.xla != "off"})


class NoXlaModel(FakeTrials):
    """A model Keras runs without XLA (two bidirectional LSTMs on cuDNN, or what `why`
    says: op determinism): whatever jit_compile says, its trials run as without XLA and
    report so."""

    def __init__(self, why: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.why = why or {"no_xla_layers": {"LSTM": 4}}

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if not r.ok:
            return r
        xla_gain = {"off": 1.0, "auto": 1.4, "jit": 1.5, "autoclustering": 1.0}[s.xla]
        rate = r.samples_per_s / xla_gain  # type: ignore[operator]
        extra = {**r.extra, "jit_compile": False, **self.why}
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate), extra=extra)


class XlaWins(XlaDefaults):
    """A model XLA itself speeds up `factor` times more (2x: as on ResNet-50, BERT and
    GPT-2)."""

    def __init__(self, factor: float = 2.0) -> None:
        super().__init__()
        self.factor = factor

    def __call__(self, workload: str, s: Settings, steps: StepPlan, timeout: float) -> TrialResult:
        r = super().__call__(workload, s, steps, timeout)
        if s.xla == "off" or not r.ok:
            return r
        rate = r.samples_per_s * self.factor  # type: ignore[operator]
        return dataclasses.replace(r, samples_per_s=rate, windows=(rate, rate))


def tuner_base() -> Settings:
    return Settings(precision="float32", xla="off", batch_size=64, steps_per_execution=1)
