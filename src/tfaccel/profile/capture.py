"""Capturing a profile with TensorFlow's profiler: a start/stop pair, a context manager,
and Keras callbacks that annotate each training step (XProf needs the step markers to
compute step times) and profile a chosen range of steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keras

from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError

_ACTIVE: dict[str, Any] = {}
# TensorFlow's profiler levels when given no options: host, Python, device tracers.
TF_DEFAULT_LEVELS = (2, 0, 1)


class ProfilerStateError(InputError):
    """start() while a trace runs, or stop() with none running."""


def start(
    logdir: str | Path,
    host_tracer_level: int = 2,
    python_tracer_level: int = 0,
    device_tracer_level: int = 1,
) -> None:
    """Start tracing into `logdir` (TensorFlow's profiler: host and device activity)."""
    if _ACTIVE:
        raise ProfilerStateError(
            "A profile is already being captured",
            expected="stop() before start() again",
            received=f"running into {_ACTIVE['logdir']}",
        )
    tf = import_tensorflow()
    levels = (host_tracer_level, python_tracer_level, device_tracer_level)
    if levels == TF_DEFAULT_LEVELS:
        # TensorFlow's own: given as options, TF 2.21 logs four warnings about their
        # types (and delay_ms) on the user's stderr; left out, it takes the same levels
        tf.profiler.experimental.start(str(logdir))
    else:
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=host_tracer_level,
            python_tracer_level=python_tracer_level,
            device_tracer_level=device_tracer_level,
        )
        tf.profiler.experimental.start(str(logdir), options=options)
    _ACTIVE["logdir"] = str(logdir)


def stop() -> str:
    """Stop tracing; returns the log directory written."""
    if not _ACTIVE:
        raise ProfilerStateError(
            "No profile is being captured", expected="start() first", received="stop()"
        )
    tf = import_tensorflow()
    try:
        tf.profiler.experimental.stop()
    finally:
        logdir = _ACTIVE.pop("logdir")
    return str(logdir)


@contextlib.contextmanager
def trace(logdir: str | Path, **options: int) -> Iterator[str]:
    """Profile the block: `with trace("logs"): model.fit(...)`."""
    start(logdir, **options)
    try:
        yield str(logdir)
    finally:
        stop()


class StepAnnotations(keras.callbacks.Callback):
    """Marks each training step for the profiler (`tf.profiler.experimental.Trace`)."""

    def __init__(self) -> None:
        super().__init__()
        self._ctx: Any = None
        self._step = 0

    @property
    def step(self) -> int:
        """The step that begins next (or has begun and not ended)."""
        return self._step

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        tf = import_tensorflow()
        self._ctx = tf.profiler.experimental.Trace("train", step_num=self._step, _r=1)
        self._ctx.__enter__()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
            self._ctx = None
        self._step += 1


class ProfileCallback(StepAnnotations):
    """Profiles training steps [start_step, start_step + steps) into `logdir`.

    Skip the first steps: they include tracing and XLA compilation.
    """

    def __init__(
        self,
        logdir: str | Path,
        start_step: int = 10,
        steps: int = 10,
        batch_size: int | None = None,
    ) -> None:
        super().__init__()
        if start_step < 0 or steps < 1:
            raise InputError(
                "Bad profiling window",
                expected="start_step >= 0, steps >= 1",
                received=f"start_step={start_step}, steps={steps}",
            )
        self.logdir = str(logdir)
        self.start_step = start_step
        self.steps = steps
        self.batch_size = batch_size
        self.steps_per_step: int | None = None  # the model's steps_per_execution where None
        self.captured = False

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        if self._step == self.start_step and not _ACTIVE:
            start(self.logdir)
        super().on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        super().on_train_batch_end(batch, logs)
        if self._step == self.start_step + self.steps and _ACTIVE.get("logdir") == self.logdir:
            self._stop()

    def on_train_end(self, logs: Any = None) -> None:
        if _ACTIVE.get("logdir") == self.logdir:  # training ended inside the window
            self._stop()

    def _stop(self) -> None:
        stop()
        self.captured = True
        if self.batch_size:
            # One annotated step is one execution: steps_per_execution batches (one a
            # call of train_on_batch, whatever it says: `steps_per_step`).
            spe = self.steps_per_step or int(getattr(self.model, "steps_per_execution", 1) or 1)
            write_run_meta(self.logdir, {"samples_per_step": self.batch_size * spe})


RUN_META = "tfaccel.json"


def write_run_meta(logdir: str | Path, meta: dict[str, Any]) -> Path | None:
    """Note what the trace cannot say (samples per step) beside the newest run's files."""
    import json

    runs = [pb_path.parent for pb_path in Path(logdir).rglob("*.xplane.pb")]
    if not runs:
        return None
    newest = max(runs, key=lambda folder: folder.stat().st_mtime)
    path = newest / RUN_META
    path.write_text(json.dumps(meta))
    return path
