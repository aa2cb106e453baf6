"""`tfaccel scale` and `tfaccel mps`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from tfaccel import scale as scale_lib
from tfaccel._deps import read_json
from tfaccel.cli._common import (
    FORMAT_OPTION,
    GPUS_HELP,
    WORKLOAD_HELP,
    gpu_counts,
    gpus_flag,
    handle_errors,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import InputError
from tfaccel.optimize.settings import InputCast, Precision, XlaMode
from tfaccel.render import Format, dumps
from tfaccel.render.scale import mps_text, point_line, scale_plot, scale_text, tfconfig_text
from tfaccel.results import SCHEMAS, check_writable
from tfaccel.scale import Engine, InputMode
from tfaccel.scale import mps as mpsmod
from tfaccel.scale.runner import ScalePoint
from tfaccel.scale.tfconfig import from_environment, make
from tfaccel.trial.parallel import AllReduce
from tfaccel.trial.runner import StepPlan

TUNED_FILE = "a tfaccel.json written by `tfaccel tune`"


@handle_errors
def scale(
    workload: str = typer.Argument(None, help=WORKLOAD_HELP),
    gpus: str = typer.Option(
        None,
        "--gpus",
        callback=gpus_flag,
        help=GPUS_HELP + ": the counts to measure (default 1, 2, 4, ... all).",
    ),
    batch: int = typer.Option(None, "--batch", "-b", min=1, help="Batch size per replica [256]."),
    precision: Precision | None = typer.Option(
        None, "--precision", help="The precision policy (default: auto)."
    ),
    xla: XlaMode | None = typer.Option(None, "--xla", help="XLA compilation (default: jit)."),
    spe: int = typer.Option(
        None,
        "--steps-per-execution",
        min=1,
        help="Training steps per compiled call (default: 10).",
    ),
    input_cast: InputCast | None = typer.Option(
        None,
        "--input-cast",
        help="compute: host batches cross to the GPU in the 16-bit compute dtype; "
        "off: as they are (default: off).",
    ),
    config: str = typer.Option(
        None,
        "--config",
        "-c",
        help="Start from the settings `tfaccel tune` wrote (tfaccel.json); the options "
        "above override it. Without it, scale measures the options alone.",
    ),
    engine: Engine = typer.Option(
        "auto",
        "--engine",
        help="auto (tfaccel's XLA-per-replica step) or fit (Keras fit, for comparison).",
    ),
    workers: str = typer.Option(
        None,
        "--workers",
        help="host1:port,host2:port: print the TF_CONFIG for a multi-worker cluster instead.",
    ),
    index: int = typer.Option(0, "--index", min=0, help="This worker's index with --workers."),
    script: str = typer.Option(
        "python train.py", "--script", help="The command each worker runs (with --workers)."
    ),
    cpu_replicas: int = typer.Option(
        0,
        "--cpu-replicas",
        min=0,
        help="No GPU: split the CPU into this many replicas to exercise the code path.",
    ),
    all_reduce: AllReduce = typer.Option(
        "auto",
        "--all-reduce",
        help="auto (TensorFlow picks; NCCL on GPUs), nccl, hierarchical or one-device.",
    ),
    num_packs: int = typer.Option(
        1, "--num-packs", min=1, help="Gradient packs per all-reduce (nccl, hierarchical)."
    ),
    input_mode: InputMode = typer.Option(
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
        "--output",
        "-o",
        "--out",
        help="Write the report JSON here, after each GPU count too (complete: false until "
        "the run ends), so an interrupted run keeps its points.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --plot/--output file."),
    warmup: int = typer.Option(
        20, "--warmup", min=1, help="Untimed steps per point (tracing, compilation, autotuning)."
    ),
    windows: int = typer.Option(5, "--windows", min=1, help="Timed windows per point (median)."),
    window: int = typer.Option(20, "--window", min=1, help="Steps per timed window."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Throughput and scaling efficiency on 1..N GPUs; or TF_CONFIG for several workers."""
    counts = gpu_counts(gpus)
    tuned = read_json(Path(config), TUNED_FILE) if config else None
    options = scale_lib.ScaleOptions(
        scale_lib.scale_settings(tuned, batch, precision, xla, spe, input_cast, source=config),
        counts,
        engine,
        cpu_replicas,
        all_reduce,
        num_packs,
        input_mode,
        search,
        StepPlan(warmup, windows, window),
        config,
        tuned,
    )
    options.check()
    _environment_tf_config()
    for path, flag in ((plot, "--plot other.png"), (out, "--output other.json")):
        if path is not None:
            check_writable(path, force, hint=f"tfaccel scale ... {flag}, or --force")
    if workers is not None:
        _tf_config(workers, index, script, fmt)
        return
    if workload is None:
        raise InputError(
            "Nothing to scale",
            expected="tfaccel scale WORKLOAD, or --workers",
            received="no workload",
        )
    err = stderr_console()
    with err.status("scaling ...") as status:

        def on_point(n: int, point: ScalePoint | None) -> None:
            if point is None:
                status.update(f"{n} GPU(s): a fresh process builds, compiles and times ...")
            else:
                err.print(point_line(point))  # a line per point as it finishes

        def on_step(option: str, value: object) -> None:
            status.update(f"search at the largest count: {option}={value} ...")

        report = scale_lib.run(workload, options, out=out, on_point=on_point, on_step=on_step)
    if plot is not None:
        scale_plot([(f"input {input_mode}", report)], plot)
    if fmt is Format.json:
        write_out(dumps(report, schema=SCHEMAS["scale"]))
    else:
        scale_text(report, stdout_console())
        if plot is not None:
            stdout_console().print(f"wrote {plot}")


def _environment_tf_config() -> None:
    """A TF_CONFIG already in the environment: checked (a wrong one is an error naming
    its field), and said, since scale measures this machine's GPUs alone."""
    found = from_environment()
    if found is not None:
        stderr_console().print(
            Text(
                f"TF_CONFIG in the environment: {found.task_type} {found.task_index} of a "
                f"cluster of {found.num_workers} worker(s), checked; scale measures this "
                "machine's GPUs and does not use the cluster",
                style="dim",
            )
        )


def _tf_config(workers: str, index: int, script: str, fmt: Format) -> None:
    cfg = make([worker.strip() for worker in workers.split(",") if worker.strip()], index)
    if fmt is Format.json:
        write_out(dumps({"tf_config": cfg.to_json(), "commands": cfg.commands(script)}))
    else:
        tfconfig_text(cfg, script, stdout_console())


mps_app = typer.Typer(
    help="NVIDIA MPS: status (read-only), start and stop (--yes).", no_args_is_help=True
)


@mps_app.command("status")
@handle_errors
def mps_status(fmt: Format = FORMAT_OPTION) -> None:
    """Is the MPS control daemon running; compute mode; what TensorFlow needs under MPS."""
    state = mpsmod.status()
    if fmt is Format.json:
        write_out(dumps(state))
    else:
        mps_text(state, stdout_console())


@mps_app.command("start")
@handle_errors
def mps_start(yes: bool = typer.Option(False, "--yes", help="Run the commands (as root).")) -> None:
    """Print (or, with --yes, run) the commands that start the MPS control daemon."""
    cmds = mpsmod.start(execute=yes)
    # plain lines, never wrapped: they are shell commands to copy or pipe
    write_out(("ran:\n" if yes else "run these (or add --yes):\n") + "\n".join(cmds))


@mps_app.command("stop")
@handle_errors
def mps_stop(yes: bool = typer.Option(False, "--yes", help="Run the command.")) -> None:
    """Print (or, with --yes, run) the command that stops the MPS control daemon."""
    cmds = mpsmod.stop(execute=yes)
    stdout_console().print(("ran:\n" if yes else "run this (or add --yes):\n") + "\n".join(cmds))
