"""`tfaccel scale`: throughput and scaling efficiency on 1..N GPUs.

`run(...)` is the library entry point the command line wires: the GPUs this process
may use, a fresh trial per GPU count with tfaccel's data-parallel step (or Keras'
fit), an optional search of the all-reduce options at the largest count, and the
report (written after each point, so an interrupted run keeps its points).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tfaccel.errors import InputError
from tfaccel.optimize.settings import Settings, settings_from_dict
from tfaccel.results import SCHEMAS, dumps, write_atomic
from tfaccel.scale.runner import (
    ScalePoint,
    ScaleReport,
    SearchStep,
    gpu_counts,
    run_scale,
    search_scale,
    tuned_reference,
)
from tfaccel.trial.parallel import CROSS_DEVICE_OPS
from tfaccel.trial.runner import StepPlan

__all__ = ["Machine", "ScaleOptions", "ScaleReport", "machine", "run", "scale_settings"]

Engine = Literal["auto", "fit"]
InputMode = Literal["host", "device", "staged"]
ENGINES = ("auto", "fit")
INPUT_MODES = ("host", "device", "staged")


@dataclass(frozen=True)
class ScaleOptions:
    """What a scaling run measures; `check()` refuses what cannot run, before any work."""

    settings: Settings = field(
        default_factory=lambda: Settings(
            precision="auto", xla="jit", batch_size=256, steps_per_execution=10
        )
    )
    gpus: Sequence[int] | None = None  # GPU counts (None: 1, 2, 4, ... all)
    engine: Engine = "auto"
    cpu_replicas: int = 0  # no GPU: the CPU split into this many replicas
    all_reduce: str = "auto"
    num_packs: int = 1
    input_mode: InputMode = "host"
    search: bool = False
    steps: StepPlan = field(default_factory=lambda: StepPlan(20, 5, 20))
    config: str | None = None  # the tfaccel.json the settings came from
    tuned: Any = None  # its parsed content

    def check(self) -> None:
        if self.engine not in ENGINES:
            raise InputError("Unknown engine", expected="auto or fit", received=self.engine)
        if self.all_reduce not in CROSS_DEVICE_OPS:
            expected = " or ".join(CROSS_DEVICE_OPS)
            raise InputError("Unknown --all-reduce", expected=expected, received=self.all_reduce)
        if self.input_mode not in INPUT_MODES:
            expected = "host, device or staged"
            raise InputError("Unknown --input", expected=expected, received=self.input_mode)
        if self.engine == "fit" and (
            self.input_mode != "host" or self.all_reduce != "auto" or self.search
        ):
            raise InputError(
                "--input, --all-reduce and --search apply to tfaccel's step",
                expected="--engine auto",
                received="--engine fit",
            )
        if self.settings.precision == "bfloat16":
            raise InputError(
                "precision bfloat16 stores the weights in bf16: it is for inference, and "
                "scale measures training",
                expected="mixed_bfloat16 (bf16 math, float32 weights)",
                received="precision=bfloat16",
            )
        if self.input_mode == "staged" and self.settings.input_cast != "compute":
            raise InputError(
                "--input staged casts the batches on the host inside the step",
                expected="--input-cast compute (or a --config with it)",
                received=f"input_cast={self.settings.input_cast}",
            )


def scale_settings(
    tuned: Any,
    batch: int | None = None,
    precision: str | None = None,
    xla: str | None = None,
    spe: int | None = None,
    input_cast: str | None = None,
    source: str | None = None,
) -> Settings:
    """The settings of every point: tune's file (`tuned`, parsed; None: defaults) with
    the options given on top."""
    base = (
        settings_from_dict(tuned, source or "tfaccel.json")
        if tuned is not None
        else ScaleOptions().settings
    )
    given = {
        "batch_size": batch,
        "precision": precision,
        "xla": xla,
        "steps_per_execution": spe,
        "input_cast": input_cast,
    }
    return base.replace(**{knob: value for knob, value in given.items() if value is not None})


@dataclass(frozen=True)
class Machine:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES' order), or CPU replicas."""

    visible: int
    devices: list[str] | None = None
    names: tuple[str, ...] = ()
    listing: tuple[str, ...] = ()
    topology: Any = None
    warnings: tuple[str, ...] = ()


def machine(cpu_replicas: int = 0) -> Machine:
    """What the points can use: NVML's GPUs narrowed by CUDA_VISIBLE_DEVICES (InputError
    when none is left), or `cpu_replicas` replicas of the CPU."""
    if cpu_replicas:
        return Machine(cpu_replicas)
    from tfaccel.hardware.capabilities import visible_devices, visible_indices
    from tfaccel.hardware.inventory import read_inventory

    inv = read_inventory()
    by_index = {gpu.index: gpu for gpu in inv.gpus}
    seen = [by_index[i] for i in visible_indices([gpu.uuid for gpu in inv.gpus])]
    if not seen:
        raise InputError(
            "No GPU visible",
            expected="one or more GPUs, or --cpu-replicas N to exercise the code path",
            received=f"0 of {len(inv.gpus)} GPU(s) (CUDA_VISIBLE_DEVICES)"
            if inv.gpus
            else "0 GPUs",
        )
    topology = inv.topology
    return Machine(
        len(seen),
        visible_devices(len(seen)),
        tuple(gpu.name or "?" for gpu in seen),
        tuple(f"GPU {gpu.index} {gpu.name or '?'}" for gpu in seen),
        topology,
        tuple(warning for gpu in seen for warning in gpu.warnings)
        + (topology.warnings if topology else ()),
    )


def run(
    workload: str,
    options: ScaleOptions,
    *,
    out: Path | None = None,
    on_point: Callable[[int, ScalePoint | None], None] | None = None,
    on_step: Callable[[str, object], None] | None = None,
) -> ScaleReport:
    """Measure `workload` on each GPU count; the report (also written to `out` after
    each point, complete: false until the run ends)."""
    options.check()
    host = machine(options.cpu_replicas)
    counts = gpu_counts(
        host.visible, list(options.gpus) if options.gpus else None, list(host.listing)
    )
    finished: list[ScalePoint] = []

    def report_of(
        points: Sequence[ScalePoint],
        steps: tuple[SearchStep, ...] = (),
        best: dict[str, object] | None = None,
        complete: bool = True,
    ) -> ScaleReport:
        reference = None
        if options.config and options.tuned is not None:
            reference = tuned_reference(options.config, options.tuned, points)
        return ScaleReport(
            workload,
            options.settings.batch_size or 256,
            _described(options),
            tuple(points),
            host.topology,
            host.warnings,
            host.names,
            steps,
            best,
            reference,
            complete,
        )

    def point_done(n: int, point: ScalePoint | None) -> None:
        if point is not None:
            finished.append(point)
            if out is not None:
                write_atomic(
                    out, dumps(report_of(finished, complete=False), schema=SCHEMAS["scale"])
                )
        if on_point is not None:
            on_point(n, point)

    cpu = bool(options.cpu_replicas)
    cache = contextlib.nullcontext(None) if cpu else tempfile.TemporaryDirectory()
    with cache as cache_dir:
        points = run_scale(
            workload,
            counts,
            options.settings,
            options.steps,
            options.engine,
            cpu_replicas=cpu,
            on_point=point_done,
            cross_device_ops=options.all_reduce,
            num_packs=options.num_packs,
            devices=host.devices,
            input_mode=options.input_mode,
            xla_cache_dir=cache_dir,
        )
        steps: tuple[SearchStep, ...] = ()
        best = None
        if options.search:
            found, best = search_scale(
                workload,
                max(counts),
                options.settings,
                options.steps,
                cpu_replicas=cpu,
                on_step=on_step,
                devices=host.devices,
                input_mode=options.input_mode,
                xla_cache_dir=cache_dir,
            )
            steps = tuple(found)
    report = report_of(points, steps, best)
    if out is not None:
        write_atomic(out, dumps(report, schema=SCHEMAS["scale"]))
    return report


def _described(options: ScaleOptions) -> dict[str, Any]:
    settings = options.settings
    return {
        "precision": settings.precision,
        "xla": settings.xla,
        "spe": settings.steps_per_execution,
        "input_cast": settings.input_cast,
        **({"config": options.config} if options.config else {}),
        "all_reduce": options.all_reduce,
        "num_packs": options.num_packs,
        "input": options.input_mode,
    }
