"""A script that trains with a loop of its own `model.train_on_batch` calls, as older GAN
tutorials and hand-written loops do, instead of `fit`.

In a trial, the calls of the model the loop trains (`LoopModel`: the first that calls,
unless another calls far more often) are timed as the script's loop makes them
(`trial.child.Marks`, one step a call): each window holds whatever else the loop does
between them (its other models' steps, `predict`, its host work), as the user's training
does. The payload then goes to the parent and the process ends. The settings reach those
calls through `compile` (precision, XLA, the allocator); nothing else of fit's search
applies, and the payload says why (`LOOP_FACTS`).
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tfaccel.trial.protocol import FIT_STARTED, MARK, TrialRequest

if TYPE_CHECKING:
    from tfaccel.optimize.report import ConfigureReport
    from tfaccel.trial.child import Marks

# What a trial of such a loop says for the search: its form of data, and why neither a
# longer execution nor a batch change (with its race) is tried.
LOOP_FACTS = {
    "fit_data": "train_on_batch",
    "spe_blocker": "the script's train_on_batch runs one step a call, whatever "
    "steps_per_execution says",
    "no_race": "the script trains with a loop of its own train_on_batch calls, which "
    "chooses its own batches: tfaccel cannot run it at another batch size",
}


class LoopModel:
    """Which of a loop's models is timed: the first that calls train_on_batch, until
    another has made more than twice its calls (a warm-up call of one model before a
    loop that trains another, a generator's step after five of its critic's); then that
    one. Alternating models (a GAN's discriminator and combined model, one call each a
    step) keep the first."""

    def __init__(self) -> None:
        self.model: Any = None
        self._calls: dict[int, int] = {}

    def turn(self, model: Any) -> str:
        """This call's part: `first` (the first call of all), `switched` (this model is
        timed from this call on), `timed` or `other`."""
        calls = self._calls[id(model)] = self._calls.get(id(model), 0) + 1
        if self.model is None:
            self.model = model
            return "first"
        if model is self.model:
            return "timed"
        if calls > 2 * self._calls[id(self.model)]:
            self.model = model
            return "switched"
        return "other"


class TimedLoop:
    """The timing of a script's train_on_batch calls in one trial: the model
    `LoopModel` chooses is timed (afresh where it changes), every call of another
    passes through. `script.tape` times a training step of the script's own with it."""

    facts = LOOP_FACTS
    call_word, calls_of = "train_on_batch call", "of the model it trains"  # an early end's

    def __init__(
        self,
        report: ConfigureReport,
        request: TrialRequest,
        started: float,
        caller: Callable[[], str],
    ) -> None:
        self.report, self.request, self.started = report, request, started
        self.caller = caller  # file:line of the script's call (read once: it is slow)
        self.choice = LoopModel()
        self.where = ""
        self.marks: Marks | None = None
        self.calls = 0

    def call(self, train_on_batch: Any, model: Any, args: Any, kwargs: Any) -> Any:
        """`train_on_batch(model, *args, **kwargs)`, timed where it is the timed model's;
        at the plan's last step the payload goes to the parent and the process ends."""
        if not self.timing(model):
            return train_on_batch(model, *args, **kwargs)
        start = time.perf_counter()
        try:
            out = train_on_batch(model, *args, **kwargs)
        except Exception as exc:
            from tfaccel._child import failure

            self._end(failure(exc))
        self.ended(start, args, kwargs, out)
        return out

    def timing(self, key: Any) -> bool:
        """Is this call of `key` (a model; `script.tape`: a step function) timed?"""
        turn = self.choice.turn(key)
        if turn == "other":
            return False
        if turn == "first":
            print(FIT_STARTED, flush=True)  # a process that dies from here on died in the loop
            atexit.register(self._ended_early)
        if turn != "timed":  # its timing starts (again) at this call
            self.where, self.marks, self.calls = self.caller(), None, 0
        return True

    def ended(self, start: float, args: Any, kwargs: Any, out: Any) -> None:
        """A timed call that began at `start` ended, returning `out`: marked; at the
        plan's last step the payload goes to the parent and the process ends."""
        try:
            if self._mark(start, args, kwargs, out):
                self._end(self._payload())
        except Exception as exc:
            from tfaccel._child import failure

            self._end(failure(exc))

    @property
    def model(self) -> Any:
        """The Keras model the timed calls train."""
        return self.choice.model

    @property
    def measured(self) -> str:
        """Which call the trial timed, where (the payload's `measured`)."""
        return f"model.train_on_batch at {self.where}"

    def stop(self) -> None:
        """The script's fit came first to the end of a trial: this loop's timing is
        dropped (the fit is timed instead)."""
        atexit.unregister(self._ended_early)

    def _mark(self, start: float, args: Any, kwargs: Any, out: Any) -> bool:
        from tfaccel.trial.child import Marks, Plan

        if self.marks is None:
            plan = Plan.of(self.request.steps, spe=1)
            self.marks = Marks(plan, self._rows(args, kwargs), start=start)
        self.calls += 1
        return self.marks.mark(self.calls - 1, loss_of(out))

    def _rows(self, args: Any, kwargs: Any) -> int:
        """The examples of the first timed call (each is taken to train as many)."""
        return batch_rows(args, kwargs)

    def _payload(self) -> dict[str, Any]:
        from tfaccel.trial.child import marks_payload

        assert self.marks is not None
        marks = self.marks
        out = marks_payload(
            self.model,
            self.report,
            marks.marks,
            marks.plan,
            marks.batch,
            self.request.count_flops,
            self.started,
        )
        out.update(self.facts)
        if self.report.settings.batch_size is None:
            out["own_batch"] = marks.batch
        return out

    def _end(self, payload: dict[str, Any]) -> None:
        from tfaccel._child import emit, end_process

        payload["measured"] = self.measured
        atexit.unregister(self._ended_early)
        emit(MARK, payload)
        end_process()

    def _ended_early(self) -> None:
        """The script's loop ended before the trial's calls were done: said, with how
        many it made and how many a trial needs."""
        from tfaccel._child import emit

        need = self.marks.plan.total if self.marks else "more"
        emit(
            MARK,
            {
                "status": "error",
                "error": f"the script's loop made {self.calls} {self.call_word}"
                f"{'' if self.calls == 1 else 's'} {self.calls_of}, and a trial "
                f"times {need} (--warmup, then --windows of "
                "--window steps): fewer steps per trial, or a longer loop",
                "measured": self.measured,
            },
        )


_SPOKEN: set[int] = set()  # the models whose loop `run` has spoken of


def say_loop(
    model: Any, caller: Callable[[], str], say: Callable[[str], None], report: ConfigureReport
) -> None:
    """What `run` does to a script's own loop of train_on_batch calls, said once a
    model: the settings reach it through compile, each call runs one step, and what
    of the settings it does not train with (`trial.child.unapplied_notes`)."""
    from tfaccel.trial.child import unapplied_notes

    if id(model) in _SPOKEN:
        return
    _SPOKEN.add(id(model))
    spe = int(getattr(model, "steps_per_execution", 1) or 1)
    runs = f" (steps_per_execution {spe} runs one step a call there)" if spe > 1 else ""
    notes = [
        f"the settings apply through its compile{runs}",
        "the batches are the script's own",
        *unapplied_notes(model, report),
    ]
    say(f"model.train_on_batch at {caller()} ({type(model).__name__}): {'; '.join(notes)}")


def batch_rows(args: Any, kwargs: Any) -> int:
    """How many examples a train_on_batch call trains on: its inputs' first dimension."""
    from tfaccel._tf import import_tensorflow

    x = args[0] if args else kwargs.get("x")
    first = import_tensorflow().nest.flatten(x)[0]
    return int(first.shape[0])


def loss_of(out: Any) -> float:
    """The loss a train_on_batch call (or a training step of the script's own) returns:
    alone, first of a list (the metrics after it), or under "loss" in a dict
    (return_dict=True); NaN where it returns none that reads as one number (a step
    that returns nothing: the accuracy guard then has no loss to compare)."""
    if isinstance(out, dict):
        out = out.get("loss", next(iter(out.values()), float("nan")))
    elif isinstance(out, (list, tuple)):
        out = out[0] if out else float("nan")
    try:
        return float(out)
    except (TypeError, ValueError):
        return float("nan")
