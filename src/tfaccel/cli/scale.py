"""`tfaccel scale` and `tfaccel mps`."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from tfaccel._deps import read_json
from tfaccel.cli._common import (
    FORMAT_OPTION,
    WORKLOAD_HELP,
    handle_errors,
    int_list,
    require_positive,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import InputError
from tfaccel.optimize.settings import Settings, settings_from_dict
from tfaccel.render import Format, dumps
from tfaccel.render.scale import mps_text, point_line, scale_plot, scale_text, tfconfig_text
from tfaccel.results import SCHEMAS, check_writable, write_atomic
from tfaccel.scale import mps as mpsmod
from tfaccel.scale.runner import (
    ScalePoint,
    ScaleReport,
    SearchStep,
    gpu_counts,
    run_scale,
    search_scale,
    tuned_reference,
)
from tfaccel.scale.tfconfig import make

TUNED_FILE = "a tfaccel.json written by `tfaccel tune`"


@handle_errors
def scale(
    workload: str = typer.Argument(None, help=WORKLOAD_HELP),
    gpus: str = typer.Option(
        None, "--gpus", help="GPU counts to measure, e.g. 1,2 (default 1, 2, 4, ... all)."
    ),
    batch: int = typer.Option(None, "--batch", "-b", help="Batch size per replica [256]."),
    precision: str = typer.Option(
        None,
        "--precision",
        help="auto, float32, tf32, mixed_float16 or mixed_bfloat16 (default: auto).",
    ),
    xla: str = typer.Option(None, "--xla", help="jit, auto, autoclustering or off (default: jit)."),
    spe: int = typer.Option(
        None,
        "--steps-per-execution",
        help="Training steps per compiled call (default: 10).",
    ),
    input_cast: str = typer.Option(
        None,
        "--input-cast",
        help="compute: host batches cross to the GPU in the 16-bit compute dtype; "
        "off: as they are (default: off).",
    ),
    config: str = typer.Option(
        None,
        "--config",
        help="Start from the settings `tfaccel tune` wrote (tfaccel.json); the options "
        "above override it.",
    ),
    engine: str = typer.Option(
        "auto",
        "--engine",
        help="auto (tfaccel's XLA-per-replica step) or fit (Keras fit, for comparison).",
    ),
    workers: str = typer.Option(
        None,
        "--workers",
        help="host1:port,host2:port: print the TF_CONFIG for a multi-worker cluster instead.",
    ),
    index: int = typer.Option(0, "--index", help="This worker's index with --workers."),
    script: str = typer.Option(
        "python train.py", "--script", help="The command each worker runs (with --workers)."
    ),
    cpu_replicas: int = typer.Option(
        0,
        "--cpu-replicas",
        help="No GPU: split the CPU into this many replicas to exercise the code path.",
    ),
    all_reduce: str = typer.Option(
        "auto",
        "--all-reduce",
        help="auto (TensorFlow picks; NCCL on GPUs), nccl, hierarchical or one-device.",
    ),
    num_packs: int = typer.Option(
        1, "--num-packs", help="Gradient packs per all-reduce (nccl, hierarchical)."
    ),
    input_mode: str = typer.Option(
        "host",
        "--input",
        help="host: batches come through tf.data from host memory, as in training; "
        "device: one synthetic batch kept on each GPU, so the run measures compute and "
        "all-reduce alone; staged: host batches cast to the 16-bit compute dtype on the "
        "host inside the step (needs --input-cast compute), so they are copied from "
        "pinned memory.",
    ),
    search: bool = typer.Option(
        False,
        "--search",
        help="At the largest GPU count, try the all-reduce, packing and "
        "steps_per_execution options one at a time and keep what is faster beyond noise.",
    ),
    plot: Path = typer.Option(
        None, "--plot", help="Also draw throughput and efficiency per GPU count (PNG)."
    ),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Write the report JSON here, after each GPU count too (complete: false until "
        "the run ends), so an interrupted run keeps its points.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --plot/--out file."),
    warmup: int = typer.Option(
        20, "--warmup", help="Untimed steps per point (tracing, compilation, autotuning)."
    ),
    windows: int = typer.Option(5, "--windows", help="Timed windows per point (median)."),
    window: int = typer.Option(20, "--window", help="Steps per timed window."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Throughput and scaling efficiency on 1..N GPUs; or TF_CONFIG for several workers."""
    if engine not in ("auto", "fit"):
        raise InputError("Unknown engine", expected="auto or fit", received=engine)
    from tfaccel.trial.parallel import CROSS_DEVICE_OPS

    if all_reduce not in CROSS_DEVICE_OPS:
        raise InputError(
            "Unknown --all-reduce", expected=" or ".join(CROSS_DEVICE_OPS), received=all_reduce
        )
    if input_mode not in ("host", "device", "staged"):
        raise InputError("Unknown --input", expected="host, device or staged", received=input_mode)
    if input_mode != "host" and engine == "fit":
        raise InputError(
            f"--input {input_mode} applies to tfaccel's step",
            expected="--engine auto",
            received="--engine fit",
        )
    require_positive(
        ("--num-packs", num_packs),
        ("--batch", batch),
        ("--steps-per-execution", spe),
        ("--warmup", warmup),
        ("--windows", windows),
        ("--window", window),
    )
    if engine == "fit" and (all_reduce != "auto" or search):
        raise InputError(
            "--all-reduce and --search apply to tfaccel's step",
            expected="--engine auto",
            received="--engine fit",
        )
    for path, flag in ((plot, "--plot other.png"), (out, "--out other.json")):
        if path is not None:
            check_writable(path, force, hint=f"tfaccel scale ... {flag}, or --force")
    if workers is not None:
        cfg = make([w.strip() for w in workers.split(",") if w.strip()], index)
        if fmt is Format.json:
            write_out(dumps({"tf_config": cfg.to_json(), "commands": cfg.commands(script)}))
        else:
            tfconfig_text(cfg, script, stdout_console())
        return
    if workload is None:
        raise InputError(
            "Nothing to scale",
            expected="tfaccel scale WORKLOAD, or --workers",
            received="no workload",
        )
    from tfaccel.trial.runner import StepPlan

    topology = None
    warnings: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    devices: list[str] | None = None
    listing: list[str] = []
    if cpu_replicas:
        visible = cpu_replicas
    else:
        from tfaccel.hardware.capabilities import visible_devices, visible_indices
        from tfaccel.hardware.inventory import read_inventory

        inv = read_inventory()
        # the GPUs CUDA_VISIBLE_DEVICES leaves this process, in its order (NVML sees all)
        by_index = {g.index: g for g in inv.gpus}
        seen = [by_index[i] for i in visible_indices([g.uuid for g in inv.gpus])]
        visible = len(seen)
        devices = visible_devices(visible)
        names = tuple(g.name or "?" for g in seen)
        listing = [f"GPU {g.index} {g.name or '?'}" for g in seen]
        topology = inv.topology
        warnings = tuple(w for g in seen for w in g.warnings) + (
            topology.warnings if topology else ()
        )
        if not visible:
            raise InputError(
                "No GPU visible",
                expected="one or more GPUs, or --cpu-replicas N to exercise the code path",
                received=f"0 of {len(inv.gpus)} GPU(s) (CUDA_VISIBLE_DEVICES)"
                if inv.gpus
                else "0 GPUs",
            )
    counts = gpu_counts(visible, int_list(gpus, "--gpus", "1,2,4"), listing)
    tuned = read_json(Path(config), TUNED_FILE) if config else None
    settings = scale_settings(tuned, batch, precision, xla, spe, input_cast, source=config)
    if settings.precision == "bfloat16":
        raise InputError(
            "precision bfloat16 stores the weights in bf16: it is for inference, and scale "
            "measures training",
            expected="mixed_bfloat16 (bf16 math, float32 weights)",
            received="precision=bfloat16",
        )
    batch = settings.batch_size or 256
    if input_mode == "staged" and settings.input_cast != "compute":
        raise InputError(
            "--input staged casts the batches on the host inside the step",
            expected="--input-cast compute (or a --config with it)",
            received=f"input_cast={settings.input_cast}",
        )
    run_settings = {
        "precision": settings.precision,
        "xla": settings.xla,
        "spe": settings.steps_per_execution,
        "input_cast": settings.input_cast,
        **({"config": config} if config else {}),
        "all_reduce": all_reduce,
        "num_packs": num_packs,
        "input": input_mode,
    }

    def report_of(
        points: Sequence[ScalePoint],
        steps_done: tuple[SearchStep, ...] = (),
        best: dict[str, object] | None = None,
        complete: bool = True,
    ) -> ScaleReport:
        return ScaleReport(
            workload,
            batch,
            run_settings,
            tuple(points),
            topology,
            warnings,
            names,
            steps_done,
            best,
            tuned_reference(config, tuned, points) if config and tuned is not None else None,
            complete,
        )

    err = stderr_console()
    cache = contextlib.nullcontext(None) if cpu_replicas else tempfile.TemporaryDirectory()
    finished: list[ScalePoint] = []
    with err.status("scaling ...") as status, cache as cache_dir:

        def on_point(n: int, point: ScalePoint | None) -> None:
            if point is None:
                status.update(f"{n} GPU(s): a fresh process builds, compiles and times ...")
                return
            err.print(point_line(point))  # a line per point as it finishes
            finished.append(point)
            if out is not None:
                report = report_of(finished, complete=False)
                write_atomic(out, dumps(report, schema=SCHEMAS["scale"]))

        points = run_scale(
            workload,
            counts,
            settings,
            StepPlan(warmup, windows, window),
            engine,
            cpu_replicas=bool(cpu_replicas),
            on_point=on_point,
            cross_device_ops=all_reduce,
            num_packs=num_packs,
            input_mode=input_mode,
            xla_cache_dir=cache_dir,
            devices=devices,
        )
        steps_done: tuple[SearchStep, ...] = ()
        best: dict[str, object] | None = None
        if search:

            def on_step(option: str, value: object) -> None:
                status.update(f"search at {max(counts)} GPU(s): {option}={value} ...")

            found, best = search_scale(
                workload,
                max(counts),
                settings,
                StepPlan(warmup, windows, window),
                cpu_replicas=bool(cpu_replicas),
                on_step=on_step,
                input_mode=input_mode,
                xla_cache_dir=cache_dir,
                devices=devices,
            )
            steps_done = tuple(found)
    report = report_of(points, steps_done, best)
    if out is not None:
        write_atomic(out, dumps(report, schema=SCHEMAS["scale"]))
    if plot is not None:
        scale_plot([(f"input {input_mode}", report)], plot)
    if fmt is Format.json:
        write_out(dumps(report, schema=SCHEMAS["scale"]))
    else:
        scale_text(report, stdout_console())
        if plot is not None:
            stdout_console().print(f"wrote {plot}")


def scale_settings(
    tuned: Any,
    batch: int | None,
    precision: str | None,
    xla: str | None,
    spe: int | None,
    input_cast: str | None = None,
    source: str | None = None,
) -> Settings:
    """The settings of every point: tune's file (`tuned`, parsed; None: defaults) with
    the options on top."""
    base = (
        settings_from_dict(tuned, source or "tfaccel.json")
        if tuned is not None
        else Settings(precision="auto", xla="jit", batch_size=256, steps_per_execution=10)
    )
    given = {
        "batch_size": batch,
        "precision": precision,
        "xla": xla,
        "steps_per_execution": spe,
        "input_cast": input_cast,
    }
    return base.replace(**{k: v for k, v in given.items() if v is not None})


mps_app = typer.Typer(
    help="NVIDIA MPS: status (read-only), start and stop (--yes).", no_args_is_help=True
)


@mps_app.command("status")
@handle_errors
def mps_status(fmt: Format = FORMAT_OPTION) -> None:
    """Is the MPS control daemon running; compute mode; what TensorFlow needs under MPS."""
    s = mpsmod.status()
    if fmt is Format.json:
        write_out(dumps(s))
    else:
        mps_text(s, stdout_console())


@mps_app.command("start")
@handle_errors
def mps_start(yes: bool = typer.Option(False, "--yes", help="Run the commands (as root).")) -> None:
    """Print (or, with --yes, run) the commands that start the MPS control daemon."""
    cmds = mpsmod.start(execute=yes)
    stdout_console().print(("ran:\n" if yes else "run these (or add --yes):\n") + "\n".join(cmds))


@mps_app.command("stop")
@handle_errors
def mps_stop(yes: bool = typer.Option(False, "--yes", help="Run the command.")) -> None:
    """Print (or, with --yes, run) the command that stops the MPS control daemon."""
    cmds = mpsmod.stop(execute=yes)
    stdout_console().print(("ran:\n" if yes else "run this (or add --yes):\n") + "\n".join(cmds))
