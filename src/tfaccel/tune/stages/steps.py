"""A script's arrays kept in GPU memory, and steps_per_execution with 16-bit input
transfers: one trial where both apply, each alone where the pair did not pay."""

from __future__ import annotations

from tfaccel import _compat
from tfaccel.optimize.settings import (
    input_cast_dtype,
)
from tfaccel.tune.core import (
    State,
    TunerCore,
)

# steps_per_execution and input_cast share a trial where both apply: neither has run
# slower beyond the noise in any tune measured on the H200 (steps_per_execution
# 0.97-1.29x: MNIST convnet to ResNet-50; input_cast 1.04-1.23x: BERT-base to ResNet-50),
# and a trial of a large model costs minutes of compilation (ResNet-50: two). A pair that
# fails or runs slower beyond the noise is followed by each alone (`_spe_and_cast`).
SPE_WITH_CAST = ("steps_per_execution", "input_cast")


def device_arrays(tuner: TunerCore, state: State) -> None:
    """Stage 4: a script's numpy arrays kept in GPU memory, where they fit."""
    base = tuner.result.baseline
    if not tuner.hw.gpus or base is None or base.extra.get("fit_data") != "arrays":
        return
    why = base.extra.get("device_arrays_blocker")
    if why:
        tuner.decide("device_arrays", f"not tried: {why}")
        return
    tuner._knob(state, "device_arrays", True)


def validation_batch(tuner: TunerCore, state: State) -> None:
    """Stage 5b: a script's validation arrays evaluated at a larger batch, where its
    validation is a share of the epoch beyond the noise: evaluation changes no weight,
    so the training stays the same (`script.validation.batch_blocker` says where it
    cannot: a dataset's own batches, a stateful model, the script's own choice)."""
    from tfaccel.script.validation import LARGE_VALIDATION_BATCH

    base = tuner.result.baseline
    if base is None or not (timing := base.extra.get("validation_timing")):
        return
    stage = "validation_batch_size"
    why = base.extra.get("validation_batch_blocker")
    size = min(LARGE_VALIDATION_BATCH, int(timing["validation"]))
    share = timing.get("share")
    if not why and size <= int(timing["batch"]):
        why = f"the script evaluates at batch {timing['batch']} already"
    if not why and share is not None and share < tuner.opt.noise_floor:
        why = f"its validation is {share:.0%} of the epoch, under the noise"
    if why:
        tuner.decide(stage, f"not tried: {why}")
        return
    tuner._knob(state, stage, size)


def spe_and_cast(tuner: TunerCore, state: State) -> None:
    """Stage 5: steps_per_execution, longest first, and 16-bit input transfers; in
    one trial where both apply (SPE_WITH_CAST), each alone where that pair failed or
    ran slower beyond the noise."""
    cast = _cast_applies(tuner, state)
    old = _compat.keras_needs("timing steps_per_execution", *_compat.KERAS_TUNE_SPE)
    old = old or tuner._baseline_fact("spe_blocker")
    longest = max(tuner.opt.spe_choices)
    pair = set(SPE_WITH_CAST).isdisjoint(tuner.opt.skip)
    if cast and pair and not old and longest > 1 and _spe_with_cast(tuner, state, longest):
        return
    _steps_per_execution(tuner, state)
    if cast:
        tuner._knob(state, "input_cast", "compute")


def _spe_with_cast(tuner: TunerCore, state: State, spe: int) -> bool:
    """steps_per_execution `spe` and input_cast in one trial; True where that decided
    both: kept together, or within the noise (neither alone is then tried)."""
    values = dict(zip(SPE_WITH_CAST, (spe, "compute"), strict=True))
    out = tuner._joint(state, values)
    if out is None or out.worse:
        return False
    if not out.win:
        tuner.decide(
            " + ".join(values),
            "each alone not tried: together they gained nothing beyond the noise, and "
            "neither has run slower beyond it in any tune measured",
        )
    return True


def _steps_per_execution(tuner: TunerCore, state: State) -> None:
    old = _compat.keras_needs("timing steps_per_execution", *_compat.KERAS_TUNE_SPE)
    why = old or tuner._baseline_fact("spe_blocker")
    if why:
        tuner.decide("steps_per_execution", f"not tried: {why}")
        return
    # The longest execution first: it saves the most host time per step. A shorter
    # one is tried only where a longer one failed or ran slower beyond the noise; a
    # longer one that gained nothing beyond the noise ends the stage, since a
    # shorter execution saves less of the same host time.
    choices = sorted({choice for choice in tuner.opt.spe_choices if choice > 1}, reverse=True)
    for i, spe in enumerate(choices):
        out = tuner._knob(state, "steps_per_execution", spe)
        if out is None or out.win or not out.worse:
            rest = ", ".join(map(str, choices[i + 1 :]))
            if rest and out is not None and not out.win:
                tuner.decide(
                    "steps_per_execution",
                    f"{rest}: not tried: {spe} gained nothing beyond the noise, and a "
                    "shorter execution saves less of the same host time",
                )
            break


def _cast_applies(tuner: TunerCore, state: State) -> bool:
    """16-bit input transfers: on a GPU, under a 16-bit precision, for a model with
    float inputs (its float32 batch copy may be a large part of the step); a model
    of token ids is said to be left out."""
    if not (tuner.hw.gpus and input_cast_dtype("compute", tuner._resolved_precision(state))):
        return False
    arrays = tuner._arrays()
    if arrays:
        tuner.decide("input_cast", f"not tried: {arrays}")
        return False
    base = tuner.result.baseline
    if base is not None and base.extra.get("float_inputs") is False:
        tuner.decide(
            "input_cast",
            "not tried: the model's inputs are all integers (token ids, say), which "
            "input_cast leaves as they are",
        )
        return False
    return True
