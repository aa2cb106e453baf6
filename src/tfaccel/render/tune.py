"""Rendering of `tfaccel tune`: the trial table, the summary, and a PNG plot."""

from __future__ import annotations

import math
import re
import textwrap
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text

from tfaccel.render import pyplot
from tfaccel.results import save_figure
from tfaccel.trial.runner import TrialResult, TrialStatus
from tfaccel.tune.offer import SMOOTH, smoothed
from tfaccel.tune.result import TuneResult

_STATUS: dict[TrialStatus, str] = {
    "ok": "green",
    "oom": "yellow",
    "error": "red",
    "timeout": "red",
    "skipped": "dim",
}


# A trial's line: the stage, the settings, then the figures; at 80 columns, the figures
# go on a line of their own where the settings leave no room for them.
_STAGE_WIDTH = 21  # the longest stage: validation_batch_size
_WIDTH = 80


def trial_line(stage: str, trial: TrialResult) -> Text:
    """A trial's line: its stage, settings and figures in 80 columns. A note after the
    stage's name ("dropout (from the journal)") goes after the figures, where it is not
    cut to the stage's column."""
    name, _, note = stage.partition(" (")
    head = f"{name[:_STAGE_WIDTH]:<{_STAGE_WIDTH}} "
    text = Text(head, style="dim")
    figures = _figures(trial)
    if note:
        figures.append(f"  ({note}", style="dim")
    room = _WIDTH - len(head)
    if len(trial.label) + 2 + len(figures.plain) <= room:
        text.append(trial.label + "  ")
    else:  # the settings, wrapped at spaces, then the figures below them
        lines = textwrap.wrap(trial.label, room) or [""]
        text.append(("\n" + " " * len(head)).join(lines) + "\n" + " " * len(head))
    text.append_text(figures)
    return text


def _figures(trial: TrialResult) -> Text:
    text = Text()
    if trial.ok:
        text.append(f"{trial.samples_per_s:,.0f}/s", style="bold")
        # the one noise figure, as the table and the JSON give it (stats.spread)
        spread = f"spread {trial.spread:.0%}" if trial.spread is not None else "spread n/a"
        text.append(f"  {spread}  compile {trial.compile_s or 0:.1f} s", style="dim")
    else:
        text.append(trial.status, style=_STATUS.get(trial.status, "red"))
        if trial.error:
            text.append(f"  {trial.error[: _WIDTH - _STAGE_WIDTH - 12]}", style="dim")
    return text


class TrialElapsed(ProgressColumn):
    """How long the trial in flight has run: a compilation that fills the GPU (a large
    batch's autotuning) shows as minutes here, not as a frozen line."""

    def render(self, task: Any) -> Text:
        start = task.fields.get("trial_start")
        if start is None:
            return Text("")
        seconds = int(time.monotonic() - start)
        return Text(f"trial {seconds // 60}:{seconds % 60:02d}", style="dim")


class BudgetLeft(ProgressColumn):
    """The time budget left, counted from the start of the search."""

    def __init__(self, budget_s: float) -> None:
        super().__init__()
        self.deadline = time.monotonic() + budget_s

    def render(self, task: Any) -> Text:
        left = max(0.0, self.deadline - time.monotonic())
        return Text(f"{int(left // 60)}:{int(left % 60):02d} left", style="cyan")


def tune_progress(console: Console, budget_s: float | None = None) -> Progress:
    """The live line of a tune, one line at 80 columns: the stage, a bar, trials done of
    an estimate (`tune_estimate` keeps it true), the time so far, this trial's, and the
    budget left."""
    stage = Column(max_width=_STAGE_WIDTH, no_wrap=True, overflow="ellipsis")
    return Progress(
        TextColumn("{task.description}", table_column=stage),
        BarColumn(bar_width=10),
        TextColumn("{task.completed}/{task.total} trials"),
        TimeElapsedColumn(),
        TrialElapsed(),
        *([BudgetLeft(budget_s)] if budget_s else []),
        console=console,
        transient=True,
    )


def tune_estimate(progress: Progress, task: Any, done: bool = False) -> None:
    """The estimate of trials, kept above what ran while the search goes on (it learns
    as it goes: a stage may need more trials than estimated), and equal to it at the
    end, so that the bar completes."""
    bar = progress.tasks[0] if progress.tasks else None
    if bar is None:
        return
    if done:
        progress.update(task, total=bar.completed)
    elif bar.total is not None and bar.completed >= bar.total:
        progress.update(task, total=bar.completed + 1)


def _where(res: TuneResult) -> str:
    hardware = res.hardware
    if not hardware.gpus:
        return "on the CPU: no GPU visible, tfaccel doctor says why"
    return f"{hardware.gpus} GPU(s), compute capability {hardware.compute_capability or 'n/a'}"


def tune_text(res: TuneResult, console: Console, unit: str = "samples") -> None:
    table = Table(
        title=f"tfaccel tune: {res.workload} ({_where(res)})",
        title_justify="left",
    )
    peak = any(trial.peak_memory_bytes for trial in res.trials)  # none on a CPU
    for col in ("#", "settings", f"{unit}/s", "spread", "compile s", "peak MiB", "status"):
        if col != "peak MiB" or peak:
            table.add_column(col, justify="right" if col not in ("settings", "status") else "left")
    best_key = res.best.key if res.best else None
    for i, trial in enumerate(res.trials, 1):
        style = "bold green" if trial.key == best_key else ""
        table.add_row(
            str(i),
            Text(trial.label, style=style),
            f"{trial.samples_per_s:,.0f}" if trial.ok else "-",
            f"{(trial.spread or 0):.0%}" if trial.ok else "",
            f"{trial.compile_s:.1f}" if trial.compile_s is not None else "",
            *(
                [f"{trial.peak_memory_bytes / 2**20:,.0f}" if trial.peak_memory_bytes else ""]
                * peak
            ),
            Text(trial.status, style=_STATUS.get(trial.status, "")),
        )
    console.print(table)
    offer = offer_lines(res, unit)  # said once, with the answers below
    for decision in res.decisions:  # wrapped under their own start, two columns in
        if f"{decision.stage}: {decision.text}" in offer:
            continue
        console.print(
            Padding(Text(f"{decision.stage}: {decision.text}", style="dim"), (0, 0, 0, 2))
        )
    failed: dict[str, list[str]] = {}  # one traceback, the trials that ended with it
    for trial in res.trials:
        if trial.status == "error" and trial.traceback:
            failed.setdefault(trial.traceback.strip()[-1500:], []).append(trial.label)
    for text, labels in failed.items():
        which = f"trial {labels[0]}" if len(labels) == 1 else f"{len(labels)} trials ("
        which += "" if len(labels) == 1 else "; ".join(labels) + ")"
        # soft_wrap: a traceback's paths stay whole lines (to copy, and to open)
        console.print(Text(f"{which} failed:\n{text}", style="red"), soft_wrap=True)
    if res.best is None or not res.best.ok:
        console.print(Text("no configuration ran successfully", style="bold red"))
        return
    lines = [f"same training: {res.best.label}: {res.best.samples_per_s:,.0f} {unit}/s"]
    if res.best is res.keras_defaults:
        lines[0] += " (Keras' defaults: no setting beat them beyond the noise)"
    reached = res.time_to(1.5)
    if reached is not None and res.best is not res.keras_defaults and not res.resumed:
        # (resumed, the journal's trials come at 0 s: no time to tell)
        lines.append(f"  the best so far passed 1.5x Keras defaults {reached:.0f} s into the tune")
    refs = (
        ("the baseline", "baseline", res.baseline),
        ("Keras defaults", "keras_defaults", res.keras_defaults),
        (res.as_written and res.as_written.label, "as_written", res.as_written),
    )
    for name, field_name, other in refs:
        speedup = res.speedup(other)
        if speedup is not None and other is not None:
            where = ""
            if field_name in res.other_machine:
                # A resumed journal's figures of two machines: say so, and how to get one.
                where = ", measured on another machine than the best's" + (
                    ""
                    if field_name == "baseline" or res.confirmations
                    else ": --confirm 1 measures both here, back to back"
                )
            label = "" if other is res.as_written else f", {other.label}"  # said in its name
            lines.append(f"  {speedup:.2f}x {name} ({other.samples_per_s:,.0f}/s{label}{where})")
    if res.graph_mode_gain is not None:
        lines.append(
            f"  your script runs its steps eagerly: in graph mode its baseline ran "
            f"{res.graph_mode_gain:.1f}x (graph mode, above)"
        )
    if res.without_determinism_gain is not None:
        lines.append(
            f"  your script turns on op determinism: without it Keras' defaults ran "
            f"{res.without_determinism_gain:.2f}x (above)"
        )
    for i, confirmation in enumerate(res.confirmations, 1):
        defaults, best_trial = confirmation.keras_defaults, confirmation.best
        if confirmation.speedup is None:
            why = defaults if not defaults.ok else best_trial
            lines.append(f"  confirmation {i}: {why.label}: {why.status} ({why.error})")
        else:
            lines.append(
                f"  confirmation {i}, back to back: {confirmation.speedup:.2f}x Keras defaults "
                f"({best_trial.samples_per_s:,.0f}/s against {defaults.samples_per_s:,.0f}/s)"
            )
    setup = f", {res.setup_s_total:.0f} s starting (import, build, data)" * bool(res.setup_s_total)
    lines.append(
        f"  {len(res.trials)} trial{'' if len(res.trials) == 1 else 's'} "
        f"({res.resumed} from the journal) in "
        f"{res.wall_s:.0f} s, {res.compile_s_total:.0f} s of it compiling{setup}"
    )
    console.print(Text("\n".join(lines), style="bold"))
    console.print(Text("\n".join(offer), style="bold"))


def offer_lines(res: TuneResult, unit: str = "samples") -> list[str]:
    """The second answer: a larger batch with its learning rate and race, or why none."""
    offer = res.batch_offer
    if offer is None:
        return [f"batch offer: none: {res.batch_note}"] if res.batch_note else []
    lines = [
        f"batch offer ({offer.verdict}): batch {offer.batch} (from {offer.from_batch}), "
        f"{offer.lr.said()}"
    ]
    lines.append(f"  {offer.samples_speedup:.2f}x the {unit}/s of the same-training answer")
    lines.append(f"  {offer.why}")
    if offer.verdict == "passed":
        lines.append(f"  tfaccel run --batch-offer -- {_command(res.workload)} applies it")
    else:
        lines.append("  tfaccel run applies the same-training answer only")
    return lines


def _command(workload: str) -> str:
    """The script's command, as its workload name holds it ("script: python train.py
    --epochs 3 (fit call 2)"); an entry point's offer is applied to the script that
    trains its model, which tune does not know."""
    if not workload.startswith("script: "):
        return "python YOUR_TRAINING_SCRIPT.py"
    return re.sub(r" \(fit call \d+\)$", "", workload.removeprefix("script: "))


def tune_plot(res: TuneResult, path: Path, unit: str = "samples") -> Path:
    """A bar chart of throughput per trial (PNG), best highlighted."""
    fig = tune_figure(res, unit)
    try:
        save_figure(fig, path)
    finally:
        pyplot().close(fig)
    return path


def tune_figure(res: TuneResult, unit: str = "samples") -> Any:
    """Throughput per trial with its windows' range, the chosen one green and its
    speed-up written beside it, Keras' defaults as a dashed line to read the rest by."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    labels = [trial.label for trial in res.trials]
    values = [trial.samples_per_s or 0.0 for trial in res.trials]
    colors = [_color(res, trial) for trial in res.trials]
    raced = res.races[-2:]  # a descent's loser beside the verdict that stands
    height = 0.35 * len(labels) + 1.5
    if not raced:
        fig, ax = plt.subplots(figsize=(10, height))
    else:  # a panel each, each laid out on its own (the bars' long labels stay above)
        fig = plt.figure(figsize=(10, height + 4.5 * len(raced)), layout="constrained")
        top, *below = fig.subfigures(1 + len(raced), 1, height_ratios=[height] + [4.5] * len(raced))
        ax = top.subplots()
        for panel, offer in zip(below, raced, strict=True):
            race_axes(panel.subplots(), offer)
    runs = list(zip(values, res.trials, strict=True))
    lows = [
        value - min(trial.windows) if trial.ok and trial.windows else 0.0 for value, trial in runs
    ]
    highs = [
        max(trial.windows) - value if trial.ok and trial.windows else 0.0 for value, trial in runs
    ]
    ax.barh(
        range(len(labels)), values, color=colors, xerr=[lows, highs], capsize=3, ecolor="#555555"
    )
    ax.set_yticks(range(len(labels)), labels=labels, fontsize=8)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.xaxis.set_major_locator(MaxNLocator(7))
    ax.set_xlabel(
        f"{unit}/s: median and range over timed windows\n(green: the same-training answer; "
        "orange: the batch offer;\na faster bar within the noise is not chosen; red: failed "
        'or out of memory;\n"lost its race": a batch that did not train sooner'
        + ";\ngrey: a reference (your script as written, in graph mode, or without op "
        "determinism), never applied" * any(_reference(res, trial) for trial in res.trials) + ")",
        fontsize=9,
    )
    ax.set_title(f"tfaccel tune: {res.workload}", loc="left")  # the legend sits at the right
    lost = {offer.trial.key for offer in res.races if offer.verdict == "failed"}
    for i, (value, trial) in enumerate(runs):
        if not trial.ok:
            ax.text(0, i, f" {trial.status}", va="center", fontsize=8, color="#d62728")
        elif trial.key in lost:  # a faster batch that did not reach the same model sooner
            ax.text(value + highs[i], i, " lost its race", va="center", fontsize=8)
        elif _reference(res, trial):  # measured to compare with, never applied
            ax.text(value + highs[i], i, " a reference: not applied", va="center", fontsize=8)
    _mark_defaults(
        ax, res, max((value + high for value, high in zip(values, highs, strict=True)), default=0.0)
    )
    if not raced:
        fig.tight_layout()
    return fig


def _color(res: TuneResult, trial: TrialResult) -> str:
    """Green: the same-training answer; orange: the batch offer; red: failed; grey: a
    reference of the script's own choices."""
    if res.best is not None and trial.key == res.best.key:
        return "#2ca02c"
    if res.batch_offer is not None and trial.key == res.batch_offer.trial.key:
        return "#ff7f0e"
    if not trial.ok:
        return "#d62728"
    return "#999999" if _reference(res, trial) else "#1f77b4"


def _reference(res: TuneResult, trial: TrialResult) -> bool:
    """Is `trial` the script as written, its graph mode or Keras' defaults without its
    op determinism: measured beside the search to compare with, never an answer?"""
    refs = (res.as_written, res.graph_mode, res.without_determinism)
    return any(ref is not None and trial.key == ref.key for ref in refs)


def race_axes(ax: Any, offer: Any) -> None:
    """A batch offer's race: validation loss against seconds of training, for the
    same-training answer and the larger batch, the target and each one's time to it."""
    race = offer.race
    if race is None:
        return
    runs = (
        (race.same, race.same_s, "#2ca02c", f"same training (batch {offer.from_batch})"),
        (race.candidate, race.candidate_s, "#ff7f0e", f"batch {offer.batch}, {_lr_short(offer)}"),
    )
    for points, reached, color, label in runs:
        if points:  # the line is what the race judges; the dots, each evaluation
            ax.plot(*zip(*points, strict=True), "o", ms=3, color=color, alpha=0.35)
            ax.plot(*zip(*smoothed(points), strict=True), color=color, label=label)
        if reached is not None and race.target is not None:
            ax.plot([reached], [race.target], marker="*", ms=12, color=color)
    if race.target is not None:
        ax.axhline(race.target, color="#555555", linestyle=":", linewidth=1)
    said = f"seconds of training (evaluation left out); validation: {race.validation}"
    ax.set_xlabel(
        "\n".join(textwrap.wrap(said, 130))
        + f"\n(lines: the mean of up to {SMOOTH} evaluations, as the race reads them; dots: "
        "each evaluation;\ndotted: the target, the same-training run's best; a star where "
        "each reached it)",
        fontsize=8,
    )
    log = _log_scale(race)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("validation loss" + (" (log scale)" if log else ""), fontsize=9)
    sooner = race.to_target_speedup
    verdict = offer.verdict + (f", {sooner:.2f}x sooner to the target" if sooner else "")
    ax.set_title(f"batch {offer.batch}'s race, {race.seconds:.0f} s each: {verdict}", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")


# A race's losses spanning more than this ratio are drawn on a log scale: the first
# reading (the initial weights') can be tens of times the rest, which a linear axis
# flattens into one line at the bottom, where the two runs differ.
LOG_RATIO = 10.0


def _log_scale(race: Any) -> bool:
    """Whether the race's losses, all positive, span more than LOG_RATIO."""
    values = [p[1] for p in (*race.same, *race.candidate) if math.isfinite(p[1])]
    return bool(values) and min(values) > 0 and max(values) / min(values) > LOG_RATIO


def _lr_short(offer: Any) -> str:
    """The offer's learning rate in a few words: "learning rate x2.83 (sqrt rule)"."""
    lr = offer.lr
    if lr.rule == "none":
        return "learning rate as the script's schedule sets it"
    return f"learning rate x{lr.scale:.3g} ({lr.rule} rule, {lr.warmup_steps} warm-up steps)"


def _mark_defaults(ax: Any, res: TuneResult, right: float) -> None:
    defaults, best = res.keras_defaults, res.best
    if defaults is None or not defaults.ok or not defaults.samples_per_s:
        return
    ax.axvline(defaults.samples_per_s, color="#555555", linestyle="--", linewidth=1)
    # above the bars' top right corner, outside them: inside, it hid the speed-up's
    # label of a long bar at the bottom
    ax.legend(
        ["Keras defaults"], loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False
    )
    speedup = res.speedup(defaults)
    if best is None or speedup is None or not best.samples_per_s:
        return
    row = next(i for i, trial in enumerate(res.trials) if trial.key == best.key)
    end = max(best.windows, default=best.samples_per_s)  # past its range's cap
    ax.text(end, row, f"  {speedup:.2f}x defaults", va="center", fontsize=8)
    ax.set_xlim(0, right * 1.2)
