"""Rendering of `tfaccel plan`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfaccel.plan.fit import FitPlan
from tfaccel.plan.scenario import ScenarioPlan
from tfaccel.plan.timing import TrainTime, human_duration
from tfaccel.results import save_figure


@dataclass(frozen=True)
class PlanReport:
    fit: FitPlan | None = None
    time: TrainTime | None = None
    scenario: ScenarioPlan | None = None


# Past this many samples, memory is not what sets a batch size.
HUGE_BATCH = 65_536


def _gib(size: float) -> str:
    """Bytes in GiB, or MiB below 1 GiB."""
    if size < 2**30:
        return f"{size / 2**20:,.1f} MiB"
    return f"{size / 2**30:,.2f} GiB"


def fit_text(plan: FitPlan, console: Console) -> None:
    estimate = plan.estimate
    head = Table(
        title=f"memory plan: {estimate.workload} ({estimate.precision}, {estimate.optimizer})",
        title_justify="left",
        show_header=False,
        box=None,
        padding=(0, 1),
        title_style="bold",
    )
    head.add_column(style="dim")
    head.add_column()
    head.add_row(
        "parameters", f"{estimate.parameters:,} ({estimate.trainable_parameters:,} trainable)"
    )
    head.add_row("weights", _gib(estimate.weights_bytes))
    head.add_row("gradients", _gib(estimate.gradients_bytes))
    head.add_row("optimizer state", _gib(estimate.optimizer_bytes))
    head.add_row(
        "activations saved for backward",
        f"{estimate.activations_bytes_per_sample / 2**20:,.1f} MiB per sample",
    )
    head.add_row(
        "step memory per extra sample", f"{estimate.step_bytes_per_sample / 2**20:,.1f} MiB"
    )
    head.add_row(
        "capacity",
        f"{_gib(plan.capacity.bytes)} ({plan.capacity.source}), {plan.margin:.0%} kept free",
    )
    head.add_row("method", estimate.method)
    if estimate.shapes:
        head.add_row("shapes", estimate.shapes)
    console.print(head)
    table = Table(box=None, padding=(0, 1))
    table.add_column("batch", justify="right")
    table.add_column("predicted peak", justify="right")
    table.add_column("")
    for batch, peak in plan.batch_table:
        asked = plan.batch_from if batch == plan.batch else ""
        table.add_row(f"{batch:,}", _gib(peak), "max" if batch == plan.max_batch else asked)
    console.print(table)
    if plan.batch is not None:
        whose = "" if plan.batch_from == "asked" else f" ({plan.batch_from})"
        fits = "fits" if plan.fits else "does NOT fit"
        predicted = _gib(plan.peak_bytes_at_batch or 0)
        verdict = f"batch {plan.batch}{whose} {fits}: predicted peak {predicted}"
        console.print(Text(verdict, style="bold green" if plan.fits else "bold red"))
    console.print(Text(f"largest batch that fits: {plan.max_batch:,}", style="bold"))
    if plan.max_batch > HUGE_BATCH:
        console.print(
            Text(
                "memory does not limit this model's batch size: choose it for throughput "
                "(tfaccel tune) and for convergence",
                style="dim",
            )
        )
    if plan.suggestions:
        fixes = Table(title="to make it fit", title_justify="left", box=None, padding=(0, 1))
        for col in ("option", "what it gives", "max batch", "effective batch"):
            fixes.add_column(col)
        for sug in plan.suggestions:
            detail = sug.detail + (f"\n{sug.command}" if sug.command else "")
            fixes.add_row(
                sug.action,
                detail,
                "" if sug.max_batch is None else f"{sug.max_batch:,}",
                "" if sug.effective_batch is None else f"{sug.effective_batch:,}",
            )
        console.print(fixes)


def time_text(t: TrainTime, console: Console) -> None:
    table = Table(
        title=f"time to train: {t.epochs:g} epochs x {t.samples:,} samples",
        title_justify="left",
        box=None,
        padding=(0, 1),
        title_style="bold",
    )
    table.add_column("set-up")
    table.add_column("samples/s", justify="right")
    table.add_column("time", justify="right")
    for row in t.rows:
        table.add_row(row.label, f"{row.samples_per_s:,.0f}", human_duration(row.seconds))
    console.print(table)


def scenario_text(scenario: ScenarioPlan, console: Console) -> None:
    where = (
        f"{scenario.gpu_count} x {scenario.gpu_name} (cc {scenario.compute_capability})"
        if scenario.gpu_name
        else "no local GPU"
    )
    table = Table(
        title=f"{scenario.scenario} on this machine: {where}",
        title_justify="left",
        box=None,
        padding=(0, 1),
        title_style="bold",
    )
    table.add_column("setting")
    table.add_column("recommendation")
    table.add_column("why", style="dim")
    for recommendation in scenario.recommendations:
        table.add_row(recommendation.setting, recommendation.value, recommendation.why)
    console.print(table)
    options = Table(
        title=f"GPUs from the spec file ({scenario.basis})",
        title_justify="left",
        box=None,
        padding=(0, 1),
    )
    options.add_column("GPU")
    options.add_column("est. samples/s (1 GPU)", justify="right")
    options.add_column("time on 1 GPU", justify="right")
    options.add_column("GPUs for the budget", justify="right")
    for cand in scenario.candidates[:12]:
        options.add_row(
            cand.gpu,
            f"{cand.est_samples_per_s:,.0f}" if cand.est_samples_per_s else "-",
            human_duration(cand.hours * 3600) if cand.hours else "-",
            str(cand.gpus_needed) if cand.gpus_needed else "-",
        )
    console.print(options)


def plan_text(report: PlanReport, console: Console) -> None:
    if report.fit is not None:
        fit_text(report.fit, console)
    if report.time is not None:
        time_text(report.time, console)
    if report.scenario is not None:
        scenario_text(report.scenario, console)


def fit_plot(plan: FitPlan, path: Path) -> Path:
    """Predicted peak memory against batch size, with the GPU's capacity, the margin kept
    free and the largest batch that fits (the batch asked for too, if any)."""
    from tfaccel.render import pyplot

    plt = pyplot()
    top = max(int(plan.max_batch * 1.5), (plan.batch or 1) * 2, 8)
    batches = sorted({1 + (top - 1) * i // 64 for i in range(65)})
    gib = 1024**3
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(batches, [plan.estimate.peak_bytes(batch) / gib for batch in batches], color="#1f77b4",
            label="predicted peak of a training step")  # fmt: skip
    ax.axhline(
        plan.capacity.bytes / gib, color="#d62728", label=f"capacity: {plan.capacity.source}"
    )
    usable = plan.capacity.bytes * (1 - plan.margin) / gib
    ax.axhline(usable, color="#d62728", ls="--", lw=1, label=f"less the {plan.margin:.0%} margin")
    if plan.max_batch:
        ax.axvline(
            plan.max_batch, color="#2ca02c", ls=":", label=f"largest batch: {plan.max_batch}"
        )
    if plan.batch:
        ax.plot([plan.batch], [(plan.peak_bytes_at_batch or 0) / gib], "o", color="black",
                label=f"batch {plan.batch}: {'fits' if plan.fits else 'does not fit'}")  # fmt: skip
    ax.set_xlabel("batch size")
    ax.set_ylabel("GiB")
    ax.set_title(f"tfaccel plan: {plan.estimate.workload} ({plan.estimate.precision})")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)
