"""XLA's GEMM options, then the late knobs of `tfaccel.optimize.settings.KNOBS`, each
as its `TuneTry` says (its hardware needs, its layers, the step time it can save), and
the knobs that each gained too little alone, together."""

from __future__ import annotations

import itertools

from tfaccel import _compat
from tfaccel.optimize.settings import (
    LATE_KNOBS,
    Knob,
    Need,
    TuneTry,
    input_cast_dtype,
)
from tfaccel.trial.runner import (
    settings_key,
)
from tfaccel.tune.core import (
    SKIPPED,
    State,
    TunerCore,
    gemm_model,
    model_count,
    xla_refused,
)
from tfaccel.tune.result import hardware_allows


def late_group(knob: Knob) -> str:
    """A late knob's group: its TuneTry's `together` name, or its own."""
    return (knob.tune.together if knob.tune else None) or knob.name


def gemm_options(tuner: TunerCore, state: State) -> None:
    """cuBLASLt epilogues, and cuDNN's layer norms (9.0+), under XLA. cuBLASLt runs
    only matrix products, so a model of convolutions skips it; a model without layer
    norms skips cuDNN's (a no-op there, whose trial could only win by the noise)."""
    res = tuner.result
    if not tuner.hw.gpus or state.best_s.xla == "off":
        return
    if xla_refused(res.baseline):
        tuner.decide("xla_options", "not tried: Keras runs this model without XLA (above)")
        return
    if not gemm_model(res.baseline):
        share = res.baseline.extra["gemm_flop_share"] if res.baseline else 0.0
        tuner.decide(
            "xla_options",
            f"cublaslt not tried: matrix products are {share:.0%} of the forward "
            "pass's FLOPs (convolutions the rest), and cuBLASLt runs only those",
        )
        return
    tuner._knob(state, "xla_options", ("cublaslt", *state.best_s.xla_options))
    if not tuner.hw.cudnn_layer_norm:
        return
    if model_count(tuner.result, "layer_norm_layers") == 0:  # None: the model could not say
        why = "the model has no LayerNormalization"
        tuner.decide("xla_options", f"cudnn_layer_norm not tried: {why}")
        return
    opts = (*state.best_s.xla_options, "cudnn_layer_norm")
    tuner._knob(state, "xla_options", opts, guard=True)


def late_knobs(tuner: TunerCore, state: State) -> None:
    """Stage 6: each knob of LATE_KNOBS, as its TuneTry says, where its needs hold
    and the model holds its layers; the knobs of one `together` group that apply,
    in one trial."""
    for _, group in itertools.groupby(LATE_KNOBS, key=late_group):
        ready = [knob for knob in group if _late_ready(tuner, knob, state)]
        if len(ready) > 1:
            _late_together(tuner, state, ready)
        elif ready:
            _late_one(tuner, state, ready[0])


def _late_ready(tuner: TunerCore, knob: Knob, state: State) -> bool:
    """Does a late knob get its trial: its needs hold, the model holds its layers,
    tune does not withhold it, nothing blocks it (each but the first said in a
    decision), not --skip?"""
    trying = knob.tune
    if trying is None or not all(_holds(tuner, need, state) for need in trying.needs):
        return False
    if trying.layers and model_count(tuner.result, f"{knob.name}_layers") == 0:
        tuner.decide(knob.name, f"not tried: the model has no {trying.layers}")
        return False
    withheld = trying.withheld and f"{trying.withheld} (a settings file may still set it)"
    blocked = (
        withheld
        or _blocked(tuner, knob.name)
        or next(
            (why for value in trying.values if (why := _compat.keras_floor(knob.name, value))), None
        )
    )
    if blocked:
        tuner.decide(knob.name, f"not tried: {blocked}")
        return False
    if knob.name in tuner.opt.skip:
        tuner.decide(knob.name, SKIPPED)
        return False
    too_long = _step_too_long(tuner, trying, state)
    if too_long:
        tuner.decide(knob.name, f"not tried: {too_long}")
        return False
    return True


def _step_too_long(tuner: TunerCore, trying: TuneTry, state: State) -> str | None:
    """Why a knob that saves host time per step (`TuneTry.saves_ms`) is left out:
    the best's steps are so long that its most is under the noise floor."""
    if trying.saves_ms is None or not state.best.ok or not state.best.samples_per_s:
        return None
    step_ms = 1000.0 * tuner._batch(state) / state.best.samples_per_s
    if step_ms * tuner.opt.noise_floor <= trying.saves_ms:
        return None
    return (
        f"a step takes {step_ms:.0f} ms, and this knob saves host time per step, at "
        f"most {trying.saves_ms:g} ms: under the {tuner.opt.noise_floor:.0%} noise floor"
    )


def _late_one(tuner: TunerCore, state: State, knob: Knob) -> None:
    """One late knob: each value in turn, until the guard lets one be measured."""
    assert knob.tune is not None
    for value in knob.tune.values:
        if tuner._knob(state, knob.name, value, guard=knob.tune.guard) is not None:
            break
    if knob.name == "attention":
        _note_attention_calls(tuner, state)


def _late_together(tuner: TunerCore, state: State, knobs: list[Knob]) -> None:
    """The knobs of one `together` group, each at its first value, in one trial."""
    values = {knob.name: knob.tune.values[0] for knob in knobs if knob.tune}
    if state.best_s.replace(**values) != state.best_s:
        tuner._joint(state, values, guard=any(knob.tune and knob.tune.guard for knob in knobs))


def _holds(tuner: TunerCore, need: Need, state: State) -> bool:
    """Does a late trial's need (settings.Need) hold on this hardware and best?"""
    if need == "xla":
        return state.best_s.xla != "off" and not xla_refused(tuner.result.baseline)
    if need == "16bit":
        return input_cast_dtype("compute", tuner._resolved_precision(state)) is not None
    if need == "gemm_model":
        return gemm_model(tuner.result.baseline)
    return hardware_allows(tuner.hw, (need,))


def _blocked(tuner: TunerCore, knob: str) -> str | None:
    """Why a knob would gain nothing on this model although it has its layers, or
    could not be applied to its data."""
    if knob == "prefetch":
        return tuner._arrays()
    layers = model_count(tuner.result, "attention_layers")
    dropping = model_count(tuner.result, "attention_dropout_layers")
    if knob == "attention" and layers and dropping == layers:
        return (
            f"each of the model's {layers} attention layers has dropout, whose "
            "training calls stay on Keras' attention (cuDNN's dropout crashes TF 2.21)"
        )
    return None


def _note_attention_calls(tuner: TunerCore, state: State) -> None:
    """cuDNN's flash attention kept or not, say when no call could use it."""
    key = settings_key(tuner.workload, state.best_s.replace(attention="cudnn"), tuner.opt.steps)
    tried = [trial for trial in tuner.result.trials if trial.key == key and trial.ok]
    if tried and tried[0].extra.get("cudnn_attention_calls") == 0:
        tuner.decide(
            "attention",
            "cudnn: no attention call fitted cuDNN's flash attention (16-bit "
            "heads of 8-128 in steps of 8, no causal flag): Keras' own ran",
        )


def together(tuner: TunerCore, state: State) -> None:
    """The knobs that each gained less than the threshold, together. Two gains of 2 %
    are each within the noise floor, but their sum need not be; the combination is
    held to the same threshold (and to the guard if one of them changes the
    arithmetic). A single one is tried again when a later knob won: its gain was
    measured on another best. A near miss of a knob that a later trial set another
    way (mask_once, then philox16 kept) is left out: that knob is decided."""
    near = [
        found
        for found in state.near
        if found.knob == "xla_options" or getattr(state.best_s, found.knob) == found.then
    ]
    if not (len(near) >= 2 or (near and near[0].best_key != state.best.key)):
        return
    settings = state.best_s
    for found in sorted(near, key=lambda found: found.gain):  # the larger gain wins
        value = found.value
        if found.knob == "xla_options":
            value = tuple(dict.fromkeys((*settings.xla_options, *value)))
        settings = settings.replace(**{found.knob: value})
    key = settings_key(tuner.workload, settings, tuner.opt.steps)
    if any(trial.key == key for trial in tuner.result.trials):
        return  # measured already (the knobs of a `together` group, on this best)
    parts = ", ".join(
        f"{found.knob}="
        f"{','.join(found.value) if isinstance(found.value, tuple) else found.value} "
        f"({found.gain:+.1%})"
        for found in near
    )
    if settings != state.best_s:
        what = (
            f"{parts}, each under the threshold alone: together"
            if len(near) > 1
            else f"{parts}, under the threshold on an earlier best: on this one"
        )
        tuner._attempt(
            state, settings, "together", what, any(found.guard for found in near), places=1
        )
