"""Which of two trials' figures is faster beyond the noise: figures of one machine (a
journal's trial of another measured again here), the one noise rule (`gain_floor`:
the noise floor, the trials' windows and the drift between processes, a first run on a
cold machine left out of it: `cold_first`), and a second run of each trial where only
the baseline's drift hides a gain (`compare`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

from tfaccel import stats
from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import TrialResult, beats, settings_key, trial_noise
from tfaccel.tune.result import TuneOptions, TuneResult

if TYPE_CHECKING:
    from tfaccel.tune.core import TunerCore

# The stage of a journal's trial of another machine, measured again here.
AGAIN = "again, here"


def processes(trial: TrialResult) -> int:
    """In how many processes `trial`'s figure was measured (`merge_runs`)."""
    return int(trial.extra.get("processes", 1))


def repeats_here(tuner: TunerCore, key: str) -> list[TrialResult]:
    """The journal's good runs of trial `key` measured once more on this machine, each
    in a process of its own (`Journal.append_repeat`)."""
    return [run for run in tuner.journal.repeats.get((key, tuner.journal.machine), []) if run.ok]


def drift_of(result: TuneResult, *trials: TrialResult) -> float:
    """The drift between processes that a comparison of `trials` allows for: none where
    each was measured in two processes or more (their windows, merged, hold their own
    drift), else the baseline's (`references._repeat_baseline`), which stands in."""
    if trials and all(processes(trial) > 1 for trial in trials):
        return 0.0
    return result.drift_between_trials or 0.0


def gain_floor(opt: TuneOptions, result: TuneResult, *trials: TrialResult) -> float:
    """The smallest gain of one trial over another (`trials`) that counts: the noise
    floor, or twice the drift between processes (`drift_of`: each trial is a process,
    and on some machines their figures lie further apart than one's windows)."""
    return max(opt.noise_floor, 2 * drift_of(result, *trials))


def cold_first(rates: list[float]) -> bool:
    """Whether the first of three runs ran cold: the later two agree (within
    `stats.BUSY`) and the first lies more than BUSY below each. A tune's first process
    can meet a cold machine (kernels the driver compiles and caches, autotuning): a
    GAN's float32 baseline ran about 30 % slower there than in the next process, while
    its XLA trials agreed (the measurements page). A first run as far *above* has no
    such cause, and leaving it out would lower the baseline and raise every speed-up
    over it: it counts, as drift."""
    if len(rates) < 3:
        return False
    first, later = rates[0], rates[1:]
    return (stats.spread(later) or 0.0) <= stats.BUSY and all(
        rate - first > stats.BUSY * rate for rate in later
    )


def threshold_text(opt: TuneOptions, new: TrialResult, best: TrialResult, thr: float) -> str:
    """A comparison's threshold in words: its figure, and what raised it above the noise
    floor where something did (a trial's windows, or the drift between processes), so
    that a threshold above the one the noise line gave is not a riddle."""
    shown = f"{thr:.0%}"
    if thr <= opt.noise_floor:
        return shown
    noisy = max((new, best), key=trial_noise)
    if 2 * trial_noise(noisy) >= thr:
        whose = "its" if noisy is new else f"{noisy.label}'s"
        return f"{shown}: {whose} windows spread {trial_noise(noisy):.0%}"
    return f"{shown}: twice the drift between processes"


def merge_runs(
    tuner: TunerCore, runs: list[TrialResult], counted: list[TrialResult] | None = None
) -> TrialResult:
    """One trial's runs, each a process of its own, as one figure: the median of all
    their windows (of those `counted`, where a first run on a cold machine is left out),
    their spread (which holds the drift between them); in place of the first run
    everywhere the tune reads it (the trials' list, the references, the journal's
    figures in memory, not its file), so that the table, the comparisons and the
    speedups agree."""
    res, first = tuner.result, runs[0]
    counted = runs if counted is None else counted
    windows = tuple(window for run in counted for window in run.windows)
    merged = dataclasses.replace(
        first,
        samples_per_s=stats.median(windows),
        windows=windows,
        spread=stats.spread(windows),
        extra={**first.extra, "processes": len(counted)},
    )
    res.trials = [merged if trial is first else trial for trial in res.trials]
    for name in ("baseline", "keras_defaults", "best"):
        if getattr(res, name) is first:
            setattr(res, name, merged)
    if tuner.journal.results.get(first.key) is first:
        tuner.journal.results[first.key] = merged
    tuner.merged[first.key] = merged
    return merged


def as_one(tuner: TunerCore, trial: TrialResult) -> TrialResult:
    """`trial`'s runs on this machine as one figure (`merge_runs`), where it has more than
    one; a figure of another machine as it is."""
    j = tuner.journal
    if j.machine is not None and j.machine_of_figure(trial) != j.machine:
        return trial
    return tuner.merged.get(trial.key, trial)


class Comparison(NamedTuple):
    """What `compare` found: whether `new` beats `best` beyond the noise, by what gain,
    against which threshold (also in words: `threshold_text`), with the figures
    compared (merged runs, this machine's)."""

    win: bool
    gain: float
    thr: float
    new: TrialResult
    best: TrialResult
    shown: str

    @property
    def short_of(self) -> str:
        """Why `new` was not kept: slower beyond the noise, or within it."""
        where = "slower beyond" if self.gain < -self.thr else "within"
        return f"{where} the noise ({self.shown})"


def compare(tuner: TunerCore, new: TrialResult, best: TrialResult) -> Comparison:
    """`beats(new, best)`, between figures of one machine where the journal has them.

    A tune resumed on another machine (another host, or this one after a reboot:
    two machines of one GPU kind can run a model 4-5 % apart) replays the journal's trials
    as they were, but a trial measured here is compared with a figure of here: the
    reference is measured again first when it has none. Where only the baseline's drift
    between processes hides the gain, each trial runs once more (`_worth_again`).
    """
    j = tuner.journal
    if j.machine is not None and new.ok and best is not None and best.ok:
        pair = j.one_machine(new.key, best.key)
        if pair is not None:
            new, best = pair
        elif j.here(new.key):
            best = _measured_here(tuner, best)
    new, best = as_one(tuner, new), as_one(tuner, best)
    win, gain, thr = beats(new, best, gain_floor(tuner.opt, tuner.result, new, best))
    if not win and _worth_again(tuner, new, best):
        floor = thr
        new, best = _with_repeat(tuner, new), _with_repeat(tuner, best)
        win, gain, thr = beats(new, best, gain_floor(tuner.opt, tuner.result, new, best))
        tuner.decide(
            "noise",
            f"{new.label} against {best.label}: a gain beyond their windows' noise but "
            f"within twice the baseline's drift between processes ({floor:.0%}), so each "
            f"was measured again in a process of its own: over both runs {gain:+.0%}, "
            f"{'beyond' if win else 'within'} their noise ({thr:.0%})",
        )
    return Comparison(win, gain, thr, new, best, threshold_text(tuner.opt, new, best, thr))


def _worth_again(tuner: TunerCore, new: TrialResult, best: TrialResult) -> bool:
    """Is a gain that only the baseline's drift between processes hides worth a
    process more of each trial (the time budget allowing)? The baseline's drift
    stands in for every trial's, but a model's processes can drift in one set of
    settings and not in another (cuDNN's autotuning without XLA picks its
    convolutions anew in each; XLA's executables are the same), and two runs of each
    trial measure their own."""
    if not (new.ok and best.ok) or tuner.result.interrupted:
        return False
    if not (tuner.journal.here(new.key) and tuner.journal.here(best.key)):
        return False
    if not beats(new, best, tuner.opt.noise_floor)[0]:
        return False  # within the noise of their own windows: nothing to settle
    single = [trial for trial in (new, best) if processes(trial) < 2]
    if not single:
        return False
    # a resumed tune replays the journal's repeats whatever the budget left
    to_run = sum(not repeats_here(tuner, trial.key) for trial in single)
    return to_run == 0 or not tuner._over_budget((to_run - 1) * tuner.mean_trial_s)


def _with_repeat(tuner: TunerCore, trial: TrialResult) -> TrialResult:
    """`trial` and its run in a process of its own (measured now, or the journal's
    repeat of it, as a resumed tune replays it) as one figure (`merge_runs`)."""
    if processes(trial) > 1:
        return trial
    if not repeats_here(tuner, trial.key):
        again = tuner.measure(request_of(tuner, trial), "measured again")
        if not again.ok:
            return trial
        tuner.journal.append_repeat(tuner.workload, again)
    return merge_runs(tuner, [trial, *repeats_here(tuner, trial.key)])


def request_of(tuner: TunerCore, trial: TrialResult) -> Settings:
    """The settings a trial was asked for, to run it again under its key: a trial
    of the script's own batch (None) is labelled with the batch it read, but run at
    an explicit batch it would re-batch a dataset of batches."""
    settings = Settings(**trial.settings)
    own = settings.replace(batch_size=None)
    return own if settings_key(tuner.workload, own, tuner.opt.steps) == trial.key else settings


def same_machine_figures(tuner: TunerCore) -> None:
    """The best's and Keras defaults' figures of one machine (this one first) where the
    journal has both, so that the speedup over the defaults compares one machine.
    A speedup that still compares two machines (over the defaults, or over the
    baseline) is named in `other_machine`."""
    res, j = tuner.result, tuner.journal
    best, defaults = res.best, res.keras_defaults
    if j.machine is None or best is None or not best.ok:
        return
    if defaults is not None and (pair := j.one_machine(best.key, defaults.key)):
        best, res.keras_defaults = pair
        res.best = best
    where = j.machine_of_figure(best)
    for name in ("baseline", "keras_defaults"):
        other = getattr(res, name)
        if other is not None and other.ok and j.machine_of_figure(other) != where:
            res.other_machine.append(name)


def _measured_here(tuner: TunerCore, old: TrialResult) -> TrialResult:
    """A journal's trial of another machine, measured again here (and journaled, so
    that a later resume here replays the same comparison). Past the time budget it
    is not run: the other machine's figure is used, and said so."""
    if tuner._over_budget():
        tuner._skipped += 1
        tuner.decide(
            "resume",
            f"{old.label} was measured on another machine, and the time budget left no "
            "time to measure it again here: its earlier figure is used",
        )
        return old
    trial = tuner.measure(request_of(tuner, old), AGAIN)
    if not trial.ok:
        tuner.decide(
            "resume",
            f"{old.label}, measured on another machine, ran here with {trial.status} "
            f"({trial.error}): its earlier figure is used",
        )
        return old
    tuner.journal.append_again(tuner.workload, trial)
    tuner.decide(
        "resume",
        f"{old.label} measured again on this machine, to compare with a trial of "
        f"this one: {trial.samples_per_s:,.0f}/s (the journal's, of another machine: "
        f"{old.samples_per_s or 0:,.0f}/s)",
    )
    return trial
