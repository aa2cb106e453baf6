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


def _gib(b: float) -> str:
    """Bytes in GiB, or MiB below 1 GiB."""
    if b < 2**30:
        return f"{b / 2**20:,.1f} MiB"
    return f"{b / 2**30:,.2f} GiB"


def fit_text(p: FitPlan, console: Console) -> None:
    e = p.estimate
    head = Table(
        title=f"memory plan: {e.workload} ({e.precision}, {e.optimizer})",
        title_justify="left",
        show_header=False,
        box=None,
        padding=(0, 1),
        title_style="bold",
    )
    head.add_column(style="dim")
    head.add_column()
    head.add_row("parameters", f"{e.parameters:,} ({e.trainable_parameters:,} trainable)")
    head.add_row("weights", _gib(e.weights_bytes))
    head.add_row("gradients", _gib(e.gradients_bytes))
    head.add_row("optimizer state", _gib(e.optimizer_bytes))
    head.add_row(
        "activations saved for backward",
        f"{e.activations_bytes_per_sample / 2**20:,.1f} MiB per sample",
    )
    head.add_row("step memory per extra sample", f"{e.step_bytes_per_sample / 2**20:,.1f} MiB")
    head.add_row(
        "capacity", f"{_gib(p.capacity.bytes)} ({p.capacity.source}), {p.margin:.0%} kept free"
    )
    head.add_row("method", e.method)
    console.print(head)
    t = Table(box=None, padding=(0, 1))
    t.add_column("batch", justify="right")
    t.add_column("predicted peak", justify="right")
    t.add_column("")
    for b, peak in p.batch_table:
        mark = "max" if b == p.max_batch else ("asked" if b == p.batch else "")
        t.add_row(f"{b:,}", _gib(peak), mark)
    console.print(t)
    if p.batch is not None:
        verdict = (
            f"batch {p.batch} fits: predicted peak {_gib(p.peak_bytes_at_batch or 0)}"
            if p.fits
            else f"batch {p.batch} does NOT fit: predicted peak {_gib(p.peak_bytes_at_batch or 0)}"
        )
        console.print(Text(verdict, style="bold green" if p.fits else "bold red"))
    console.print(Text(f"largest batch that fits: {p.max_batch:,}", style="bold"))
    if p.max_batch > HUGE_BATCH:
        console.print(
            Text(
                "memory does not limit this model's batch size: choose it for throughput "
                "(tfaccel tune) and for convergence",
                style="dim",
            )
        )
    if p.suggestions:
        s = Table(title="to make it fit", title_justify="left", box=None, padding=(0, 1))
        for col in ("option", "what it gives", "max batch", "effective batch"):
            s.add_column(col)
        for sug in p.suggestions:
            detail = sug.detail + (f"\n{sug.command}" if sug.command else "")
            s.add_row(
                sug.action,
                detail,
                "" if sug.max_batch is None else f"{sug.max_batch:,}",
                "" if sug.effective_batch is None else f"{sug.effective_batch:,}",
            )
        console.print(s)


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
    for r in t.rows:
        table.add_row(r.label, f"{r.samples_per_s:,.0f}", human_duration(r.seconds))
    console.print(table)


def scenario_text(s: ScenarioPlan, console: Console) -> None:
    where = (
        f"{s.gpu_count} x {s.gpu_name} (cc {s.compute_capability})"
        if s.gpu_name
        else "no local GPU"
    )
    table = Table(
        title=f"{s.scenario} on this machine: {where}",
        title_justify="left",
        box=None,
        padding=(0, 1),
        title_style="bold",
    )
    table.add_column("setting")
    table.add_column("recommendation")
    table.add_column("why", style="dim")
    for r in s.recommendations:
        table.add_row(r.setting, r.value, r.why)
    console.print(table)
    c = Table(
        title=f"GPUs from the spec file ({s.basis})", title_justify="left", box=None, padding=(0, 1)
    )
    c.add_column("GPU")
    c.add_column("est. samples/s (1 GPU)", justify="right")
    c.add_column("time on 1 GPU", justify="right")
    c.add_column("GPUs for the budget", justify="right")
    for cand in s.candidates[:12]:
        c.add_row(
            cand.gpu,
            f"{cand.est_samples_per_s:,.0f}" if cand.est_samples_per_s else "-",
            human_duration(cand.hours * 3600) if cand.hours else "-",
            str(cand.gpus_needed) if cand.gpus_needed else "-",
        )
    console.print(c)


def plan_text(report: PlanReport, console: Console) -> None:
    if report.fit is not None:
        fit_text(report.fit, console)
    if report.time is not None:
        time_text(report.time, console)
    if report.scenario is not None:
        scenario_text(report.scenario, console)


def fit_plot(p: FitPlan, path: Path) -> Path:
    """Predicted peak memory against batch size, with the GPU's capacity, the margin kept
    free and the largest batch that fits (the batch asked for too, if any)."""
    from tfaccel.render import pyplot

    plt = pyplot()
    top = max(int(p.max_batch * 1.5), (p.batch or 1) * 2, 8)
    batches = sorted({1 + (top - 1) * i // 64 for i in range(65)})
    gib = 1024**3
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(batches, [p.estimate.peak_bytes(b) / gib for b in batches], color="#1f77b4",
            label="predicted peak of a training step")  # fmt: skip
    ax.axhline(p.capacity.bytes / gib, color="#d62728", label=f"capacity: {p.capacity.source}")
    usable = p.capacity.bytes * (1 - p.margin) / gib
    ax.axhline(usable, color="#d62728", ls="--", lw=1, label=f"less the {p.margin:.0%} margin")
    if p.max_batch:
        ax.axvline(p.max_batch, color="#2ca02c", ls=":", label=f"largest batch: {p.max_batch}")
    if p.batch:
        ax.plot([p.batch], [(p.peak_bytes_at_batch or 0) / gib], "o", color="black",
                label=f"batch {p.batch}: {'fits' if p.fits else 'does not fit'}")  # fmt: skip
    ax.set_xlabel("batch size")
    ax.set_ylabel("GiB")
    ax.set_title(f"tfaccel plan: {p.estimate.workload} ({p.estimate.precision})")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)
