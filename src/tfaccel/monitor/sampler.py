"""Sampling every GPU through NVML, in a background thread.

`sample_all` takes one snapshot; `Sampler` repeats it every `interval_s` in a thread and
keeps the latest snapshot (and a bounded history), so a view or a callback only reads
what is already there: a slow NVML call never blocks them. A GPU that stops answering
becomes a sample with `error` set, never an exception.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tfaccel.hardware.nvml import Nvml
from tfaccel.monitor.alerts import Thresholds, evaluate
from tfaccel.monitor.metrics import GpuSample, Snapshot, decode_throttle

_C = {
    "NVML_TEMPERATURE_GPU": 0,
    "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN": 0,
    "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN": 1,
    "NVML_CLOCK_SM": 1,
    "NVML_CLOCK_MEM": 2,
    "NVML_PCIE_UTIL_TX_BYTES": 0,
    "NVML_PCIE_UTIL_RX_BYTES": 1,
    "NVML_MEMORY_ERROR_TYPE_CORRECTED": 0,
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
    "NVML_VOLATILE_ECC": 0,
}


def _c(nvml: Nvml, name: str) -> Any:
    return getattr(nvml.lib, name, _C[name])


def _num(value: Any, scale: float = 1.0) -> float | None:
    return float(value) * scale if value is not None else None


def sample_gpu(nvml: Nvml, index: int, now: float | None = None, light: bool = False) -> GpuSample:
    """Read one GPU; a GPU that cannot be reached gives a sample with `error`.

    `light` leaves out what a training callback does not need and costs the most: the
    PCIe throughput (NVML counts bytes over a 20 ms window, so each of its two calls
    blocks that long) and the process list (a name lookup per process).
    """
    stamp = time.time() if now is None else now
    handle, err = nvml.try_call("nvmlDeviceGetHandleByIndex", index)
    if err is not None:
        return GpuSample(stamp, index, error=err)
    util = nvml.get("nvmlDeviceGetUtilizationRates", handle)
    mem = nvml.get("nvmlDeviceGetMemoryInfo", handle)
    temp, terr = nvml.try_call("nvmlDeviceGetTemperature", handle, _c(nvml, "NVML_TEMPERATURE_GPU"))
    if terr is not None and ("lost" in terr.lower() or "unknown" in terr.lower()):
        return GpuSample(stamp, index, error=terr)
    reasons = nvml.get("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = nvml.get("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    procs = []
    running = [] if light else nvml.get("nvmlDeviceGetComputeRunningProcesses", handle, default=[])
    for proc in running or []:
        pid = int(getattr(proc, "pid", 0))
        used = getattr(proc, "usedGpuMemory", None)
        name = nvml.get("nvmlSystemGetProcessName", pid) or "?"
        procs.append((pid, str(name), used / 2**20 if used else None))
    return GpuSample(
        time=stamp,
        index=index,
        name=nvml.get("nvmlDeviceGetName", handle),
        util_gpu_pct=_num(getattr(util, "gpu", None)) if util is not None else None,
        util_mem_pct=_num(getattr(util, "memory", None)) if util is not None else None,
        mem_used_mib=_num(mem.used, 1 / 2**20) if mem is not None else None,
        mem_total_mib=_num(mem.total, 1 / 2**20) if mem is not None else None,
        temp_c=_num(temp),
        temp_slowdown_c=_num(
            nvml.get(
                "nvmlDeviceGetTemperatureThreshold",
                handle,
                _c(nvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN"),
            )
        ),
        temp_shutdown_c=_num(
            nvml.get(
                "nvmlDeviceGetTemperatureThreshold",
                handle,
                _c(nvml, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"),
            )
        ),
        power_w=_num(nvml.get("nvmlDeviceGetPowerUsage", handle), 1e-3),
        power_limit_w=_num(nvml.get("nvmlDeviceGetEnforcedPowerLimit", handle), 1e-3),
        energy_j=_num(nvml.get("nvmlDeviceGetTotalEnergyConsumption", handle), 1e-3),
        sm_clock_mhz=_num(nvml.get("nvmlDeviceGetClockInfo", handle, _c(nvml, "NVML_CLOCK_SM"))),
        sm_clock_max_mhz=_num(
            nvml.get("nvmlDeviceGetMaxClockInfo", handle, _c(nvml, "NVML_CLOCK_SM"))
        ),
        mem_clock_mhz=_num(nvml.get("nvmlDeviceGetClockInfo", handle, _c(nvml, "NVML_CLOCK_MEM"))),
        mem_clock_max_mhz=_num(
            nvml.get("nvmlDeviceGetMaxClockInfo", handle, _c(nvml, "NVML_CLOCK_MEM"))
        ),
        throttle=decode_throttle(reasons),
        pcie_tx_mbs=None
        if light
        else _num(
            nvml.get("nvmlDeviceGetPcieThroughput", handle, _c(nvml, "NVML_PCIE_UTIL_TX_BYTES")),
            1e-3,
        ),
        pcie_rx_mbs=None
        if light
        else _num(
            nvml.get("nvmlDeviceGetPcieThroughput", handle, _c(nvml, "NVML_PCIE_UTIL_RX_BYTES")),
            1e-3,
        ),
        ecc_corrected=nvml.get(
            "nvmlDeviceGetTotalEccErrors",
            handle,
            _c(nvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            _c(nvml, "NVML_VOLATILE_ECC"),
        ),
        ecc_uncorrected=nvml.get(
            "nvmlDeviceGetTotalEccErrors",
            handle,
            _c(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
            _c(nvml, "NVML_VOLATILE_ECC"),
        ),
        processes=tuple(procs),
    )


def sample_all(
    nvml: Nvml,
    indices: Sequence[int],
    thresholds: Thresholds,
    now: float | None = None,
    light: bool = False,
) -> Snapshot:
    stamp = time.time() if now is None else now
    gpus = tuple(sample_gpu(nvml, i, stamp, light) for i in indices)
    alerts = tuple(alert for gpu in gpus for alert in evaluate(gpu, thresholds))
    return Snapshot(stamp, gpus, alerts)


class Sampler:
    """Samples in a daemon thread; `latest` and `history` are read without blocking.

    Args:
        indices: NVML indices of the GPUs to sample (None: all), or "visible": the GPUs
            this process's CUDA sees (CUDA_VISIBLE_DEVICES), which a training callback
            wants.
        interval_s: seconds between snapshots.
        history: how many snapshots to keep.
        on_snapshot: called in the sampler thread after each snapshot (keep it cheap).
        lib: the NVML module (tests pass a fake).
        light: leave out PCIe throughput and processes (see `sample_gpu`), for samplers
            that run beside training.
    """

    def __init__(
        self,
        indices: Sequence[int] | str | None = None,
        interval_s: float = 1.0,
        thresholds: Thresholds | None = None,
        history: int = 3600,
        on_snapshot: Callable[[Snapshot], None] | None = None,
        lib: Any = None,
        clock: Callable[[], float] = time.time,
        light: bool = False,
    ) -> None:
        if interval_s <= 0:
            from tfaccel.errors import InputError

            raise InputError(
                "The sampling interval must be positive",
                expected="seconds > 0",
                received=interval_s,
            )
        self.interval_s = interval_s
        self.thresholds = thresholds or Thresholds()
        self.on_snapshot = on_snapshot
        self._nvml = Nvml(lib)
        if isinstance(indices, str) and indices != "visible":
            from tfaccel.errors import InputError

            raise InputError(
                "Unknown GPU selection", expected="indices, None or 'visible'", received=indices
            )
        self._visible = indices == "visible"
        self._indices = (
            list(indices) if indices is not None and not isinstance(indices, str) else None
        )
        self._history: collections.deque[Snapshot] = collections.deque(maxlen=history)
        self._latest: Snapshot | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._clock = clock
        self._light = light

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            from tfaccel.errors import InputError

            raise InputError(
                "The sampler is already running",
                expected="start() once",
                received="a second start()",
            )
        self._nvml.__enter__()
        count = self._nvml.get("nvmlDeviceGetCount", default=0) or 0
        if self._indices is None and self._visible:
            from tfaccel.hardware.capabilities import visible_indices

            uuids = []
            for i in range(int(count)):
                handle = self._nvml.get("nvmlDeviceGetHandleByIndex", i)
                uuids.append(self._nvml.get("nvmlDeviceGetUUID", handle) if handle else None)
            self._indices = visible_indices(uuids)
        if self._indices is None:
            self._indices = list(range(int(count)))
        bad = [i for i in self._indices if i >= count or i < 0]
        if bad:
            self._nvml.__exit__(None, None, None)
            from tfaccel.errors import InputError

            raise InputError(
                f"GPU index {bad[0]} does not exist",
                expected=f"indices 0..{int(count) - 1}",
                received=self._indices,
            )
        self.sample_once()
        self._thread = threading.Thread(target=self._run, name="tfaccel-sampler", daemon=True)
        self._thread.start()

    def sample_once(self) -> Snapshot:
        snap = sample_all(
            self._nvml, self._indices or [], self.thresholds, self._clock(), self._light
        )
        with self._lock:
            self._latest = snap
            self._history.append(snap)
        if self.on_snapshot is not None:
            with contextlib.suppress(Exception):
                self.on_snapshot(snap)
        return snap

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample_once()
            except Exception:
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)
            self._thread = None
        self._nvml.__exit__(None, None, None)

    @property
    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._latest

    def history(self, since: float | None = None) -> list[Snapshot]:
        with self._lock:
            items = list(self._history)
        return items if since is None else [snap for snap in items if snap.time >= since]
