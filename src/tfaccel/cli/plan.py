"""`tfaccel plan`: memory fit, time to train, and scenario set-ups."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import typer

from tfaccel.cli._common import (
    FORMAT_OPTION,
    GPU_INDEX_HELP,
    GPUS_HELP,
    WORKLOAD_HELP,
    duration,
    finite,
    gpu_counts,
    gpu_index_flag,
    gpu_indices,
    gpus_flag,
    handle_errors,
    positive,
    seconds_of,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import InputError
from tfaccel.plan.child import estimate_in_child, estimate_script_in_child
from tfaccel.plan.fit import capacity_from_local, capacity_from_spec, plan_fit
from tfaccel.plan.memory import MemoryEstimate, PlanPrecision
from tfaccel.plan.scenario import Scenario, local_gpu, plan_scenario
from tfaccel.plan.timing import time_to_train
from tfaccel.render import Format, dumps
from tfaccel.render.plan import PlanReport, fit_plot, plan_text
from tfaccel.results import SCHEMAS, check_writable
from tfaccel.script.command import Script, check_script, is_command, parse_command


@handle_errors
def plan(
    target: list[str] = typer.Argument(
        None,
        help=WORKLOAD_HELP + " Or, after --, a training script's command: tfaccel plan -- "
        "python train.py ARGS (its model as its first model.fit trains it, at that fit's "
        "batch size unless --batch).",
        show_default=False,
    ),
    precision: PlanPrecision = typer.Option(
        "float32", "--precision", "-p", help="The precision the model trains in."
    ),
    batch: int = typer.Option(None, "--batch", "-b", min=1, help="Check this batch size."),
    gpu: str = typer.Option(
        None,
        "--spec",
        help="Plan for a GPU from the spec file (e.g. H200; `tfaccel hw --list-specs`) "
        "instead of the local one.",
    ),
    gpu_index: str = typer.Option(
        None,
        "--gpu-index",
        callback=gpu_index_flag,
        help=GPU_INDEX_HELP + "; of several, the least free memory counts (default: the "
        "first GPU TensorFlow sees).",
    ),
    margin: float = typer.Option(
        0.10, "--margin", min=0.0, max=0.9, callback=finite, help="Fraction of memory kept free."
    ),
    optimizer: str = typer.Option(
        None, "--optimizer", help="Keras optimizer name (default: the model's, else adam)."
    ),
    throughput: float = typer.Option(
        None,
        "--throughput",
        callback=positive,
        help="Measured samples/s on one GPU (for time to train and the scenario's GPU list).",
    ),
    on: str = typer.Option(None, "--on", help="The GPU --throughput was measured on (spec key)."),
    samples: float = typer.Option(
        None, "--samples", callback=positive, help="Samples per epoch (e.g. 1.28e6)."
    ),
    epochs: float = typer.Option(1.0, "--epochs", callback=positive, help="Epochs to train (> 0)."),
    gpus: str = typer.Option(
        None, "--gpus", callback=gpus_flag, help=GPUS_HELP + ": also show the time on these."
    ),
    scenario: Scenario | None = typer.Option(
        None, "--scenario", help="The recommended set-up for this machine, for this kind of work."
    ),
    budget: str = typer.Option(
        None,
        "--time-budget",
        callback=duration(bare_below=60),
        help="Time budget for --scenario: 24h, 90m, 2d (a bare number is seconds).",
    ),
    plot: Path = typer.Option(
        None, "--plot", help="Also draw peak memory against batch size, with the capacity (PNG)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --plot file."),
    fit_call: int = typer.Option(
        1,
        "--fit",
        min=1,
        help="Which of a script's model.fit calls trains the model to plan, counted as the "
        "script makes them (those before it train one step each).",
    ),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Will a model fit (and at what batch), how long training takes, which set-up to use."""
    model, script = _target(target, fit_call)
    counts, indices = gpu_counts(gpus) or (), gpu_indices(gpu_index)
    if model is None and script is None and throughput is None and scenario is None:
        raise InputError(
            "Nothing to plan",
            expected="a MODEL, a script after --, --throughput with --samples, or --scenario",
            received="none of them",
            hint="tfaccel plan resnet50 --batch 256 --spec H200",
        )
    if throughput is not None and samples is None:
        raise InputError(
            "--throughput needs --samples",
            expected="--samples N (per epoch)",
            received="no --samples",
        )
    if plot is not None:
        if model is None and script is None:
            raise InputError("--plot draws a MODEL's memory", expected="a MODEL", received="none")
        check_writable(plot, force, hint="tfaccel plan ... --plot other.png, or --force")
    budget_s = seconds_of(budget)
    budget_h = budget_s / 3600 if budget_s else None
    capacity = (
        (capacity_from_spec(gpu) if gpu else capacity_from_local(indices))
        if (model or script)
        else None
    )
    fit = None
    if capacity is not None:
        trace = _script_trace(script, optimizer) if script else _model_trace(model, optimizer)
        first, own = trace(precision)
        fit = plan_fit(first, capacity, batch or own, margin, lambda p: trace(p)[0])
        if batch is None and own is not None:
            fit = dataclasses.replace(fit, batch_from="the script's")
    time = (
        time_to_train(throughput, int(samples), epochs, counts) if throughput and samples else None
    )
    scen = None
    if scenario is not None:
        name, capability, count, mig = local_gpu()
        scen = plan_scenario(
            scenario,
            name,
            capability,
            count,
            mig_capable=mig,
            throughput=throughput,
            reference_gpu=on,
            samples=int(samples) if samples else None,
            epochs=epochs,
            budget_hours=budget_h,
        )
    report = PlanReport(fit, time, scen)
    if fmt is Format.json:
        write_out(dumps(report, schema=SCHEMAS["plan"]))
    else:
        plan_text(report, stdout_console())
    if plot is not None and fit is not None:
        fit_plot(fit, plot)
        stderr_console().print(f"wrote {plot}")


def _target(target: list[str] | None, fit: int) -> tuple[str | None, Script | None]:
    """A workload name, or a script's command (python ..., or a .py file first),
    checked before any work."""
    if not target:
        if fit != 1:
            raise InputError(
                "--fit names a script's fit call",
                expected="a script after --",
                received="no script",
            )
        return None, None
    if len(target) == 1 and not is_command(target):
        if fit != 1:
            raise InputError(
                "--fit chooses which of a script's model.fit calls trains the model to plan",
                expected="a script's command after -- (tfaccel plan --fit 2 -- python train.py)",
                received=target[0],
            )
        return target[0], None
    script = dataclasses.replace(parse_command(list(target)), fit=fit)
    check_script(script)
    return None, script


Trace = Callable[[str], tuple[MemoryEstimate, int | None]]


def _model_trace(model: str | None, optimizer: str | None) -> Trace:
    """A built-in's or entry point's training step traced in a precision (a CPU child)."""

    def trace(precision: str) -> tuple[MemoryEstimate, int | None]:
        with stderr_console().status(f"tracing {model}'s training step ({precision}) ..."):
            return estimate_in_child(str(model), precision, optimizer), None

    return trace


def _script_trace(script: Script, optimizer: str | None) -> Trace:
    """A script's model traced as its fit call trains it, in a precision (the script
    run on the CPU up to that call), and the batch size that call trains at."""

    def trace(precision: str) -> tuple[MemoryEstimate, int | None]:
        with stderr_console().status(
            f"running {script.name} to its model.fit call {script.fit}, tracing its "
            f"training step ({precision}) ..."
        ):
            return estimate_script_in_child(script, precision, optimizer)

    return trace
