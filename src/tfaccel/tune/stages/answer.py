"""The same-training answer settled (never below Keras' defaults, the figures of this
machine) and confirmed by rounds of the defaults and the answer back to back."""

from __future__ import annotations

from tfaccel.trial.runner import (
    beats,
)
from tfaccel.tune.core import (
    State,
    TunerCore,
)
from tfaccel.tune.figures import as_one, gain_floor, same_machine_figures
from tfaccel.tune.result import (
    Confirmation,
)


def settle(tuner: TunerCore, state: State) -> None:
    """The answer: the best, unless it does not beat Keras' defaults beyond the
    noise; then the answer is Keras' defaults, and the decision says so."""
    res = tuner.result
    defaults = res.keras_defaults
    said = any(d.stage == "answer" for d in res.decisions)
    if defaults is not None and defaults.ok and state.best is defaults and not said:
        tuner.decide(
            "answer",
            "Keras' defaults: nothing the search tried beats them beyond the noise, so "
            "there is nothing to change",
        )
    elif defaults is not None and defaults.ok and state.best is not defaults and state.best.ok:
        # figures of one machine where the journal has them; nothing measured again
        pair = tuner.journal.one_machine(state.best.key, defaults.key)
        best, against = pair if tuner.journal.machine and pair else (state.best, defaults)
        best, against = as_one(tuner, best), as_one(tuner, against)
        win, gain, thr = beats(best, against, gain_floor(tuner.opt, res, best, against))
        if not win:
            tuner.decide(
                "answer",
                f"Keras' defaults: the search's best ({state.best.label}, {gain:+.1%} vs "
                f"{against.label}) does not beat them beyond the noise (threshold "
                f"{thr:.0%}), so there is nothing to change",
            )
            state.best, state.best_s = defaults, state.defaults
        elif said:  # settled again, otherwise
            tuner.decide(
                "answer",
                f"settled again after the late stages: {state.best.label}, {gain:+.1%} vs "
                f"{against.label}, beyond the noise (threshold {thr:.0%})",
            )
    res.best, res.best_settings = as_one(tuner, state.best), state.best_s
    same_machine_figures(tuner)


def confirm(tuner: TunerCore, state: State) -> None:
    """Keras' defaults and the best once more, back to back (TuneOptions.confirm)."""
    res = tuner.result
    if not (
        tuner.opt.confirm
        and state.best.ok
        and res.keras_defaults is not None
        and res.keras_defaults.ok
        and state.best_s != state.defaults
    ):
        return
    for i in range(tuner.opt.confirm):
        if tuner._over_budget():
            tuner._skipped += 2 * (tuner.opt.confirm - i)
            break
        pair = (tuner.measure(state.defaults, "confirm"), tuner.measure(state.best_s, "confirm"))
        res.confirmations.append(Confirmation(*pair))
    speedup = res.confirmed_speedup
    if res.confirmations:
        tuner.decide(
            "confirm",
            f"{len(res.confirmations)} round(s) of Keras defaults and the best, "
            "back to back: "
            + (f"{speedup:.2f}x" if speedup is not None else "no round where both finished")
            + f" (the search's runs: {res.speedup(res.keras_defaults) or 0:.2f}x)",
        )
