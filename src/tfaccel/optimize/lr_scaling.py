"""The learning rate that goes with a larger batch, and its warm-up.

A batch `k` times larger takes `k` times fewer optimizer steps per epoch. To keep
training on track, the learning rate grows with it (Goyal et al. 2017, "Accurate,
Large Minibatch SGD"): linearly for plain SGD (with or without momentum), by the
square root of `k` for the adaptive optimizers of the Adam family, whose update size
does not grow with the gradient's (Malladi et al. 2022, "On the SDEs and Scaling Rules
for Adaptive Gradient Algorithms"). Either way the new rate is reached over a warm-up
of the first steps, from the user's own rate: a large rate at the start, where the
weights are random, is what makes large-batch training diverge.

A learning-rate schedule or a callback of the user's that sets the rate stays in
charge: tfaccel does not rewrite it, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Rule = Literal["linear", "sqrt", "none"]

# Plain gradient descent: the update is the learning rate times the gradient.
LINEAR = frozenset({"SGD"})
# Adaptive optimizers: the update is normalised by the gradient's running moments.
SQRT = frozenset(
    {
        "Adam",
        "AdamW",
        "Adamax",
        "Nadam",
        "Lamb",
        "Lion",
        "RMSprop",
        "Adagrad",
        "Adadelta",
        "Adafactor",
        "Ftrl",
        "Muon",
    }
)
# A warm-up of at least this many steps, and at most one epoch's (or this many where
# the epoch's length is unknown).
WARMUP_MIN_STEPS = 10
WARMUP_MAX_STEPS = 500


@dataclass(frozen=True)
class LrChange:
    """How the learning rate goes with a batch `factor` times the user's."""

    rule: Rule
    scale: float  # the user's rate times this, after the warm-up (1.0: left alone)
    warmup_steps: int
    optimizer: str | None  # the optimizer's class name, where known
    note: str  # in words, for the report and `tfaccel run`
    # the script's callbacks that set the rate (class names), which stay in charge
    setters: tuple[str, ...] = ()

    def said(self, detail: str = "") -> str:
        """The note (and `detail`: the rates applied), and the script's callbacks that
        go on setting the rate."""
        text = f"{self.note}: {detail}" if detail else self.note
        if self.setters:
            text += f" (the script's {', '.join(self.setters)} sets the rate as it always does)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """As a settings file and a race's request hold it; `setters` only where there
        are some (a race's journal key is of this dict: older journals' races stay
        found)."""
        doc: dict[str, Any] = {
            "rule": self.rule,
            "scale": self.scale,
            "warmup_steps": self.warmup_steps,
            "optimizer": self.optimizer,
            "note": self.note,
        }
        return {**doc, "setters": list(self.setters)} if self.setters else doc


RULES: tuple[Rule, ...] = ("linear", "sqrt", "none")
# What a settings file's learning_rate object holds (LrChange.to_dict), for its error.
EXPECTED = (
    "learning_rate: {rule: linear, sqrt or none; scale: a number > 0; warmup_steps: an "
    "integer >= 0; optimizer: a name or null; note: text; setters: a list of names}"
)


# A settings file's learning_rate object (LrChange.to_dict): each key's check.
_CHECKS: dict[str, Callable[[Any], bool]] = {
    "rule": lambda v: v in RULES,
    "scale": lambda v: _number(v) and v > 0,
    "warmup_steps": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "optimizer": lambda v: v is None or isinstance(v, str),
    "note": lambda v: isinstance(v, str),
    "setters": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def from_dict(doc: Any) -> LrChange:
    """An LrChange read back from a settings file (`LrChange.to_dict`), checked: a
    ValueError that says what is wrong (`EXPECTED` is what is right). `optimizer` and
    `setters` may be missing (`setters`: files of tfaccel before it)."""
    if not isinstance(doc, dict):
        raise ValueError(f"learning_rate is {type(doc).__name__}, not an object")
    full = {"optimizer": None, "setters": [], **doc}
    wrong = [f"unknown key {key!r}" for key in sorted(set(full) - set(_CHECKS))]
    wrong += [f"{key} {full.get(key)!r}" for key, ok in _CHECKS.items() if not ok(full.get(key))]
    if wrong:
        raise ValueError("learning_rate: " + ", ".join(wrong))
    scale, warmup = float(full["scale"]), int(full["warmup_steps"])
    return LrChange(
        full["rule"], scale, warmup, full["optimizer"], full["note"], tuple(full["setters"])
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rule_for(optimizer: str | None) -> tuple[Rule, str]:
    """The scaling rule for an optimizer class name, and why. An optimizer tfaccel does
    not know gets the square-root rule: the smaller change of the two."""
    if optimizer in LINEAR:
        return "linear", f"{optimizer}: linear rule"
    if optimizer in SQRT:
        return "sqrt", f"{optimizer}: square-root rule (adaptive optimizer)"
    named = optimizer or "an optimizer tfaccel cannot read"
    return "sqrt", f"{named}: square-root rule, the more cautious one"


def change_for(
    factor: float,
    optimizer: str | None,
    schedule: str | None = None,
    steps_per_epoch: int | None = None,
    setters: tuple[str, ...] = (),
) -> LrChange:
    """The learning-rate change for a batch `factor` times the user's: the rule for
    `optimizer`, or none where a schedule of the user's (`schedule`, its class name)
    sets the rate. The warm-up lasts about one epoch at the new batch, within
    [WARMUP_MIN_STEPS, WARMUP_MAX_STEPS]. `setters`: the script's callbacks that set
    the rate (a ReduceLROnPlateau goes on from the scaled rate)."""
    if schedule:
        return LrChange(
            "none",
            1.0,
            0,
            optimizer,
            f"learning rate left to the script's {schedule} schedule (tfaccel does not "
            "rewrite a schedule)",
            tuple(setters),
        )
    rule, why = rule_for(optimizer)
    scale = factor if rule == "linear" else math.sqrt(factor)
    epoch = steps_per_epoch or WARMUP_MAX_STEPS
    warmup = max(WARMUP_MIN_STEPS, min(WARMUP_MAX_STEPS, epoch))
    note = f"learning rate x{scale:.3g} ({why}), warmed up over {warmup} steps"
    return LrChange(rule, round(scale, 6), warmup, optimizer, note, tuple(setters))


def value_of(variable: Any) -> float:
    """A Keras variable's value as a number, also one made under a user's
    `tf.distribute` strategy scope (a MirroredVariable inside), which `float()` and
    `int()` refuse."""
    import numpy as np

    return float(np.asarray(variable))


def optimizer_facts(model: Any) -> dict[str, Any]:
    """What a trial reports of the compiled model's optimizer: its class name (inside a
    LossScaleOptimizer), its learning rate where it is a number, the class of its
    schedule where it has one."""
    opt = getattr(model, "optimizer", None)
    inner = getattr(opt, "inner_optimizer", opt)
    if inner is None:
        return {}
    facts: dict[str, Any] = {"optimizer": type(inner).__name__}
    raw = getattr(inner, "_learning_rate", None)
    if raw is not None and not hasattr(raw, "assign") and callable(raw):
        facts["lr_schedule"] = type(raw).__name__
        return facts
    try:
        # a float32 variable: 0.001 reads 0.0010000000474974513
        facts["learning_rate"] = float(f"{value_of(inner.learning_rate):.7g}")
    except Exception:
        facts["lr_schedule"] = type(raw).__name__ if raw is not None else "unknown"
    return facts


def apply(model: Any, change: LrChange) -> tuple[Any | None, str]:
    """Scale the compiled model's learning rate as `change` says, with its warm-up;
    (a Keras callback that runs the warm-up, or None; what was done, in words). The
    model's optimizer must be built from a float rate: a schedule is left alone."""
    import keras

    opt = getattr(model, "optimizer", None)
    inner: Any = getattr(opt, "inner_optimizer", opt)
    if inner is None or change.rule == "none" or change.scale == 1.0:
        return None, change.said()
    facts = optimizer_facts(model)
    if "learning_rate" not in facts:
        why = facts.get("lr_schedule", "unknown")
        return None, f"learning rate left as it is: the optimizer's rate is a {why}"
    base = facts["learning_rate"]
    target = base * change.scale

    class Warmup(keras.callbacks.Callback):
        """From the user's rate to `target` over the first `warmup_steps` steps
        (linearly), then `target`; inert after the warm-up."""

        def __init__(self) -> None:
            super().__init__()
            self.done = False

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if self.done:
                return
            step = int(value_of(inner.iterations))
            if step >= change.warmup_steps:
                inner.learning_rate = target
                self.done = True
                return
            inner.learning_rate = base + (target - base) * (step + 1) / change.warmup_steps

    return Warmup(), change.said(f"{base:.3g} -> {target:.3g}")
