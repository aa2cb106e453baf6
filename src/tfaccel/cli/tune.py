"""`tfaccel tune`: measure which settings make a model fastest, write tfaccel.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from tfaccel.cli._common import (
    FORMAT_OPTION,
    WORKLOAD_HELP,
    handle_errors,
    name_list,
    require_positive,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import InputError
from tfaccel.optimize.settings import PRECISIONS, Settings
from tfaccel.render import Format
from tfaccel.render.tune import trial_line, tune_plot, tune_text
from tfaccel.results import check_writable
from tfaccel.trial.runner import StepPlan, TrialResult, label_of
from tfaccel.tune.journal import Journal
from tfaccel.tune.output import own_outputs, result_json, write_settings
from tfaccel.tune.search import AGAIN, SKIPPABLE, Hardware, TuneOptions, Tuner


def _hardware() -> Hardware:
    from tfaccel.hardware.nvml import driver_info

    info = driver_info()
    return hardware_of(info)


def hardware_of(info: Any) -> Hardware:
    """The GPUs the trials will see: NVML's, narrowed by CUDA_VISIBLE_DEVICES."""
    from tfaccel.hardware.capabilities import visible_indices

    by_index = {g.index: g for g in info.gpus}
    visible = visible_indices([g.uuid for g in info.gpus])
    gpus = [by_index[i] for i in visible if i in by_index and not by_index[i].error]
    return Hardware(len(gpus), gpus[0].compute_capability if gpus else None)


@handle_errors
def tune(
    workload: str = typer.Argument(
        ...,
        help=WORKLOAD_HELP,
    ),
    batch: int = typer.Option(32, "--batch", "-b", help="Starting batch size."),
    max_batch: int = typer.Option(4096, "--max-batch", help="Largest batch size to try."),
    warmup: int = typer.Option(10, "--warmup", help="Warm-up steps per trial (untimed)."),
    windows: int = typer.Option(5, "--windows", help="Timed windows per trial."),
    window: int = typer.Option(20, "--window", help="Steps per timed window."),
    window_seconds: float = typer.Option(
        3.0,
        "--window-seconds",
        help="Fewer steps per window when --window steps would take longer than this "
        "(slow trials, e.g. float32 without XLA); 0: always --window steps.",
    ),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds before a trial is killed."),
    output: Path = typer.Option(
        Path("tfaccel.json"), "--output", "-o", help="Where to write the best settings."
    ),
    journal: Path = typer.Option(
        Path("tfaccel-tune.jsonl"),
        "--journal",
        help="Trial journal; an interrupted tune resumes from it.",
    ),
    plot: Path = typer.Option(
        None,
        "--plot",
        help="Throughput plot (PNG); default: the --output name with -tune.png (tfaccel-tune.png).",
    ),
    precisions: str = typer.Option(
        None,
        "--precisions",
        help="Comma-separated precisions to try (float32, tf32, mixed_bfloat16, "
        "mixed_float16); default: what the GPU runs best (bf16 rather than fp16 on "
        "capability >= 8.0).",
    ),
    skip: str = typer.Option(
        None,
        "--skip",
        help="Comma-separated knobs the search leaves as they are ("
        + ", ".join(SKIPPABLE)
        + "): knobs you know do not apply save their trials.",
    ),
    time_budget: float = typer.Option(
        None,
        "--time-budget",
        help="Minutes: start no trial that would likely end past it; the best so far is "
        "written, and the same command later resumes from the journal.",
    ),
    confirm: int = typer.Option(
        0,
        "--confirm",
        help="After the search, run Keras' defaults and the best settings this many more "
        "times each, back to back, and report their speedup (a resumed journal's runs may "
        "be from another day).",
    ),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore the journal's earlier trials."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --output file."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Measure which settings make a model fastest here, and write them to tfaccel.json."""
    require_positive(
        ("--batch", batch),
        ("--max-batch", max_batch),
        ("--warmup", warmup),
        ("--windows", windows),
        ("--window", window),
    )
    if confirm < 0:
        raise InputError(
            "--confirm must not be negative", expected="rounds >= 0 (0: off)", received=confirm
        )
    if window_seconds < 0:
        raise InputError(
            "--window-seconds must not be negative",
            expected="seconds >= 0 (0: off)",
            received=window_seconds,
        )
    if time_budget is not None and time_budget <= 0:
        raise InputError(
            "--time-budget must be positive", expected="minutes > 0", received=time_budget
        )
    if max_batch < batch:
        raise InputError("--max-batch is below --batch", expected=f">= {batch}", received=max_batch)
    plot = plot or output.with_name(f"{output.stem}-tune.png")
    own = own_outputs(output, workload)  # what this same tune wrote before: replaced
    for path, flag in ((output, "--output other.json"), (plot, "--plot other.png")):
        ours = path.resolve() in own
        check_writable(path, force or ours, hint=f"tfaccel tune ... {flag}, or --force")
    check_writable(journal, force=True)  # appended to: only its folder must exist
    from tfaccel.workloads.check import check_entry_point

    check_entry_point(workload)  # a bad entry point: exit 2 before any trial or journal
    if fresh and journal.exists():
        if not force:
            raise InputError(
                f"--fresh would discard {journal}",
                expected="--fresh --force, or another --journal path",
                received=str(journal),
            )
        journal.unlink()
    from tfaccel.environment import machine_id
    from tfaccel.workloads import source_fingerprint

    jr = Journal(journal, fingerprint=source_fingerprint(workload), machine=machine_id())
    jr.load(workload)
    if jr.stale:
        stderr_console().print(
            Text(
                f"{jr.stale} trial(s) of {workload} in {journal} were measured on another "
                "version of its file: they are measured again",
                style="yellow",
            )
        )
    if jr.retried:
        stderr_console().print(
            Text(f"{jr.retried} trial(s) that failed in {journal} are run again", style="dim")
        )
    hw = _hardware()
    chosen: tuple[str, ...] | None = None
    if precisions:
        # bfloat16 stores the weights in bf16: for inference, not for the training
        # steps a tune times (mixed_bfloat16 keeps float32 master weights).
        known = sorted(set(PRECISIONS) - {"auto", "bfloat16"})
        bf16 = "bfloat16" in (p.strip() for p in precisions.split(","))
        hint = "bfloat16 (weights in bf16) is for inference; tune trains: use mixed_bfloat16"
        chosen = name_list(precisions, "--precisions", "precision", known, hint if bf16 else None)
    skipped = name_list(skip, "--skip", "knob", list(SKIPPABLE)) if skip else ()
    options = TuneOptions(
        batch_size=batch,
        max_batch=max_batch,
        steps=StepPlan(warmup, windows, window, window_seconds or None),
        timeout_s=timeout,
        precisions=chosen,
        skip=skipped,
        time_budget_s=time_budget * 60 if time_budget else None,
        confirm=confirm,
        xla_cache_dir=str(journal.with_name(journal.name + ".xla-cache")) if hw.gpus else None,
    )
    err = stderr_console()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} trials (estimate)"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )

    def on_trial(stage: str, r: TrialResult | None, settings: Settings) -> None:
        if r is None:
            progress.update(task, description=f"{stage}: {label_of(settings)}")
            if stage == AGAIN:  # a trial of another machine, not in the estimate
                progress.update(task, total=(progress.tasks[0].total or 0) + 1)
        else:
            progress.advance(task)
            progress.console.print(trial_line(stage, r))

    tuner = Tuner(workload, hw, options, jr, on_trial=on_trial)
    with progress:
        task = progress.add_task("starting", total=tuner.estimated_trials())
        result = tuner.run()
    if result.best_settings is not None and result.best is not None and result.best.ok:
        write_settings(output, result, plot)
        tune_plot(result, plot)
    if fmt is Format.json:
        write_out(result_json(result))
    else:
        tune_text(result, stdout_console())
        if result.best is not None and result.best.ok:
            err.print(
                Text(
                    f"wrote {output} (load with tfaccel.configure.from_file"
                    f"('{output}')), {plot}, journal {journal}",
                    style="dim",
                )
            )
    if result.best is None or not result.best.ok:
        from tfaccel.errors import ExitCode

        raise typer.Exit(int(ExitCode.RUNTIME))
