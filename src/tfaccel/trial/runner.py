"""Run a trial in a child process with a timeout, and summarise its measurements."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

from tfaccel import stats
from tfaccel._child import ChildResult, child_env, run_child
from tfaccel._compat import xla_flag_floor
from tfaccel.optimize.settings import LAYER_KNOBS, Settings, label_of
from tfaccel.trial.protocol import MARK, Mode, TrialRequest, extra_of
from tfaccel.trial.xla_cache import PERSISTENT
from tfaccel.workloads import BUILTIN, REVISION


@dataclass(frozen=True)
class StepPlan:
    """How many steps a trial runs: warm-up (incl. compilation), then timed windows."""

    warmup: int = 10
    windows: int = 5
    window: int = 20
    # Shorten a window whose steps would take longer than this many seconds (measured
    # in the warm-up): slow trials (float32 without XLA, ~0.5 s a step) then time
    # about as long as fast ones. None: always `window` steps.
    window_s: float | None = None
    # Stop timing after this many windows once their spread is under half the noise
    # floor (stats.settled): more windows would not move any comparison's threshold
    # off its floor. None: always `windows` windows.
    min_windows: int | None = None


# What became of a trial: measured; out of memory (data: the batch does not fit);
# failed; killed at its timeout; not run (a time budget).
TrialStatus = Literal["ok", "oom", "error", "timeout", "skipped"]
STATUSES: tuple[TrialStatus, ...] = ("ok", "oom", "error", "timeout", "skipped")


@dataclass(frozen=True)
class TrialResult:
    """What one trial measured: its journal key, label and settings, its status,
    the median samples/s over its timed windows with their spread, the compile time,
    peak memory, the first losses (the accuracy guard's), and `extra`: what the trial
    read of the model and data (layer counts, FLOPs, examples, optimizer, noise
    scale, a race's curve)."""

    key: str
    label: str
    settings: dict[str, Any]
    status: TrialStatus
    samples_per_s: float | None = None  # median over windows
    spread: float | None = None  # over the windows (stats.spread)
    windows: tuple[float, ...] = ()
    compile_s: float | None = None
    peak_memory_bytes: int | None = None
    losses: tuple[float, ...] = ()
    final_loss: float | None = None
    precision: str | None = None
    error: str | None = None
    traceback: str | None = None
    wall_s: float = 0.0
    device: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.samples_per_s)


def trial_noise(trial: TrialResult) -> float:
    """The trial's spread over its timed windows (stats.spread; 0 without two)."""
    return stats.spread(trial.windows) or 0.0


def beats(new: TrialResult, old: TrialResult | None, floor: float) -> tuple[bool, float, float]:
    """(new is faster beyond the noise, gain, threshold)."""
    if not new.ok:
        return False, 0.0, 0.0
    if old is None or not old.ok:
        return True, math.inf, 0.0
    gain = (new.samples_per_s or 0) / (old.samples_per_s or math.nan) - 1
    threshold = stats.noise_threshold(trial_noise(new), trial_noise(old), floor=floor)
    return gain > threshold, gain, threshold


# Settings fields added after journals were written: at their default they stay out of
# a trial's key, so that a journal written before them still resumes.
LATER_FIELDS = ("device_arrays", "rnn_algorithm", "validation_batch_size")


def settings_key(
    workload: str, settings: Settings, steps: StepPlan, extra: dict[str, Any] | None = None
) -> str:
    """A trial's identity in the journal: the workload (and its revision), every
    setting (LATER_FIELDS where not at their default), the step plan and the trial's
    extras. `window_s` and `min_windows` stay out: they bound how long the same
    measurement takes, not what it measures; counting FLOPs (after the timing) stays
    out too."""
    plan = {
        name: value
        for name, value in steps.__dict__.items()
        if name not in ("window_s", "min_windows")
    }
    defaults = Settings()
    shown = {
        name: value
        for name, value in settings.to_dict().items()
        if name not in LATER_FIELDS or value != getattr(defaults, name)
    }
    extra = {name: value for name, value in (extra or {}).items() if name != "count_flops"}
    revision = REVISION.get(workload)
    blob = json.dumps(
        {
            "w": workload,
            **({"r": revision} if revision else {}),
            "s": shown,
            "p": plan,
            **({"x": extra} if extra else {}),
        },
        sort_keys=True,
    )
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def summarize(key: str, settings: Settings, payload: dict[str, Any], wall_s: float) -> TrialResult:
    windows = tuple(float(x) for x in payload.get("window_samples_per_s") or ())
    median = stats.median(windows)
    spread = stats.spread(windows)
    status: TrialStatus = payload.get("status", "error")
    if status not in STATUSES:
        status = "error"
    if status == "ok" and not windows:
        status, payload = (
            "error",
            {**payload, "error": "no timed window completed; raise the step counts"},
        )
    return TrialResult(
        key=key,
        label=label_of(settings),
        settings=settings.to_dict(),
        status=status,
        samples_per_s=median,
        spread=spread,
        windows=windows,
        compile_s=payload.get("compile_s"),
        peak_memory_bytes=payload.get("peak_memory_bytes"),
        losses=tuple(payload.get("losses") or ()),
        final_loss=payload.get("final_loss"),
        precision=payload.get("precision"),
        error=payload.get("error"),
        traceback=payload.get("traceback"),
        wall_s=wall_s,
        device=payload.get("device"),
        extra=extra_of(payload, LAYER_KNOBS),
    )


# The CUDA driver's cache of kernels it compiled from PTX, at its largest. A GPU that
# TensorFlow's wheel has no machine code for (the H200 under TF 2.21: sm_90 only as PTX)
# compiles each kernel a process launches, and the driver's default cache (256 MiB)
# is too small to keep them for the next trial's process.
CUDA_CACHE_MAXSIZE = str(4 << 30)


def executables_in(cache_dir: str | os.PathLike[str]) -> Path:
    """The folder of TensorFlow's persistent XLA cache inside the trials' `cache_dir`."""
    return Path(cache_dir) / "executables"


def compile_cache_env(cache_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Environment that lets trials, each a fresh process, share compiled work.

    - XLA's GPU autotuning results (XLA_FLAGS) in `cache_dir`: trials with the same
      layer shapes skip the convolution and GEMM autotuning of XLA's compile time;
    - TensorFlow's persistent XLA cache (TF_XLA_FLAGS) in `cache_dir`: a trial whose
      train step is the same program (another allocator, device prefetch) loads the
      compiled executable;
    - the CUDA driver's cache of kernels compiled from PTX, at its largest
      (CUDA_CACHE_MAXSIZE; where it is, the user's own, is left alone).
    Variables and flags the user set already win; the user's other flags are kept.
    """
    env: dict[str, str] = {}
    base = Path(cache_dir)
    xla = os.environ.get("XLA_FLAGS", "")
    cache_flag = "--xla_gpu_per_fusion_autotune_cache_dir"
    if cache_flag[2:] not in xla and xla_flag_floor(cache_flag) is None:  # unknown: abort
        (base / "autotune").mkdir(parents=True, exist_ok=True)
        env["XLA_FLAGS"] = f"{xla} {cache_flag}={base / 'autotune'}"
    tf_xla = os.environ.get("TF_XLA_FLAGS", "")
    if PERSISTENT[2:] not in tf_xla:
        executables_in(base).mkdir(parents=True, exist_ok=True)
        env["TF_XLA_FLAGS"] = f"{tf_xla} {PERSISTENT}={executables_in(base)}"
    if "CUDA_CACHE_MAXSIZE" not in os.environ:
        env["CUDA_CACHE_MAXSIZE"] = CUDA_CACHE_MAXSIZE
    return {name: value.strip() for name, value in env.items()}


class TrialTarget(Protocol):
    """What a trial runs in its fresh process: a workload (`Workload`) or a user's
    script (`script.run.ScriptTrial`). `run_trial` asks it for the request, starts the
    process through it, and lets it read what the process left."""

    @property
    def name(self) -> str: ...

    def request(
        self, settings: Settings, steps: StepPlan, seed: int, extra: dict[str, Any] | None
    ) -> TrialRequest: ...

    def start(
        self, request: TrialRequest, overrides: dict[str, str] | None, timeout_s: float
    ) -> ChildResult: ...

    def result(
        self, key: str, settings: Settings, out: ChildResult, timeout_s: float
    ) -> TrialResult: ...


@dataclass(frozen=True)
class Workload:
    """A built-in workload or a `module:function` entry point, built and timed by
    `trial.child` in a fresh interpreter."""

    name: str

    def request(
        self, settings: Settings, steps: StepPlan, seed: int, extra: dict[str, Any] | None
    ) -> TrialRequest:
        return trial_request("workload", settings, steps, seed, extra, workload=self.name)

    def start(
        self, request: TrialRequest, overrides: dict[str, str] | None, timeout_s: float
    ) -> ChildResult:
        # only a user's own entry point is imported from the current directory
        env = child_env(paths="safe" if self.name in BUILTIN else "cwd", overrides=overrides)
        return run_child(["-m", "tfaccel.trial.child", request.to_json()], MARK, env, timeout_s)

    def result(
        self, key: str, settings: Settings, out: ChildResult, timeout_s: float
    ) -> TrialResult:
        return result_of(key, settings, out, timeout_s)


def run_trial(
    target: str | TrialTarget,
    settings: Settings,
    steps: StepPlan,
    timeout_s: float = 600.0,
    seed: int = 0,
    extra: dict[str, Any] | None = None,
    env_overrides: dict[str, str] | None = None,
) -> TrialResult:
    """One trial in a fresh process, of a workload (its name, or `Workload`) or a
    script (`script.run.ScriptTrial`); a hang is killed at `timeout_s` and recorded."""
    subject = Workload(target) if isinstance(target, str) else target
    key = settings_key(subject.name, settings, steps, extra)
    out = subject.start(subject.request(settings, steps, seed, extra), env_overrides, timeout_s)
    return subject.result(key, settings, out, timeout_s)


def trial_request(
    mode: Mode,
    settings: Settings,
    steps: StepPlan,
    seed: int,
    extra: dict[str, Any] | None,
    **fields: Any,
) -> TrialRequest:
    """What a trial's process is told: the settings, the step plan, the seed, and the
    caller's extras (those its journal key holds) as the request's fields."""
    return TrialRequest.of(
        mode, extra, settings=settings.to_dict(), steps=dict(steps.__dict__), seed=seed, **fields
    )


def result_of(
    key: str, settings: Settings, out: ChildResult, timeout_s: float, silent: str | None = None
) -> TrialResult:
    """The trial's result from what its process left: its payload, or why it has none
    (`silent`: what to say of a process that ended well without one)."""
    if out.payload is not None:
        return summarize(key, settings, out.payload, out.wall_s)
    failed = partial(TrialResult, key, label_of(settings), settings.to_dict(), wall_s=out.wall_s)
    if out.timed_out:
        return failed("timeout", error=f"killed after {timeout_s:.0f} s")
    if out.returncode == 0 and silent:
        return failed("error", error=silent, traceback=out.tail())
    raised = out.raised()
    return failed(
        "oom" if out.killed else "error",
        error=f"trial process {out.exit_text()}" + (f": {raised}" if raised else ""),
        traceback=out.tail(),
    )
