"""`tfaccel tune`: measure which settings make a model fastest, write tfaccel.json."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from tfaccel import tune as tune_lib
from tfaccel.cli._common import (
    FORMAT_OPTION,
    WORKLOAD_HELP,
    duration,
    finite,
    handle_errors,
    name_list,
    seconds_of,
    stderr_console,
    stdout_console,
    write_out,
)
from tfaccel.errors import ExitCode, InputError
from tfaccel.optimize.settings import PRECISIONS, SKIPPABLE, Settings
from tfaccel.render import Format
from tfaccel.render.tune import trial_line, tune_estimate, tune_plot, tune_progress, tune_text
from tfaccel.script.command import is_command
from tfaccel.trial.runner import StepPlan, TrialResult
from tfaccel.tune.journal import Journal
from tfaccel.tune.output import result_json
from tfaccel.tune.result import TuneOptions, TuneResult
from tfaccel.tune.search import estimate_trials

NO_RACE = "0"


def _race_duration(value: str | None) -> str | None:
    """--race: a duration (`duration`), or 0 for no race."""
    if value is not None and value.strip().lower() in ("0", "0s"):
        return NO_RACE
    return duration()(value)


@handle_errors
def tune(
    target: list[str] = typer.Argument(
        None,
        help=WORKLOAD_HELP + " Or, after --, a training script's command: "
        "tfaccel tune -- python train.py ARGS (its first model.fit is timed).",
        show_default=False,
    ),
    batch: int = typer.Option(
        None,
        "--batch",
        "-b",
        min=1,
        help="Starting batch size; default: what the user's training runs at (a script's "
        "fit(batch_size=N) or its data's batches, the size of an entry point's batches), "
        "else 32.",
        show_default=False,
    ),
    max_batch: int = typer.Option(4096, "--max-batch", min=1, help="Largest batch size to try."),
    fit: int = typer.Option(
        1,
        "--fit",
        min=1,
        help="Which of a script's model.fit calls to time, counted as the script makes them "
        "(2: a fine-tuning fit after a first one); the calls before it train one step each.",
    ),
    warmup: int = typer.Option(10, "--warmup", min=1, help="Warm-up steps per trial (untimed)."),
    windows: int = typer.Option(5, "--windows", min=1, help="Timed windows per trial, at most."),
    min_windows: int = typer.Option(
        3,
        "--min-windows",
        min=3,
        help="Stop timing a trial after this many windows once their spread is under half "
        "the 3 % noise floor (more would not change a decision); >= --windows: time all.",
    ),
    window: int = typer.Option(20, "--window", min=1, help="Steps per timed window."),
    window_seconds: float = typer.Option(
        3.0,
        "--window-seconds",
        min=0.0,
        callback=finite,
        help="Fewer steps per window when --window steps would take longer than this "
        "(slow trials, e.g. float32 without XLA); 0: always --window steps.",
    ),
    timeout: str = typer.Option(
        "600",
        "--timeout",
        callback=duration(),
        help="Time before a trial is killed: 600 (seconds), 10m.",
    ),
    output: Path = typer.Option(
        Path("tfaccel.json"), "--output", "-o", "--out", help="Where to write the best settings."
    ),
    journal: Path = typer.Option(
        None,
        "--journal",
        help="Trial journal; an interrupted tune resumes from it. Default: the --output "
        "file's name with -tune.jsonl (tfaccel-tune.jsonl).",
        show_default=False,
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
    time_budget: str = typer.Option(
        None,
        "--time-budget",
        callback=duration(bare_below=60),
        help="10m, 1.5h or 900 (seconds): start no trial that would likely end past it; "
        "the best so far is written, and the same command later resumes from the journal.",
    ),
    race: str = typer.Option(
        "60s",
        "--race",
        callback=_race_duration,
        help="Training time of each run of the batch offer's race: 60 (seconds), 2m. A larger "
        "batch is offered only where it reaches the same-training run's validation loss "
        "sooner in it; 0: no race (an offer stays unproven, and no time is kept for it).",
    ),
    confirm: int = typer.Option(
        0,
        "--confirm",
        min=0,
        help="After the search, run Keras' defaults and the best settings this many more "
        "times each, back to back, and report their speedup (a resumed journal's runs may "
        "be from another day).",
    ),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore the journal's earlier trials."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --output file."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Measure which settings make a model fastest here, and write them to tfaccel.json."""
    steps = StepPlan(warmup, windows, window, window_seconds or None, min_windows)
    options = _options(
        batch,
        max_batch,
        steps,
        timeout,
        precisions,
        skip,
        time_budget,
        confirm,
        race,
    )
    outputs = tune_lib.Outputs(output, plot, journal)
    # the outputs first (in a moment), then the target (seconds: a child imports it)
    tune_lib.check_outputs(tune_lib.target_name(_target(target)), outputs, force, fresh)
    tgt = tune_lib.prepare(_target(target), fit)  # a bad entry point or script: exit 2 now
    err = stderr_console()
    options, start = tune_lib.start_batch(options, tgt)
    for note in (*tgt.notes, *filter(None, [start])):
        err.print(Text(note, style="dim"))
    hardware = tune_lib.hardware()
    progress = tune_progress(err, options.time_budget_s)
    task = progress.add_task("starting", total=estimate_trials(hardware, options), trial_start=None)

    def on_trial(stage: str, r: TrialResult | None, settings: Settings) -> None:
        if r is None:
            progress.update(task, description=stage, trial_start=time.monotonic())
        else:
            progress.update(task, advance=1, trial_start=None)
            progress.console.print(trial_line(stage, r))
        tune_estimate(progress, task)

    with progress, _stop_as_interrupt():
        result = tune_lib.run(
            tgt,
            options,
            outputs,
            fresh=fresh,
            force=force,
            on_trial=on_trial,
            on_journal=lambda j: _journal_notes(j, tgt.name, outputs.journal_path),
            hw=hardware,
        )
        tune_estimate(progress, task, done=True)
    _render(result, outputs, fmt)


@contextlib.contextmanager
def _stop_as_interrupt() -> Iterator[None]:
    """SIGTERM (what a job scheduler sends at its time limit, before SIGKILL) ends the
    search as Ctrl-C does: the trial it stops is not kept, and the answer of those that
    ended is written in the grace the scheduler leaves. A SIGTERM the command was
    started ignoring stays ignored."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _options(
    batch: int | None,
    max_batch: int,
    steps: StepPlan,
    timeout: str,
    precisions: str | None,
    skip: str | None,
    time_budget: str | None,
    confirm: int,
    race: str | None = "60",
) -> TuneOptions:
    """The search's options from the flags, every one checked before any work."""
    if batch is not None and max_batch < batch:
        raise InputError("--max-batch is below --batch", expected=f">= {batch}", received=max_batch)
    chosen: tuple[str, ...] | None = None
    if precisions:
        # bfloat16 stores the weights in bf16: for inference, not for the training
        # steps a tune times (mixed_bfloat16 keeps float32 master weights).
        known = sorted(set(PRECISIONS) - {"auto", "bfloat16"})
        bf16 = "bfloat16" in (precision.strip() for precision in precisions.split(","))
        hint = "bfloat16 (weights in bf16) is for inference; tune trains: use mixed_bfloat16"
        chosen = name_list(precisions, "--precisions", "precision", known, hint if bf16 else None)
    return TuneOptions(
        batch_size=batch,
        max_batch=max_batch,
        steps=steps,
        timeout_s=seconds_of(timeout) or 600.0,
        precisions=chosen,
        skip=name_list(skip, "--skip", "knob", list(SKIPPABLE)) if skip else (),
        time_budget_s=seconds_of(time_budget),
        confirm=confirm,
        race_s=0.0 if race == NO_RACE else seconds_of(race) or 60.0,
    )


def _target(target: list[str] | None) -> str | list[str]:
    """A workload name, or a script's command (python ..., or a .py file first)."""
    if not target:
        raise InputError(
            "Nothing to tune",
            expected="a workload (tfaccel tune resnet50, tfaccel tune train:build) or a "
            "script after -- (tfaccel tune -- python train.py)",
            received="no arguments",
        )
    if len(target) == 1 and not is_command(target):
        return target[0]
    return list(target)


def _render(result: TuneResult, outputs: tune_lib.Outputs, fmt: Format) -> None:
    if tune_lib.found(result):
        tune_plot(result, outputs.plot_path)
    if fmt is Format.json:
        write_out(result_json(result))
    else:
        tune_text(result, stdout_console())
        if tune_lib.found(result):
            stderr_console().print(
                Text(
                    f"wrote {outputs.settings} (load with tfaccel.configure.from_file"
                    f"('{outputs.settings}')), {outputs.plot_path}, journal {outputs.journal_path}",
                    style="dim",
                ),
                soft_wrap=False,  # wrapped at spaces to the terminal's width
            )
    if not tune_lib.found(result):
        raise typer.Exit(int(ExitCode.RUNTIME))
    if result.interrupted:  # the answer of the trials that ended, written: still Ctrl-C's
        raise typer.Exit(int(ExitCode.INTERRUPTED))


def _journal_notes(journal: Journal, name: str, path: Path) -> None:
    err = stderr_console()
    if journal.stale:
        err.print(
            Text(
                f"{journal.stale} trial(s) of {name} in {path} were measured on another "
                "version of its file: they are measured again",
                style="yellow",
            )
        )
    if journal.retried:
        err.print(
            Text(f"{journal.retried} trial(s) that failed in {path} are run again", style="dim")
        )
