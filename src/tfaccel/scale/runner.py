"""Scaling efficiency: the same workload on 1, 2, ... N GPUs, global batch scaled per replica.

Each point is a fresh trial process that sees only its first n GPUs (CUDA_VISIBLE_DEVICES)
and trains with MirroredStrategy through tfaccel's data-parallel step (XLA per replica),
or through Keras `fit` with `engine="fit"`, for comparison.
Efficiency = N-GPU throughput / (N x 1-GPU throughput).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError
from tfaccel.optimize.settings import Settings
from tfaccel.results import SCHEMAS
from tfaccel.stats import NOISE_FLOOR
from tfaccel.trial.runner import StepPlan, TrialResult, TrialStatus, compile_cache_env, run_trial


@dataclass(frozen=True)
class ScalePoint:
    gpus: int
    global_batch: int
    samples_per_s: float | None
    efficiency: float | None
    engine: str | None
    status: TrialStatus
    error: str | None = None
    cross_device_ops: str | None = None  # the all-reduce implementation that ran
    allreduce_ms: float | None = None  # one all-reduce of the gradients, timed alone
    update: str | None = None  # how the optimizer update ran: "xla per replica", ...
    update_error: str | None = None  # why the fused update fell back to Keras' path
    # host (tf.data, copied each step), staged (host, cast inside the step) or device
    input: str | None = None
    input_bytes_per_sample: int | None = None  # what crosses to the GPU per sample

    @property
    def input_gb_s(self) -> float | None:
        """Host-to-GPU input traffic this throughput needs, all GPUs together (GB/s)."""
        if (
            self.input not in ("host", "staged")
            or not self.samples_per_s
            or not self.input_bytes_per_sample
        ):
            return None
        return self.samples_per_s * self.input_bytes_per_sample / 1e9

    @property
    def step_ms(self) -> float | None:
        return 1000.0 * self.global_batch / self.samples_per_s if self.samples_per_s else None

    @property
    def allreduce_share(self) -> float | None:
        """The gradients' all-reduce as a share of the step, were it not overlapped."""
        step = self.step_ms
        return self.allreduce_ms / step if self.allreduce_ms is not None and step else None


@dataclass(frozen=True)
class ScaleReport:
    workload: str
    per_replica_batch: int
    settings: dict[str, Any]
    points: tuple[ScalePoint, ...]
    topology: Any = None
    topology_warnings: tuple[str, ...] = ()
    gpu_names: tuple[str, ...] = ()
    search: tuple[SearchStep, ...] = ()  # --search: what was tried at the largest count
    best: dict[str, Any] | None = None
    # --config: the single-GPU throughput `tune` measured, and each count's ratio to it
    tuned_reference: dict[str, Any] | None = None
    # False in a file written while the run goes on (--out) or left by an interrupted one
    complete: bool = True


@dataclass(frozen=True)
class SearchStep:
    option: str
    value: Any
    samples_per_s: float | None
    status: TrialStatus
    kept: bool
    note: str


@dataclass(frozen=True)
class Published:
    """A published scaling figure to set a run beside (efficiency = speedup / GPUs)."""

    label: str
    gpus: int
    efficiency_low: float
    efficiency_high: float


# The figures users meet (issue text): data/model parallel on 4 A100s, 82 % over NVLink
# and 67 % over PCIe 4.0; NVIDIA's ResNet-50 weak scaling on 8 A100s, 7.3-7.7x.
PUBLISHED = (
    Published("4x A100, NVLink", 4, 0.82, 0.82),
    Published("4x A100, PCIe 4.0", 4, 0.67, 0.67),
    Published("8x A100, ResNet-50 (NVIDIA)", 8, 7.3 / 8, 7.7 / 8),
)


def published_for(counts: Sequence[int]) -> list[Published]:
    """The published figures at GPU counts this run measured."""
    return [point for point in PUBLISHED if point.gpus in set(counts)]


def tuned_reference(
    source: str, tuned: dict[str, Any], points: Sequence[ScalePoint]
) -> dict[str, Any] | None:
    """What each GPU count gains over the best single-GPU run `tune` measured (`tuned` is
    the parsed tfaccel.json; its `measured.samples_per_s`), or None without a measurement."""
    measured = tuned.get("measured")
    rate = measured.get("samples_per_s") if isinstance(measured, dict) else None
    if not isinstance(rate, (int, float)) or rate <= 0:
        return None
    return {
        "source": source,
        "samples_per_s": float(rate),
        "ratio": {
            str(point.gpus): point.samples_per_s / rate for point in points if point.samples_per_s
        },
    }


def read_scale_report(path: str | Path) -> ScaleReport:
    """A `tfaccel scale --format json` file read back (for plots across runs)."""
    from tfaccel._deps import read_json
    from tfaccel.errors import ConfigFileError

    data = read_json(Path(path), "a tfaccel scale --format json file")
    if data.get("schema") != SCHEMAS["scale"] or not isinstance(data.get("points"), list):
        raise ConfigFileError(
            f"{path} is not a tfaccel scale report",
            expected="schema 'tfaccel.scale/1' with a list of points",
            received=repr(data.get("schema")),
        )
    names = {declared.name for declared in dataclasses.fields(ScalePoint)}
    try:
        points = tuple(
            ScalePoint(**{key: value for key, value in point.items() if key in names})
            for point in data["points"]
        )
    except TypeError as exc:
        raise ConfigFileError(
            f"{path} has a malformed point",
            expected="points with gpus, global_batch, samples_per_s, efficiency, engine, status",
            received=str(exc),
        ) from exc
    return ScaleReport(
        str(data.get("workload", "?")),
        int(data.get("per_replica_batch", 0)),
        dict(data.get("settings") or {}),
        points,
        tuned_reference=data.get("tuned_reference"),
        complete=bool(data.get("complete", True)),
    )


def gpu_counts(
    visible: int, requested: Sequence[int] | None, names: Sequence[str] = ()
) -> list[int]:
    """1, 2, 4, ... up to `visible` (and `visible` itself), or the requested counts;
    `names` lists the visible GPUs in the error for a count beyond them."""
    if requested:
        bad = [count for count in requested if count < 1 or count > visible]
        if bad:
            listed = f" ({'; '.join(names)})" if names else ""
            raise InputError(
                f"Cannot run on {bad[0]} GPU(s)",
                expected=f"counts between 1 and the {visible} visible GPU(s){listed}",
                received=list(requested),
                hint="tfaccel hw lists the GPUs; CUDA_VISIBLE_DEVICES limits the ones used",
            )
        return sorted(set(requested))
    counts, count = [], 1
    while count <= visible:
        counts.append(count)
        count *= 2
    if visible and visible not in counts:
        counts.append(visible)
    return counts


def _replicas(
    n: int,
    cpu_replicas: bool,
    xla_cache_dir: str | None = None,
    devices: Sequence[str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Trial extras and environment for n replicas: n logical CPUs, or the first n of
    `devices` (CUDA_VISIBLE_DEVICES entries; default 0..n-1); with `xla_cache_dir`,
    trials share XLA's autotuning and compiled programs."""
    env = compile_cache_env(xla_cache_dir) if xla_cache_dir else {}
    if cpu_replicas:
        return {"logical_cpus": n}, env
    chosen = list(devices)[:n] if devices is not None else [str(i) for i in range(n)]
    return {}, env | {"CUDA_VISIBLE_DEVICES": ",".join(chosen)}


def run_scale(
    workload: str,
    counts: Sequence[int],
    settings: Settings,
    steps: StepPlan,
    engine: str = "auto",
    cpu_replicas: bool = False,
    timeout_s: float = 900.0,
    on_point: Callable[[int, ScalePoint | None], None] | None = None,
    trial_fn: Callable[..., TrialResult] = run_trial,
    cross_device_ops: str = "auto",
    num_packs: int = 1,
    input_mode: str = "host",
    xla_cache_dir: str | None = None,
    devices: Sequence[str] | None = None,
) -> list[ScalePoint]:
    """Measure each GPU count; `cpu_replicas` splits the CPU instead (tests, no GPU).

    With `xla_cache_dir`, the points share XLA's autotuning and compiled programs: every
    count compiles the same per-replica gradient program."""
    points: list[ScalePoint] = []
    base: float | None = None
    for count in counts:
        if on_point:
            on_point(count, None)
        # One engine for every point: with engine "auto" the 1-GPU point runs the same
        # tfaccel step (a one-replica MirroredStrategy) as the others, so efficiency
        # compares like with like; "fit" measures Keras fit at every count.
        point_settings = settings.replace(
            strategy="mirrored" if count > 1 or engine != "fit" else "none"
        )
        extra: dict[str, Any] = {"engine": engine}
        if cross_device_ops != "auto" or num_packs != 1:
            extra |= {"cross_device_ops": cross_device_ops, "num_packs": num_packs}
        if input_mode != "host":
            extra["input"] = input_mode
        placement, env = _replicas(count, cpu_replicas, xla_cache_dir, devices)
        trial = trial_fn(
            workload, point_settings, steps, timeout_s, extra=extra | placement, env_overrides=env
        )
        trial = _placed_as_asked(trial, count, cpu_replicas)
        rate = trial.samples_per_s if trial.ok else None
        if count == 1 and rate:
            base = rate
        eff = rate / (count * base) if rate and base else None
        points.append(
            ScalePoint(
                count,
                (point_settings.batch_size or 32) * count,
                rate,
                eff,
                trial.extra.get("engine", "keras fit" if count == 1 else engine),
                trial.status,
                trial.error,
                trial.extra.get("cross_device_ops"),
                trial.extra.get("allreduce_ms"),
                trial.extra.get("update"),
                trial.extra.get("update_error"),
                trial.extra.get("input"),
                trial.extra.get("input_bytes_per_sample"),
            )
        )
        if on_point:
            on_point(count, points[-1])
    return points


def _placed_as_asked(r: TrialResult, n: int, cpu_replicas: bool) -> TrialResult:
    """A point that ran on fewer replicas than asked, or on the CPU when GPUs were asked
    for (NVML sees them, TensorFlow cannot use them), is an error, not a figure."""
    replicas = r.extra.get("replicas")
    on_cpu = not cpu_replicas and r.device == "CPU"
    if not r.ok or not (on_cpu or (replicas is not None and replicas != n)):
        return r
    where = "the CPU" if on_cpu else f"{replicas} replica(s)"
    return dataclasses.replace(
        r,
        status="error",
        samples_per_s=None,
        error=f"asked for {n} GPU(s), ran on {where}: TensorFlow does not see the GPUs "
        "NVML lists (tfaccel doctor says why)",
    )


def search_scale(
    workload: str,
    n: int,
    settings: Settings,
    steps: StepPlan,
    cpu_replicas: bool = False,
    timeout_s: float = 900.0,
    on_step: Callable[[str, Any], None] | None = None,
    trial_fn: Callable[..., TrialResult] = run_trial,
    noise_floor: float = NOISE_FLOOR,
    input_mode: str = "host",
    xla_cache_dir: str | None = None,
    devices: Sequence[str] | None = None,
) -> tuple[list[SearchStep], dict[str, Any]]:
    """At n GPUs, try the options that change scaling one at a time, as `tune` does:
    the all-reduce implementation (NCCL, hierarchical copy), gradient packing, and
    steps_per_execution. A change is kept only beyond the noise (3 % and twice the
    spread). Returns the steps and the best options."""
    from tfaccel.trial.runner import beats

    best_opts: dict[str, Any] = {
        "cross_device_ops": "nccl" if not cpu_replicas else "one-device",
        "num_packs": 1,
        "steps_per_execution": settings.steps_per_execution,
    }
    placement, env = _replicas(n, cpu_replicas, xla_cache_dir, devices)

    def trial(opts: dict[str, Any]) -> TrialResult:
        point_settings = settings.replace(
            strategy="mirrored", steps_per_execution=opts["steps_per_execution"]
        )
        extra: dict[str, Any] = {
            "engine": "auto",
            "cross_device_ops": opts["cross_device_ops"],
            "num_packs": opts["num_packs"],
            **placement,
            **({"input": input_mode} if input_mode != "host" else {}),
        }
        return trial_fn(workload, point_settings, steps, timeout_s, extra=extra, env_overrides=env)

    out: list[SearchStep] = []
    if on_step:
        on_step("start", best_opts)
    best = trial(best_opts)
    out.append(SearchStep("start", dict(best_opts), best.samples_per_s, best.status, True, ""))
    candidates: list[tuple[str, Any]] = [("num_packs", 4)]
    if not cpu_replicas:
        candidates.insert(0, ("cross_device_ops", "hierarchical"))
    candidates += [
        ("steps_per_execution", spe) for spe in (1, 10, 25) if spe != settings.steps_per_execution
    ]
    for option, value in candidates:
        opts = {**best_opts, option: value}
        if on_step:
            on_step(option, value)
        result = trial(opts)
        win, gain, thr = beats(result, best, noise_floor)
        note = (
            f"{result.status}: {result.error}"
            if not result.ok
            else f"{gain:+.0%} ({'kept' if win else f'threshold {thr:.0%}'})"
        )
        out.append(SearchStep(option, value, result.samples_per_s, result.status, win, note))
        if win:
            best, best_opts = result, opts
    return out, best_opts
