"""Each precision under XLA, then without it (unless Keras' defaults already prove
XLA's own gain), each 16-bit one judged by the accuracy guard against the 32-bit run of
the same XLA mode."""

from __future__ import annotations

from tfaccel.optimize.settings import (
    Settings,
)
from tfaccel.trial.runner import TrialResult, label_of
from tfaccel.tune.core import (
    State,
    TunerCore,
    xla_refused,
)
from tfaccel.tune.guard import loss_close

# TF32 over strict float32, both without XLA, on the H200: BERT-base 1.77x, GPT-2 1.64x,
# ResNet-50 1.54x; 16-bit without XLA ran 0.82-0.91x TF32 without XLA on the three (the
# casts cost more than the tensor cores save outside XLA's fusions). Figures: the
# measurements page, tune journals of ResNet-50, BERT and GPT-2.
NO_XLA_TF32_GAIN = 1.8


# How far Keras' defaults must outrun the baseline beyond TF32's share for stage 4 to be
# left out: XLA's own gain is then at least 1.4x.
XLA_PROVEN = 1.4


def _precisions_at(tuner: TunerCore, state: State, xla: str, base: Settings) -> None:
    """Each precision under `xla`, on `base`: the 32-bit one first (the guard's
    reference for the 16-bit ones of the same XLA mode: XLA alone changes the early
    trajectory, by as much as 20 % on BERT with random labels)."""
    res = tuner.result
    for precision in tuner.precisions:
        if precision == "float32" and "tf32" in tuner.precisions:
            # TF32 is what the GPU runs by default; strict float32 would only be slower.
            continue
        settings = base.replace(precision=precision, xla=xla)
        trial = _trial_at(tuner, state, settings)
        if precision in ("float32", "tf32"):
            if not trial.ok:
                tuner.decide("precision x XLA", f"{trial.label}: {trial.status} ({trial.error})")
                continue
            state.reference.setdefault(xla, trial)
        elif trial.ok:
            ref = state.reference.get(xla) or res.baseline
            ok, why = loss_close(trial, ref, state.rtol) if ref else (True, "")
            if not ok:
                tuner.decide("accuracy guard", f"{trial.label} rejected: {why}")
                continue
        if trial is res.keras_defaults and trial is not res.baseline and xla == "off":
            tuner.decide(
                "precision x XLA",
                f"{label_of(settings)}: Keras' defaults ({trial.label}) ran without XLA, "
                "the same settings: measured once",
            )
            continue
        if trial is state.best or not trial.ok:
            continue
        c = tuner.compare(trial, state.best)
        verdict = "kept" if c.win else c.short_of
        tuner.decide(
            "precision x XLA",
            f"{c.new.label}: {c.new.samples_per_s:,.0f}/s, {c.gain:+.0%} vs {c.best.label}: "
            f"{verdict}",
        )
        if c.win:
            tuner._improved(state, c.new, settings)


def _trial_at(tuner: TunerCore, state: State, settings: Settings) -> TrialResult:
    """The trial of `settings`: Keras' defaults' own where they resolved to the same
    (their jit_compile='auto' compiled with XLA at this precision, or, on a model
    Keras runs without XLA, did not), the baseline's, else a new one."""
    res = tuner.result
    if settings == tuner.base and res.baseline is not None:
        return res.baseline
    defaults = res.keras_defaults
    same = settings == state.defaults.replace(xla=settings.xla) and settings.xla in ("jit", "off")
    resolved = defaults.extra.get("jit_compile") if defaults is not None else None
    if same and defaults is not None and defaults.ok and resolved is (settings.xla == "jit"):
        return defaults
    return tuner.trial(settings, "precision x XLA")


def xla_precisions(tuner: TunerCore, state: State) -> None:
    """Stage 2: each precision under XLA, 16-bit + XLA first among the trials: the
    largest win on every tensor-core GPU workload measured."""
    refused = xla_refused(tuner.result.baseline)
    if refused:
        tuner.decide("precision x XLA", f"under XLA: not tried: {refused}")
        return
    _precisions_at(tuner, state, "jit", tuner.base)


def no_xla_precisions(tuner: TunerCore, state: State) -> None:
    """Stage 3: each precision without XLA, on the best so far (for models XLA
    slows down or cannot compile): after the batch ladder, as the least likely;
    not run where XLA's own gain is already measured beyond doubt."""
    why = _xla_proven(tuner, state)
    if why:
        tuner.decide("precision x XLA", f"without XLA: not tried: {why}")
        return
    _precisions_at(tuner, state, "off", state.best_s.replace(xla="off"))


def _xla_proven(tuner: TunerCore, state: State) -> str | None:
    """Why no precision without XLA can win here, or None. Keras' defaults (32-bit,
    XLA) against the baseline (float32, no XLA) is XLA's gain times TF32's; when it
    exceeds what TF32 gives without XLA by XLA_PROVEN, XLA itself speeds this model
    up, and 16-bit without XLA has run slower than TF32 without XLA on every
    workload measured (NO_XLA_TF32_GAIN's note)."""
    res = tuner.result
    defaults, batch = res.keras_defaults, res.baseline
    if state.best_s.xla == "off" or not (defaults and defaults.ok and batch and batch.ok):
        return None
    if defaults.extra.get("jit_compile") is not True or not (
        defaults.samples_per_s and batch.samples_per_s
    ):
        return None
    tf32 = tuner._default_precision == "tf32"
    ratio = defaults.samples_per_s / batch.samples_per_s
    if ratio < XLA_PROVEN * (NO_XLA_TF32_GAIN if tf32 else 1.0):
        return None
    return (
        f"Keras' defaults (XLA{', TF32' if tf32 else ''}) ran {ratio:.1f}x the baseline "
        "(no XLA)"
        + (f", more than TF32 alone gives without XLA (up to {NO_XLA_TF32_GAIN}x)" if tf32 else "")
        + ": XLA speeds this model up, and 16-bit without XLA is slower than 32-bit"
    )
