"""The workload a power sweep runs at each limit, and its plot."""

from __future__ import annotations

from pathlib import Path

from tfaccel.monitor.power import SweepResult
from tfaccel.results import save_figure


def measure_workload(
    workload: str, gpu: int, batch: int
) -> tuple[float | None, float | None, float | None]:
    """Run a tuning trial of `workload` while sampling GPU `gpu`: (samples/s, W, max C)."""
    from tfaccel.monitor.sampler import Sampler
    from tfaccel.monitor.telemetry import summarize_window
    from tfaccel.optimize.settings import Settings
    from tfaccel.trial.runner import StepPlan, run_trial

    settings = Settings(precision="auto", xla="jit", batch_size=batch, steps_per_execution=10)
    with Sampler([gpu], interval_s=0.5) as sampler:
        start = sampler.latest.time if sampler.latest else 0.0
        trial = run_trial(workload, settings, StepPlan(warmup=20, windows=5, window=40))
        sampler.sample_once()
        windows = summarize_window(
            sampler.history(), start, sampler.latest.time if sampler.latest else start
        )
    if not trial.ok:
        raise RuntimeError(f"trial {trial.status}: {trial.error}")
    window = windows[0] if windows else None
    return (
        trial.samples_per_s,
        window.power_mean_w if window else None,
        window.temp_max_c if window else None,
    )


def sweep_plot(res: SweepResult, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [point for point in res.points if point.samples_per_s]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        [point.limit_w for point in pts],
        [float(point.samples_per_s or 0) for point in pts],
        "o-",
        label="samples/s",
    )
    ax.set_xlabel("power limit (W)")
    ax.set_ylabel("samples/s")
    ax2 = ax.twinx()
    ax2.plot(
        [point.limit_w for point in pts],
        [point.samples_per_j if point.samples_per_j is not None else float("nan") for point in pts],
        "s--",
        color="#2ca02c",
        label="samples/J",
    )
    ax2.set_ylabel("samples per joule")
    ax.set_title(f"power sweep, GPU {res.index}")
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)
    return path
