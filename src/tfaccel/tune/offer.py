"""The batch offer: a larger batch than the user's, proven or refused by a race.

A larger batch runs more samples per second but takes fewer optimizer steps per epoch,
so it changes what the model learns. It is offered, never applied silently:
- never past the data: the ladder stops where an epoch would shrink to fewer than
  MIN_STEPS_PER_EPOCH steps;
- with the learning-rate rule that goes with it (`tfaccel.optimize.lr_scaling`);
- judged by a race (`tfaccel.trial.race`): from the same initial weights, the
  same-training answer and the candidate train for the same time, and the figure is
  the time each needs to reach the best validation loss the same-training run reached.
  It passes only if the candidate gets there sooner by more than RACE_MARGIN and more
  than one evaluation interval.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

from tfaccel.optimize.lr_scaling import LrChange, change_for
from tfaccel.optimize.settings import Settings, changed
from tfaccel.trial.runner import TrialResult
from tfaccel.tune.result import BatchOffer, Race

# An epoch of fewer steps than this is "a handful": the ladder stops before it.
MIN_STEPS_PER_EPOCH = 16
# Each curve is read as the trailing mean of this many evaluations: on a plateau the
# single best evaluation of a noisy curve is no target another run can be held to.
SMOOTH = 3
# How far past the noise scale measured early in training the ladder may go:
# the noise scale grows as the loss falls (McCandlish et al. 2018, section 3.2).
NOISE_SCALE_FACTOR = 8
# A candidate must reach the target this much sooner (and by more than one evaluation
# interval) to pass: one race of each is a single sample of a noisy curve.
RACE_MARGIN = 0.10
# A target below this fraction of the first reading is numerically zero: a task the
# same-training run solved outright, whose times say little of a harder one.
NEAR_ZERO = 1e-4


def largest_batch(
    own: int, max_batch: int, examples: int | None, noise_scale: float | None = None
) -> tuple[int, str | None]:
    """The largest batch the offer may try, and why it is below `max_batch` where the
    data or the gradient noise scale caps it."""
    caps: list[tuple[int, str | None]] = [(max_batch, None)]
    if examples:
        why: str | None = (
            f"the data's {examples:,} examples would make an epoch of fewer than "
            f"{MIN_STEPS_PER_EPOCH} steps beyond it"
        )
        caps.append((examples // MIN_STEPS_PER_EPOCH, why))
    if noise_scale:
        why = (
            f"the gradient noise scale, about {_figure(noise_scale)} early in training, "
            f"predicts that batches far beyond it save few steps (it grows as the loss "
            f"falls: {NOISE_SCALE_FACTOR}x is left for that)"
        )
        caps.append((int(NOISE_SCALE_FACTOR * noise_scale), why))
    cap, reason = min(caps, key=lambda cap_reason: cap_reason[0])
    if reason and cap <= own:
        return own, f"no batch above the script's {own}: {reason}"
    if reason and cap < 2 * own:  # the ladder's first rung, twice the user's, is past it
        return own, f"no batch above the script's {own}: twice it is past {cap}, and {reason}"
    return max(cap, own), (f"batches up to {cap}: {reason}" if reason else None)


def reached_after(batch: int, what: str, epochs: float) -> str:
    """In words, how many epochs of the data a raced batch trained before it reached
    `what` (the target): whole epochs from 100 on, tenths below."""
    return (
        f"in its race, batch {batch} reached {what} after about "
        f"{epochs:,.{0 if epochs >= 100 else 1}f} epochs"
    )


def _figure(value: float) -> str:
    """A measured figure to two significant digits below 10 (0.37, 2.4), whole above."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def lr_change(
    same: TrialResult, batch: int, from_batch: int, baseline: TrialResult | None
) -> LrChange:
    """The learning-rate change for `batch`, from what the trials read of the model's
    optimizer (the baseline's, else the same-training answer's)."""
    facts = baseline.extra if baseline is not None and baseline.extra.get("optimizer") else None
    facts = facts or same.extra
    examples = facts.get("examples") or (baseline.extra.get("examples") if baseline else None)
    epoch = facts.get("epoch_examples") or examples  # the warm-up: about an epoch's steps
    steps = int(epoch) // batch if epoch else None
    setters = tuple(facts.get("lr_setters") or ())
    return change_for(
        batch / from_batch, facts.get("optimizer"), facts.get("lr_schedule"), steps, setters
    )


def make(
    same: TrialResult, candidate: TrialResult, s: Settings, baseline: TrialResult | None
) -> BatchOffer:
    """The offer of `candidate` (settings `s`) over the same-training answer `same`,
    not raced yet."""
    own = int(same.settings.get("batch_size") or 32)
    batch = int(s.batch_size or own)
    speedup = (candidate.samples_per_s or 0.0) / (same.samples_per_s or 1.0)
    lr = lr_change(same, batch, own, baseline)
    # Settings, not the trial's dict: a journal's line has lists for tuples
    other = other_settings(Settings(**same.settings), s)
    return BatchOffer(s, candidate, own, speedup, lr, "unproven", "not raced", other_settings=other)


def other_settings(answer: Settings, offered: Settings) -> dict[str, Any]:
    """Where an offer's settings differ from the same-training answer's, besides the
    batch size (`BatchOffer.other_settings`)."""
    other = changed(answer, offered)
    other.pop("batch_size", None)
    return other


def time_to(curve: Sequence[tuple[float, float]], target: float) -> float | None:
    """The first time a curve's validation loss is at or below `target`."""
    return next((seconds for seconds, loss in curve if loss <= target), None)


def race_of(
    seconds: float,
    validation: str,
    same: Sequence[tuple[float, ...]],
    candidate: Sequence[tuple[float, ...]],
    error: str | None = None,
) -> Race:
    """The race's figures: the target is the best validation loss of the same-training
    run, and each run's time to reach it, both on the curves smoothed over SMOOTH
    evaluations (NaN, a diverged run, never reaches it)."""
    same_c, cand_c = _validation_curve(same), _validation_curve(candidate)
    same_m, cand_m = smoothed(same_c), smoothed(cand_c)
    target = min((value for _, value in same_m if math.isfinite(value)), default=None)
    return Race(
        seconds,
        validation,
        same_c,
        cand_c,
        target,
        time_to(same_m, target) if target is not None else None,
        time_to(cand_m, target) if target is not None else None,
        error,
        same_m[-1][1] if same_m else None,
        cand_m[-1][1] if cand_m else None,
        tuple(
            (float(point[0]), float(point[2]))
            for point in candidate
            if len(point) > 2 and point[2] is not None
        ),
    )


def _validation_curve(points: Sequence[Sequence[Any]]) -> tuple[tuple[float, float], ...]:
    """(seconds, validation loss) of a race run's points ([t, val] or [t, val, train])."""
    return tuple((float(point[0]), float(point[1])) for point in points)


def smoothed(curve: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Each point's loss as the mean of it and up to SMOOTH - 1 points before it."""
    out = []
    for i, (seconds, _) in enumerate(curve):
        window = [value for _, value in curve[max(0, i - SMOOTH + 1) : i + 1]]
        out.append((seconds, sum(window) / len(window)))
    return out


def _ended_worse(race: Race) -> bool:
    """Did the candidate end the race worse than the same-training run beyond the
    margin (or diverge), whenever it reached the target?"""
    end, same = race.candidate_end, race.same_end
    if end is None or same is None:
        return False
    return not math.isfinite(end) or end > same * (1 + RACE_MARGIN)


def overfits(race: Race) -> bool:
    """Does the candidate's training loss still fall (`_training_still_falls`) while its
    validation loss ended worse, after holding the target for more than one (smoothed)
    evaluation? Then it overfits, having trained more epochs in the race than the
    same-training run, and early stopping keeps the model it reached; a run that
    diverges loses on both, and one that touched the target once, by the noise of one
    evaluation, did not show it reached it."""
    target = race.target if race.target is not None else -math.inf
    held = [value for _, value in smoothed(race.candidate) if value <= target]
    return len(held) > 1 and _training_still_falls(race)


def _training_still_falls(race: Race) -> bool:
    """Does the candidate's (smoothed) training loss end near its lowest, within
    RACE_MARGIN?"""
    train = smoothed([point for point in race.candidate_train if point[0] > 0])
    if len(train) < 2 or not all(math.isfinite(value) for _, value in train):
        return False
    return train[-1][1] <= min(value for _, value in train) * (1 + RACE_MARGIN)


def judged(offer: BatchOffer, race: Race, interval_s: float) -> BatchOffer:
    """The offer with the race's verdict: passed only where the candidate reached the
    target sooner by more than RACE_MARGIN and more than one evaluation interval, and
    ended the race no worse than the same-training run beyond RACE_MARGIN (one that
    gets there and then drifts away, or diverges, is no sooner trained model), unless
    its training loss still falls: then it overfits, which is said."""
    verdict: Literal["passed", "failed", "unproven"]
    if race.error:
        verdict, why = "unproven", f"the race did not finish ({race.error})"
    elif race.same_s is None or race.target is None:
        verdict, why = "unproven", "the same-training run recorded no validation loss"
    elif race.same and race.same_s <= race.same[0][0]:
        verdict = "unproven"
        why = (
            f"the same-training run's validation loss never fell below its first reading "
            f"({race.target:.4g}) in the {race.seconds:.0f} s race: a race cannot tell which "
            "learns sooner (a longer --race, or validation data the model learns to fit)"
        )
    elif race.candidate_s is None:
        verdict = "failed"
        why = (
            f"more samples per second, but it did not reach the validation loss "
            f"{race.target:.4g} of the same-training run in the {race.seconds:.0f} s race"
        ) + _closest(race)
    elif _ended_worse(race) and not overfits(race):
        verdict = "failed"
        why = (
            f"it reaches the validation loss {race.target:.4g} in {race.candidate_s:.0f} s, "
            f"but ends the race at {race.candidate_end:.4g} against the same-training run's "
            f"{race.same_end:.4g}: "
        )
        why += (
            "it holds the target for one evaluation only, then its validation loss rises "
            "while its training loss still falls (it overfits): one evaluation at the target "
            "is no proof it got there"
            if _training_still_falls(race)
            else "it drifts away from it (as a learning rate too large does)"
        )
    else:
        gained = race.same_s - race.candidate_s
        sooner = race.to_target_speedup or 0.0
        if gained > max(RACE_MARGIN * race.same_s, interval_s):
            verdict = "passed"
            why = (
                f"reaches the validation loss {race.target:.4g} of the same-training run "
                f"{sooner:.2f}x sooner ({race.candidate_s:.0f} s vs {race.same_s:.0f} s, "
                f"race of {race.seconds:.0f} s)"
            )
            if _ended_worse(race):
                why += (
                    "; later in the race its validation loss rises while its training loss "
                    "still falls: it overfits (stop on the validation loss, e.g. Keras' "
                    "EarlyStopping with restore_best_weights)"
                )
        else:
            verdict = "failed"
            why = (
                f"more samples per second, but it reaches the validation loss "
                f"{race.target:.4g} no sooner beyond the noise ({race.candidate_s:.0f} s vs "
                f"{race.same_s:.0f} s, race of {race.seconds:.0f} s)"
            )
    return dataclasses.replace(offer, verdict=verdict, why=why + _near_zero(race), race=race)


def _closest(race: Race) -> str:
    """Where a candidate that never reached the target came closest (both read as the
    target is, smoothed), and whether it then overfit: a batch that gets near the
    target sooner and then overfits is told from one that stalls above it."""
    finite = [(value, t) for t, value in smoothed(race.candidate) if math.isfinite(value)]
    if not finite or race.target is None or race.target <= 0:
        return ""
    best, at = min(finite)
    said = (
        f" (its best, {best:.4g} at {at:.0f} s, {best / race.target - 1:.0%} above it; "
        f"each reading the mean of up to {SMOOTH} evaluations, as the target's)"
    )
    if _ended_worse(race) and _training_still_falls(race):
        said += "; then its validation loss rose while its training loss fell: it overfits"
    return said


def _near_zero(race: Race) -> str:
    """Said of a race whose target is numerically zero (a trivially separable task)."""
    first = race.same[0][1] if race.same else None
    if race.target is None or not first or not 0 <= race.target < NEAR_ZERO * first:
        return ""
    return (
        f"; the same-training run drove the validation loss to about zero ({race.target:.2g}, "
        f"from {first:.3g}): the race times how soon each solves the task outright"
    )
