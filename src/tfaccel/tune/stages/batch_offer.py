"""The batch offer (`tfaccel.tune.offer`): a ladder of larger batches on the
same-training answer, never past the data or far past the critical batch, and its
races to the same validation loss, by bisection over the ladder's rungs."""

from __future__ import annotations

import dataclasses
from typing import Any

from tfaccel.optimize.lr_scaling import LrChange
from tfaccel.optimize.settings import Settings
from tfaccel.trial.race import POINTS as RACE_POINTS
from tfaccel.trial.runner import (
    TrialResult,
    settings_key,
)
from tfaccel.tune import offer
from tfaccel.tune.core import (
    FOR_OFFER,
    INTERRUPTED,
    KEPT,
    State,
    TunerCore,
    budget_left_s,
    overrun_s,
    stop_here,
)
from tfaccel.tune.result import (
    BatchOffer,
    Race,
)

# Race runs a time budget keeps room for: the same-training run, the rung the
# bisection races first, and the next one it picks (`_race_rungs`).
RACE_RUNS_KEPT = 3
# ... and the ladder itself keeps room for the fewest that can pass one batch.
RACE_RUNS_LADDER = 2
# Before any race run is measured, one is reckoned at its --race seconds and about
# this many trials' time besides: it starts the script, builds and compiles as a trial
# does, and evaluates off its clock (the race runs measured beside their trials: the
# measurements page). Reckoning more skips rungs whose race would have fitted the
# budget. After one, the race runs measured in the tune are the reckoning.
RACE_RUN_TRIALS = 1.25


def batch_offer(tuner: TunerCore, state: State) -> None:
    """Larger batches on top of the same-training answer, as an offer: they change
    what the model learns (`tfaccel.tune.offer`). Never past the data: the ladder
    stops where an epoch would shrink to a handful of steps. Not tried where no race
    could prove one (no validation signal): its trials would spend the budget on an
    offer that cannot be made."""
    res = tuner.result
    if res.best is None or not res.best.ok or res.best_settings is None:
        return
    no_race = _no_race(tuner)
    if no_race:
        res.batch_note = f"{no_race}: no batch change is offered, so none is tried"
        tuner.decide("batch offer", f"none: {res.batch_note}")
        return
    own, largest, why = _ladder_room(tuner, state)
    if largest < 2 * own:
        res.batch_note = why or f"--max-batch {tuner.opt.max_batch} leaves no larger batch"
        tuner.decide("batch offer", f"none: {res.batch_note}")
        return
    if why:
        tuner.decide("batch offer", why)
    unknown = tuner._baseline_fact("noise_scale_why")
    if unknown:
        tuner.decide(
            "batch offer",
            f"no gradient noise scale: {unknown}; nothing but the data caps the ladder, "
            "and the race judges each batch",
        )
    ladder = State(res.best, res.best_settings, state.defaults, state.rtol, offer=True)
    skipped = tuner._skipped
    short_s = _ladder_before_its_race(tuner, ladder, largest)
    if not ladder.rungs:
        if short_s is not None:
            race = _can_race_in_budget(tuner)
            res.batch_note = (
                "not tried: the time budget leaves too little for a ladder trial"
                + (" and its race" if race else "")
                + f" (about {short_s:.0f} s more: a longer --time-budget"
                + (", or a shorter --race)" if race else ")")
            )
        elif tuner._skipped > skipped:
            res.batch_note = "not tried: the time budget was reached"
        else:
            res.batch_note = "no larger batch ran faster beyond the noise"
        return
    res.batch_offer = _race_rungs(tuner, ladder.rungs)


def _ladder_before_its_race(tuner: TunerCore, ladder: State, largest: int) -> float | None:
    """The ladder, in the time a time budget leaves after a race of its best rung (the
    same-training run and one candidate, `RACE_RUNS_LADDER`): a rung that ran faster
    but could not be raced proves nothing, while a smaller rung raced can pass. A
    model that compiles for a minute per trial stops its ladder early and races what
    it found (said). Where the budget (or the time kept in it) left no rung at all:
    about how many seconds more it needed for one rung and its race."""
    kept, skipped = tuner._kept, tuner._skipped
    tuner.reserve_s = RACE_RUNS_LADDER * _race_run_s(tuner) if _can_race_in_budget(tuner) else 0.0
    tuner.reserve_for = "the batch offer's race"
    try:
        _batch_ladder(tuner, ladder, largest, stage="batch offer")
        short_s = overrun_s(tuner)  # with the time kept, as the skipped rung was judged
    finally:
        reserve, tuner.reserve_s, tuner.reserve_for = tuner.reserve_s, 0.0, FOR_OFFER
    if not ladder.rungs and (tuner._kept > kept or tuner._skipped > skipped):
        return short_s
    if tuner._kept == kept:
        return None
    tuner.decide(
        "batch offer",
        f"the ladder stopped at batch {tuner._batch(ladder)}: the budget's last "
        f"{reserve:.0f} s are kept for its race (the same-training run and the candidate)",
    )
    return None


def keep_time(tuner: TunerCore, state: State) -> None:
    """Keep the end of a time budget for the batch offer, where one can be raced,
    before the late same-training stages: their knobs gain a few percent at best, a
    passed race can train to the same loss several times sooner, and a budget that
    runs out first leaves the offer unproven. Kept: a trial for each batch the ladder
    may try, and RACE_RUNS_KEPT race runs (`_race_run_s`); `release_time` gives it
    back before the answer is settled. Where what is left cannot hold the least an
    offer needs (a rung and RACE_RUNS_LADDER race runs), nothing is kept: the late
    stages have the time, and the offer says what it lacked.
    The stages before (precision, XLA, steps_per_execution, the inputs) always run
    first."""
    if not _can_race_in_budget(tuner) or _no_race(tuner):
        return
    own, largest, _ = _ladder_room(tuner, state)
    rungs = 0
    while own * 2 ** (2 * rungs + 1) <= largest:  # the ladder's 4x steps (a 2x last)
        rungs += 1
    if not rungs:
        return
    race_s = _race_run_s(tuner)
    least = tuner.mean_trial_s + RACE_RUNS_LADDER * race_s
    left = max(0.0, budget_left_s(tuner) or 0.0)
    if left < least:
        tuner.decide(
            "time budget",
            f"none kept for the batch offer: the {left:.0f} s left cannot hold a ladder trial "
            f"and its race (about {least:.0f} s); the late stages have them",
        )
        return
    wanted = rungs * tuner.mean_trial_s + RACE_RUNS_KEPT * race_s
    tuner.reserve_s = min(wanted, left)  # what is left, where it wants more


def _can_race_in_budget(tuner: TunerCore) -> bool:
    """Is there a time budget to keep room in, and a race (`--race` not 0)?"""
    return tuner.opt.time_budget_s is not None and bool(tuner.opt.race_s)


def _race_run_s(tuner: TunerCore) -> float:
    """What a race run is expected to take: `race_s` and the mean time the race runs
    measured (or resumed) in this tune took besides; before any, RACE_RUN_TRIALS of a
    trial's mean time."""
    spent = tuner._race_overheads.values()
    besides = sum(spent) / len(spent) if spent else RACE_RUN_TRIALS * tuner.mean_trial_s
    return tuner.opt.race_s + besides


def _ladder_room(tuner: TunerCore, state: State) -> tuple[int, int, str | None]:
    """The user's batch, the largest batch the offer may try, and why that is below
    --max-batch (the data, or the gradient noise scale)."""
    own = tuner._batch(state)
    largest, why = offer.largest_batch(
        own, tuner.opt.max_batch, tuner._examples(), tuner._baseline_fact("noise_scale")
    )
    return own, largest, why


def release_time(tuner: TunerCore) -> None:
    """Give the kept time back to the batch offer, saying which trials it cost."""
    if tuner._kept:
        tuner.decide(
            "time budget",
            f"{tuner._kept} trial(s) not run: the budget's last {tuner.reserve_s:.0f} s were "
            "kept for the batch offer's ladder and race (a passed race can save far more "
            "time than a late knob gains)",
        )
    tuner.reserve_s = 0.0


def _race_rungs(tuner: TunerCore, rungs: list[tuple[TrialResult, Settings]]) -> BatchOffer:
    """The ladder's faster batches raced by bisection: the middle rung first (the lower
    of two), then the half above it where it passes and the half below where it fails
    (a batch past the critical one loses where a smaller one wins), so that three rungs
    take two races, not three; where the budget holds one race only, the lowest rung
    (`_next_rung`), so that a budget that ends early has raced the rung the likeliest
    to pass (the lower of two rungs too: a transformer whose trials compile for a
    minute raced its 16x rung first, which overfit, and its 4x rung was left unraced at
    the budget). The same-training run is raced once and read from the journal after.
    The largest batch that passed stands; without one, the last verdict: the smallest
    raced rung's failure, or an unproven race (the budget, an error), after which
    nothing more is raced."""
    res = tuner.result
    assert res.best is not None
    offers = [offer.make(res.best, trial, settings, res.baseline) for trial, settings in rungs]
    low, high = 0, len(offers) - 1
    passed: BatchOffer | None = None
    judged: BatchOffer | None = None
    while low <= high:
        middle = _next_rung(tuner, offers, low, high)
        judged = _raced(tuner, offers[middle])
        if judged.race is not None:
            res.races.append(judged)
        tuner.decide("batch offer", judged.summary)
        _say_script_epochs(tuner, judged)
        if judged.verdict == "passed":
            passed, low = judged, middle + 1
        elif judged.verdict == "failed":
            high = middle - 1
        else:
            break
    assert judged is not None
    return passed or judged


def _next_rung(tuner: TunerCore, offers: list[BatchOffer], low: int, high: int) -> int:
    """The rung the bisection races next: the middle of those left, unless the time
    budget holds only this one race (its candidate run, and the same-training run where
    the journal lacks it): then the lowest, the likeliest to pass, since a larger rung
    that fails (overfitting, say) proves nothing and leaves the smaller one unraced. A
    middle rung whose race the journal holds costs nothing: it is read first."""
    middle = (low + high) // 2
    if middle == low or _journaled(tuner, offers[middle].settings, offers[middle].lr):
        return middle
    assert tuner.result.best_settings is not None
    same_known = _journaled(tuner, tuner.result.best_settings, None)
    runs = (1 if same_known else 2) + 1  # this race's runs, and one candidate's after
    return low if _runs_past_budget(tuner, runs) else middle


def rebase(tuner: TunerCore) -> None:
    """The offer's settings besides its batch, said against the same-training answer
    settled after it (`Tuner.after_offer`): `tfaccel run --batch-offer` applies the
    answer with these, so it still runs what was raced."""
    res = tuner.result
    found = res.batch_offer
    if found is None or res.best_settings is None:
        return
    other = offer.other_settings(res.best_settings, found.settings)
    res.batch_offer = dataclasses.replace(found, other_settings=other)


def _no_race(tuner: TunerCore) -> str | None:
    """Why the offer cannot be raced: the trials said the model has no validation
    signal (synthetic data, a train_step of its own)."""
    base = tuner.result.baseline
    return base.extra.get("no_race") if base is not None else None


def _raced(tuner: TunerCore, found: BatchOffer) -> BatchOffer:
    """The offer judged by a race against the same-training answer, from the
    journal where it holds both runs; unproven where the race is off (race_s 0)
    or the time budget leaves too little for it."""
    res = tuner.result
    assert res.best_settings is not None
    if not tuner.opt.race_s:
        off = "not raced: the race is off (--race 0): without one, no batch change is proven"
        return dataclasses.replace(found, why=off)
    # the same-training run starts only where the candidate's run fits after it
    after = 0 if _journaled(tuner, found.settings, found.lr) else 1
    same = _race_run(tuner, res.best_settings, None, after)
    candidate = _race_run(tuner, found.settings, found.lr) if same is not None else None
    if same is None or candidate is None:
        budget = "the time budget was reached (run the same command again to race it)"
        stop = INTERRUPTED if res.interrupted else budget
        return dataclasses.replace(found, why=f"not raced: {stop}")
    race = offer.race_of(
        tuner.opt.race_s,
        str(same.extra.get("validation") or candidate.extra.get("validation") or ""),
        [tuple(point) for point in same.extra.get("race") or ()],
        [tuple(point) for point in candidate.extra.get("race") or ()],
        error=next(
            (f"{trial.label}: {trial.error}" for trial in (same, candidate) if not trial.ok), None
        ),
    )
    judged = offer.judged(found, race, tuner.opt.race_s / RACE_POINTS)
    return dataclasses.replace(judged, epochs_to_target=_epochs(tuner, race, candidate))


def _say_script_epochs(tuner: TunerCore, judged: BatchOffer) -> None:
    """Where a passed offer reached its target only after more epochs than the script's
    fit trains, that is said: applied to the script as written, its training ends
    before the loss the race proved it reaches sooner (a tiny data set raced for a
    minute trains hundreds of epochs)."""
    epochs, fit_epochs = judged.epochs_to_target, tuner._baseline_fact("fit_epochs")
    if judged.verdict != "passed" or not epochs or not fit_epochs or epochs <= fit_epochs:
        return
    tuner.decide(
        "batch offer",
        f"{offer.reached_after(judged.batch, 'the target', epochs)}; the script's fit "
        f"trains {fit_epochs}: applied to it as written, it ends before that loss (more epochs, "
        "or stop on the validation loss, for the time the race saved)",
    )


def _epochs(tuner: TunerCore, race: Race, candidate: TrialResult) -> float | None:
    """Epochs the candidate trained before it reached the target, as the script counts
    them: of its fit's `steps_per_epoch` batches where it sets them (an endless
    dataset's epoch, as the warm-up's: `offer.lr_change`), else of the data."""
    count = tuner._baseline_fact("epoch_examples") or tuner._examples()
    if race.candidate_s is None or not count or not candidate.samples_per_s:
        return None
    return race.candidate_s * candidate.samples_per_s / count


def _race_key(
    tuner: TunerCore, settings: Settings, lr: LrChange | None
) -> tuple[str, dict[str, Any]]:
    """A race run's journal key, and the extras its trial is asked for."""
    change = lr.to_dict() if lr is not None and lr.rule != "none" else None
    extra = {"race": {"seconds": tuner.opt.race_s, "lr": change}}
    return settings_key(tuner.workload, settings, tuner.opt.steps, extra), extra


def _journaled(tuner: TunerCore, settings: Settings, lr: LrChange | None) -> bool:
    """Does the journal hold this race run (read again, not measured)?"""
    return _race_key(tuner, settings, lr)[0] in tuner.journal.results


def _runs_past_budget(tuner: TunerCore, runs: int) -> bool:
    """Would `runs` race runs started now likely end past the time budget (each reckoned
    by `_race_run_s`; `_over_budget` reckons the next trial at the mean, so the runs'
    time is told as that much longer)?"""
    return tuner._over_budget(runs * _race_run_s(tuner) - tuner.mean_trial_s)


def _race_run(
    tuner: TunerCore, settings: Settings, lr: LrChange | None, after: int = 0
) -> TrialResult | None:
    """One run of a race, from the journal or measured (and journaled); None where
    the time budget leaves too little for it and the `after` race runs to follow."""
    key, extra = _race_key(tuner, settings, lr)
    done = tuner.journal.results.get(key)
    if done is not None:
        _count_race_run(tuner, done, done.wall_s)
        return done
    if _runs_past_budget(tuner, 1 + after):
        tuner._skipped += 1
        return None
    if tuner.on_trial:
        tuner.on_trial("race", None, settings)
    timeout = max(tuner.opt.timeout_s, 3 * tuner.opt.race_s)
    started = tuner.clock()
    try:
        trial = tuner.race_fn(tuner.workload, settings, tuner.opt.steps, timeout, extra)
    except KeyboardInterrupt:
        if not stop_here(tuner):
            raise
        return None
    trial = dataclasses.replace(trial, key=key)
    tuner.journal.append(tuner.workload, trial)
    _count_race_run(tuner, trial, tuner.clock() - started)
    if tuner.on_trial:
        tuner.on_trial("race", trial, settings)
    return trial


def _count_race_run(tuner: TunerCore, run: TrialResult, wall_s: float) -> None:
    """Keep what a finished race run took besides its race seconds (`_race_run_s`),
    once a run (the same-training run is read again for each later race)."""
    if run.ok and wall_s > 0:
        tuner._race_overheads[run.key] = max(0.0, wall_s - tuner.opt.race_s)


def _batch_ladder(tuner: TunerCore, state: State, largest: int, stage: str = "batch size") -> None:
    """Grow the batch while it fits and gains beyond the noise, 4x at a step where
    `largest` leaves room (one trial where doubling takes two), else 2x. A 4x step
    that fails or runs slower beyond the noise is followed by the 2x step between it
    and the best, the ladder's last; one within the noise ends the ladder, since the
    batch between would gain less."""
    batch = tuner._batch(state)
    while batch * 2 <= largest:
        factor = 4 if batch * 4 <= largest else 2
        step, _ = _ladder_step(tuner, state, batch, batch * factor, stage)
        if step == "kept":
            batch *= factor
            continue
        if factor == 4 and step == "worse":
            _ladder_step(tuner, state, batch, batch * 2, stage)
        break  # (a skipped rung too: the budget, or its race's time, stops the ladder)


def _ladder_step(
    tuner: TunerCore, state: State, batch: int, to: int, stage: str
) -> tuple[str, float]:
    """One trial of the ladder, batch `b` (the best) to `to`: ("kept", "even"
    (within the noise), "worse" (failed, or slower beyond the noise) or "skipped" (not
    run: the budget), the gain)."""
    settings = state.best_s.replace(batch_size=to)
    trial = tuner.trial(settings, stage)
    if not trial.ok:
        if not (trial.error or "").startswith(KEPT):  # its race's time: said once, after
            why = " (does not fit)" if trial.status == "oom" else f" ({trial.error})"
            tuner.decide(stage, f"batch {to}: {trial.status}{why}")
        return ("skipped" if trial.status == "skipped" else "worse"), 0.0
    c = tuner.compare(trial, state.best)
    if c.win:
        tuner.decide(stage, f"batch {to}: {c.gain:+.0%} over batch {batch}")
        tuner._improved(state, c.new, settings)
        return "kept", c.gain
    even = c.gain >= -c.thr
    if to == 2 * batch:
        then = "stop"
    else:
        then = f"stop (batch {batch * 2} would gain less)" if even else f"batch {batch * 2} instead"
    tuner.decide(stage, f"batch {to}: {c.gain:+.0%} vs batch {batch}, {c.short_of}: {then}")
    return ("even" if even else "worse"), c.gain
