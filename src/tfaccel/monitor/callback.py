"""`GpuMonitorCallback`: GPU telemetry during `fit`, attributed to epochs."""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

import keras

from tfaccel._tf import import_tensorflow
from tfaccel.monitor.alerts import Thresholds
from tfaccel.monitor.metrics import Snapshot
from tfaccel.monitor.sampler import Sampler
from tfaccel.monitor.telemetry import GpuWindow, summarize_window

ON_THERMAL = ("warn", "stop", "ignore")


@dataclass(frozen=True)
class EpochTelemetry:
    epoch: int
    seconds: float
    steps: int
    samples: int | None
    gpus: tuple[GpuWindow, ...]

    def joules_per_sample(self) -> float | None:
        energy = sum(gpu.energy_j or 0.0 for gpu in self.gpus)
        return energy / self.samples if self.samples and energy else None


class GpuMonitorCallback(keras.callbacks.Callback):
    """Samples the GPUs in a background thread during `fit` and reports per epoch.

    Adds to the epoch's `logs`: `gpu{i}_util_mean`, `gpu{i}_util_max`,
    `gpu{i}_mem_peak_mib`, `gpu{i}_temp_max_c`, `gpu{i}_power_mean_w`, `gpu{i}_energy_j`,
    `gpu{i}_throttled_s`, and `gpu_joules_per_sample` when `batch_size` is given; writes
    them as TensorBoard scalars under `log_dir`; warns or stops training on a thermal
    alert. Batch hooks only count steps and read a flag, so the cost per step is tiny.

    NVML starts in a background thread, so `fit` does not wait for it (NVML's start
    takes tens to hundreds of milliseconds on a multi-GPU host). The callback is
    `async_safe`: on Keras backends that dispatch batch hooks on a thread pool, it
    keeps them there.

    Args:
        interval_s: seconds between samples.
        gpus: NVML GPU indices (None: the GPUs this process sees, CUDA_VISIBLE_DEVICES).
        batch_size: samples per step, for joules per sample.
        temp_c: the thermal alert threshold.
        on_thermal: "warn", "stop" (stop_training) or "ignore".
        log_dir: TensorBoard log directory for the scalars (None: none).
    """

    async_safe = True  # batch hooks: a locked counter and a flag, no tensors read

    def __init__(
        self,
        interval_s: float = 1.0,
        gpus: list[int] | None = None,
        batch_size: int | None = None,
        temp_c: float = 85.0,
        on_thermal: str = "warn",
        log_dir: str | None = None,
        lib: Any = None,
        clock: Any = time.time,
    ) -> None:
        super().__init__()
        if on_thermal not in ON_THERMAL:
            from tfaccel.errors import InputError

            raise InputError(
                "Unknown on_thermal", expected=f"one of {ON_THERMAL}", received=repr(on_thermal)
            )
        self.interval_s = interval_s
        self.gpus = gpus
        self.batch_size = batch_size
        self.thresholds = Thresholds(temp_c=temp_c)
        self.on_thermal = on_thermal
        self.log_dir = log_dir
        self._lib = lib
        self._clock = clock
        self.sampler: Sampler | None = None
        self.epochs: list[EpochTelemetry] = []
        self.disabled_reason: str | None = None
        self._thermal: str | None = None
        self._warned = False
        self._steps = 0
        self._steps_lock = threading.Lock()
        self._starter: threading.Thread | None = None
        self._epoch_start = 0.0
        self._writer: Any = None

    def _on_snapshot(self, snap: Snapshot) -> None:
        for alert in snap.alerts:
            if alert.kind == "temperature":
                self._thermal = alert.message

    def on_train_begin(self, logs: Any = None) -> None:
        self.epochs = []
        self._starter = threading.Thread(
            target=self._start_sampler, name="tfaccel-sampler-start", daemon=True
        )
        self._starter.start()
        if self.log_dir:
            import importlib.util

            if importlib.util.find_spec("tensorboard") is None:
                warnings.warn(
                    "TensorBoard is not installed, so GPU scalars go to the logs "
                    "only (pip install tensorboard)",
                    RuntimeWarning,
                    stacklevel=2,
                )
            else:
                tf = import_tensorflow()

                self._writer = tf.summary.create_file_writer(self.log_dir)

    def _started(self) -> None:
        """Wait for the sampler's start (once), then warn if it could not start."""
        starter, self._starter = self._starter, None
        if starter is not None:
            starter.join()
            if self.disabled_reason is not None:
                warnings.warn(self.disabled_reason, RuntimeWarning, stacklevel=3)

    def _start_sampler(self) -> None:
        try:
            sampler = Sampler(
                self.gpus if self.gpus is not None else "visible",
                self.interval_s,
                self.thresholds,
                on_snapshot=self._on_snapshot,
                lib=self._lib,
                clock=self._clock,
                light=True,
            )
            sampler.start()
            self.sampler = sampler
        except Exception as exc:
            self.sampler = None
            self.disabled_reason = f"GPU telemetry off: {exc}"

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._steps = 0
        self._epoch_start = self._clock()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        with self._steps_lock:  # Keras may call this from several threads
            self._steps += 1
        if self._thermal is not None and self.on_thermal != "ignore":
            message, self._thermal = self._thermal, None
            if self.on_thermal == "stop":
                self.model.stop_training = True
                warnings.warn(f"stopping training: {message}", RuntimeWarning, stacklevel=2)
            elif not self._warned:
                self._warned = True
                warnings.warn(message, RuntimeWarning, stacklevel=2)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._started()
        windows: list[GpuWindow] = []
        if self.sampler is not None:
            # Close the window with a fresh reading, taken now.
            end = self.sampler.sample_once().time
            windows = summarize_window(self.sampler.history(), self._epoch_start, end)
        else:
            end = self._clock()
        spe = getattr(self.model, "steps_per_execution", 1) or 1
        steps = self._steps * int(spe)
        samples = steps * self.batch_size if self.batch_size else None
        tel = EpochTelemetry(epoch, end - self._epoch_start, steps, samples, tuple(windows))
        self.epochs.append(tel)
        values: dict[str, float] = {}
        for window in windows:
            for key in (
                "util_mean",
                "util_max",
                "mem_peak_mib",
                "temp_max_c",
                "power_mean_w",
                "energy_j",
                "throttled_s",
            ):
                value = getattr(window, key)
                if value is not None:
                    values[f"gpu{window.gpu}_{key}"] = float(value)
        jps = tel.joules_per_sample()
        if jps is not None:
            values["gpu_joules_per_sample"] = jps
        if logs is not None:
            logs.update(values)
        if self._writer is not None and values:
            tf = import_tensorflow()

            with self._writer.as_default():
                for field, value in values.items():
                    tf.summary.scalar(f"gpu/{field}", value, step=epoch)
            self._writer.flush()

    def on_train_end(self, logs: Any = None) -> None:
        self._started()
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None
