"""`tfaccel profile -- python train.py`: tfaccel's ProfileCallback added to the
`keras.Model.fit` calls of an unmodified script, with the window from
TFACCEL_PROFILE_LOGDIR / _START / _STEPS, until one has captured it (or to the call
TFACCEL_PROFILE_FIT names alone): one trace a script, of the fit the report is about.
Installed by tfaccel's sitecustomize (`tfaccel/script/inject`) when Keras is imported; a
failure to hook is said and ignored."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

from tfaccel.script import file_caches
from tfaccel.script.hook import say, when_keras_imported
from tfaccel.trial.protocol import PROFILE_FIT_ENV as FIT_ENV
from tfaccel.trial.protocol import PROFILE_LOGDIR_ENV as ENV
from tfaccel.trial.protocol import PROFILE_START_ENV, PROFILE_STEPS_ENV, PROFILE_STOP_ENV
from tfaccel.trial.protocol import PROFILE_STATUS_ENV as STATUS_ENV  # why nothing was captured


def install() -> None:
    if os.environ.get(PROFILE_STOP_ENV) == "1":  # the process ends after the window
        file_caches.install()
    when_keras_imported(_patch)


def _patch() -> None:
    try:
        import keras

        fit = keras.Model.fit
        chosen = int(os.environ.get(FIT_ENV) or 0)  # 0: the first call that captures
        state = {"calls": 0, "captured": False}

        def fit_with_profile(self: Any, *args: Any, **kwargs: Any) -> Any:
            state["calls"] += 1
            if state["captured"] or chosen not in (0, state["calls"]):
                return fit(self, *args, **kwargs)
            callback = _window_callback(batch_size_of(args, kwargs))
            kwargs["callbacks"] = [*list(kwargs.get("callbacks") or []), callback]
            try:
                return fit(self, *args, **kwargs)
            finally:
                state["captured"] = bool(callback.captured)

        keras.Model.fit = fit_with_profile
        if not chosen:  # a script's own loop (train_on_batch, a step), where it has no fit
            _loop_with_profile(keras, state)
    except Exception as exc:
        say(f"could not hook keras.Model.fit: {exc}", "tfaccel profile")


class _LoopWindow:
    """The window's steps counted in the calls a script's own loop makes of the model
    it trains (`script.loop`) or of its own training step (`script.tape`), chosen as
    tune chooses (`script.loop.LoopModel`; one that takes over after the trace began is
    left alone): a step from one call to the next, so that each holds what the loop
    does between them too (its other models' steps, its host work), as its training
    does. A loop that ends inside the window ends the trace."""

    def __init__(self, state: dict[str, Any]) -> None:
        from tfaccel.script.loop import LoopModel

        self.state, self.choice = state, LoopModel()
        self.callback: Any = None
        self.key: Any = None

    def boundary(self, key: Any, model: Callable[[], Any], rows: Callable[[], int | None]) -> None:
        """One step of `key` (a model, a step function) ends and the next begins."""
        turn = self.choice.turn(key)
        callback = self.callback
        if turn == "switched" and callback is not None and callback.step < callback.start_step:
            callback.on_train_batch_end(callback.step)  # its open step closes, untraced
            callback = None  # the window moves to this one
        elif callback is not None and self.key is not key:
            return
        if self.state["captured"] or self.state["calls"]:
            return
        if callback is None:
            callback = self.callback = _window_callback(rows(), steps=1)
            callback.set_model(model())
            self.key = key
            if turn == "first":
                atexit.register(lambda: _end_loop(self.callback))
        else:
            callback.on_train_batch_end(callback.step)
            self.state["captured"] = bool(callback.captured)
        if not self.state["captured"]:
            callback.on_train_batch_begin(callback.step)


def _loop_with_profile(keras: Any, state: dict[str, Any]) -> None:
    """A script's own loop profiled (`_LoopWindow`): of train_on_batch calls, a step
    from the start of one call to the next's; of a training step of its own, from the
    end of one call to the next's."""
    from tfaccel.script.loop import batch_rows
    from tfaccel.script.tape import StepFunctions, install, name_of, step_rows

    train_on_batch = keras.Model.train_on_batch
    window, steps = _LoopWindow(state), StepFunctions()

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        window.boundary(self, lambda: self, lambda: _rows(batch_rows, args, kwargs))
        return train_on_batch(self, *args, **kwargs)

    def step(fn: Any, start: float, args: Any, kwargs: Any, out: Any) -> None:
        if fn is not None:  # (an eager step is not a step function: nothing to count)
            rows = functools.partial(step_rows, name_of(fn))
            window.boundary(fn, lambda: steps.models.get(id(fn)), lambda: _rows(rows, args, kwargs))

    keras.Model.train_on_batch = call
    install(keras, steps, step)


def _rows(count: Callable[[Any, Any], int], args: Any, kwargs: Any) -> int | None:
    """A call's rows as tune counts them (`count`: `script.loop.batch_rows`,
    `script.tape.step_rows`), or None where they cannot be counted (the capture never
    breaks the user's training)."""
    try:
        return count(args, kwargs)
    except Exception:
        return None


def _end_loop(callback: Any) -> None:
    """At the script's end: its loop's last step ends, and a trace still open with it."""
    if not callback.captured:
        callback.on_train_batch_end(callback.step)
        callback.on_train_end()


def _window_callback(batch_size: int | None, steps: int | None = None) -> Any:
    """The guarded ProfileCallback of the window the environment names; `steps`: the
    steps one annotated step holds, where not the model's steps_per_execution."""
    callback = guarded_callback()(
        os.environ[ENV],
        int(os.environ.get(PROFILE_START_ENV, "10")),
        int(os.environ.get(PROFILE_STEPS_ENV, "10")),
        batch_size=batch_size,
    )
    callback.steps_per_step = steps
    return callback


def guarded_callback() -> type:
    """ProfileCallback whose failures (a logdir that cannot be written, a full disk, a
    profiler error) never reach the user's training: the first one is said on stderr and
    in the status file, the trace is ended, and the callback does nothing more."""
    from tfaccel.profile.capture import ProfileCallback, stop

    class Guarded(ProfileCallback):
        failed = False

        def _guard(self, method: Any, *args: Any) -> None:
            if self.failed:
                return
            try:
                method(*args)
            except Exception as exc:
                self.failed = True
                with contextlib.suppress(Exception):
                    stop()
                say_no_profile(f"{type(exc).__name__}: {exc}")

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self._guard(super().on_train_batch_begin, batch, logs)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._guard(super().on_train_batch_end, batch, logs)
            if self.captured and not self.failed:
                _after_window(self)

        def on_train_end(self, logs: Any = None) -> None:
            self._guard(super().on_train_end, logs)

    return Guarded


def _after_window(callback: Any) -> None:
    """Once the window is captured: the script ends there (`--stop`), or goes on to its
    end, which is said once (a long training would otherwise look like a hang)."""
    window = f"steps {callback.start_step}-{callback.start_step + callback.steps - 1} captured"
    if os.environ.get(PROFILE_STOP_ENV) == "1":
        from tfaccel._child import end_process

        say(f"{window}; the script ends here (--stop)", "tfaccel profile")
        end_process()
    if not getattr(callback, "said", False):
        callback.said = True
        say(
            f"{window}; the run goes on to its end, then the report (--stop ends it "
            "after the window)",
            "tfaccel profile",
        )


def say_no_profile(reason: str) -> None:
    say(f"no profile ({reason}); the run goes on", "tfaccel profile")
    status = os.environ.get(STATUS_ENV)
    if status:
        with contextlib.suppress(OSError), open(status, "a", encoding="utf-8") as handle:
            handle.write(reason + "\n")


def batch_size_of(args: Any, kwargs: Any) -> int | None:
    """Samples per batch, where fit's arguments say it (None if they do not)."""
    try:
        if kwargs.get("batch_size"):
            return int(kwargs["batch_size"])
        x = args[0] if args else kwargs.get("x")
        spec = getattr(x, "element_spec", None)
        if spec is not None:  # a tf.data.Dataset: its static batch dimension
            from tfaccel._tf import import_tensorflow

            first = import_tensorflow().nest.flatten(spec)[0]
            dim = first.shape[0] if first.shape.rank else None
            return int(dim) if dim is not None else None
        if hasattr(x, "shape") or isinstance(x, (list, dict)):
            return 32  # Keras' default for arrays
    except Exception:
        return None
    return None
