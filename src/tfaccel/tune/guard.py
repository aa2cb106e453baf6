"""The accuracy guard: a trial that changes the arithmetic (a 16-bit precision, a rewrite
of XLA's) is kept only if its losses stay finite and close to a 32-bit run's."""

from __future__ import annotations

import math

from tfaccel.trial.runner import TrialResult


def loss_steps(trial: TrialResult) -> list[int]:
    """The training step each of the trial's losses ends: a trial records one loss per
    execution, and an execution of steps_per_execution N ends at step N-1, 2N-1, ..."""
    spe = int(trial.settings.get("steps_per_execution") or 1)
    return [(i + 1) * spe - 1 for i in range(len(trial.losses))]


def _mean_losses(first: TrialResult, second: TrialResult) -> tuple[float, float, float] | None:
    """(mean of a's losses, mean of b's, |difference| / b's scale) over the steps both
    recorded; None if they share none (one execution of 25 steps against 1 step: the
    losses at steps 24, 49, ... against 0, 1, ... compare nothing). b's scale is the
    mean of its losses' magnitudes: its mean for a loss that is never negative (every
    Keras loss), and for one that changes sign (a WGAN critic's `d_loss`, a difference
    of two means) not a mean that cancels towards zero, against which any gap would
    look huge."""
    at_b = dict(zip(loss_steps(second), second.losses, strict=True))
    pairs = [
        (x, at_b[i]) for i, x in zip(loss_steps(first), first.losses, strict=True) if i in at_b
    ]
    if not pairs:
        return None
    mean_first, mean_second = (sum(pair[side] for pair in pairs) / len(pairs) for side in (0, 1))
    scale = sum(abs(pair[1]) for pair in pairs) / len(pairs)
    return mean_first, mean_second, abs(mean_first - mean_second) / max(scale, 1e-12)


def mean_loss_gap(first: TrialResult, second: TrialResult) -> float | None:
    """|mean(a) - mean(b)| / |mean(b)| over the losses both recorded (None if either has
    none or is not finite)."""
    means = _mean_losses(first, second)
    return means[2] if means is not None and math.isfinite(means[2]) else None


# Where neither run's steps log a loss that can be read (`trial.shared.logged_loss`):
# NaN at every step of both, which is no sign of a diverging 16-bit run.
UNREADABLE = (
    "neither run's training steps log a loss to compare (no entry named like one, or "
    "only the loss that Keras 3's compiled_metrics shim fills with the predictions): "
    "nothing shows that it trains as the 32-bit run does"
)


def _readable(trial: TrialResult) -> bool:
    return any(math.isfinite(x) for x in trial.losses)


def loss_close(candidate: TrialResult, reference: TrialResult, rtol: float) -> tuple[bool, str]:
    """The accuracy guard: finite losses whose mean is within rtol of the reference's."""
    if not candidate.losses:
        return False, "no loss was recorded"
    if not _readable(candidate) and not _readable(reference):
        return False, UNREADABLE
    if any(not math.isfinite(x) for x in candidate.losses):
        return False, "the loss became NaN or infinite"
    means = _mean_losses(candidate, reference)
    if means is None:
        return True, "no reference losses at the same steps to compare with"
    mean_first, mean_second, rel = means
    if not math.isfinite(mean_second):
        return False, f"{reference.label}'s loss is NaN or infinite: nothing to hold it to"
    if rel > rtol:
        return (
            False,
            f"mean loss {mean_first:.4g} vs {mean_second:.4g} of {reference.label} "
            f"({rel:.1%} > {rtol:.1%})",
        )
    return True, f"mean loss {mean_first:.4g} vs {mean_second:.4g} of {reference.label} ({rel:.1%})"
