"""Rendering of `tfaccel scale` and `tfaccel mps`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfaccel.render import pyplot
from tfaccel.results import save_figure
from tfaccel.scale.mps import MpsStatus
from tfaccel.scale.runner import ScalePoint, ScaleReport, published_for
from tfaccel.scale.tfconfig import TfConfig


def point_line(point: ScalePoint) -> Text:
    """One GPU count, as it finishes."""
    if point.status != "ok" or not point.samples_per_s:
        return Text(
            f"{point.gpus} GPU(s): {point.status}: {(point.error or '')[:120]}", style="red"
        )
    line = Text(f"{point.gpus} GPU(s): ")
    line.append(f"{point.samples_per_s:,.0f} samples/s", style="bold")
    if point.efficiency is not None and point.gpus > 1:
        line.append(f", efficiency {point.efficiency:.0%}")
    return line


def scale_text(report: ScaleReport, console: Console) -> None:
    console.print(_points_table(report))
    _point_notes(report, console)
    _search_and_reference(report, console)
    _topology_and_notes(report, console)


def _points_table(report: ScaleReport) -> Table:
    # What every point shares (engine, all-reduce, update path) goes under the title;
    # a column only where the points differ.
    shared_fields = {
        "engine": [point.engine for point in report.points],
        "all-reduce": [point.cross_device_ops for point in report.points],
        "update": [point.update for point in report.points],
    }
    shared = {
        field: seen[0]
        for field, seen in shared_fields.items()
        if seen and len(set(seen)) == 1 and seen[0]
    }
    varying = [field for field in shared_fields if field not in shared]
    title = (
        f"tfaccel scale: {report.workload}, {report.per_replica_batch} per replica "
        f"({', '.join(f'{field}={seen}' for field, seen in report.settings.items())})"
    )
    if shared:
        title += "\n" + " · ".join(f"{field}: {seen}" for field, seen in shared.items())
    table = Table(title=title, title_justify="left")
    left = ("engine", "all-reduce", "update", "status")
    columns = ["GPUs", "global batch", "samples/s", "efficiency", *varying]
    columns += ["all-reduce ms", "input GB/s", "status"]
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right")
    for point in report.points:
        eff = "" if point.efficiency is None else f"{point.efficiency:.0%}"
        share = point.allreduce_share
        allreduce = (
            ""
            if point.allreduce_ms is None
            else f"{point.allreduce_ms:.1f}" + (f" ({share:.0%})" if share else "")
        )
        values = {
            "engine": point.engine or "",
            "all-reduce": point.cross_device_ops or "",
            "update": point.update or "",
        }
        table.add_row(
            str(point.gpus),
            str(point.global_batch),
            f"{point.samples_per_s:,.0f}" if point.samples_per_s else "-",
            eff,
            *[values[field] for field in varying],
            allreduce,
            "" if point.input_gb_s is None else f"{point.input_gb_s:.2g}",
            Text(point.status, style="green" if point.status == "ok" else "red"),
        )
    return table


def _point_notes(report: ScaleReport, console: Console) -> None:
    """Failed points, fallbacks, and low efficiency with host input."""
    for point in report.points:
        if point.status != "ok":
            console.print(
                Text(f"! {point.gpus} GPU(s) {point.status}: {point.error or ''}", style="red")
            )
        if point.update_error:
            console.print(
                Text(
                    f"! {point.gpus} GPU(s): the fused optimizer update fell back to Keras' "
                    f"per-variable update: {point.update_error}",
                    style="yellow",
                )
            )
    low = [
        point
        for point in report.points
        if point.gpus > 1 and point.efficiency is not None and point.efficiency < 0.85
    ]
    if low and low[-1].input == "host" and report.gpu_names:  # not for --cpu-replicas runs
        point = low[-1]
        traffic = f" ({point.input_gb_s:.2g} GB/s at {point.gpus} GPUs)" if point.input_gb_s else ""
        console.print(
            Text(
                f"! efficiency {point.efficiency:.0%} at {point.gpus} GPUs: with host input the "
                f"copies to the GPUs{traffic} are the first suspect. --input device shows "
                "what compute and all-reduce alone reach; --input-cast compute halves the "
                "bytes of float inputs",
                style="yellow",
            )
        )


def _search_and_reference(report: ScaleReport, console: Console) -> None:
    """Against the tuned single GPU, and the search at the largest count."""
    ref = report.tuned_reference
    if ref:
        ratios = ", ".join(f"{gpus} GPU(s) {x:.2f}x" for gpus, x in ref["ratio"].items())
        console.print(
            f"against the tuned single GPU ({ref['source']}: "
            f"{ref['samples_per_s']:,.0f}/s): {ratios or 'no point ran'}"
        )
    if report.search:
        table = Table(
            title=f"search at {max(point.gpus for point in report.points)} GPU(s)",
            title_justify="left",
        )
        for col in ("option", "value", "samples/s", "result"):
            table.add_column(col, justify="right" if col == "samples/s" else "left")
        for step in report.search:
            table.add_row(
                step.option,
                str(step.value),
                f"{step.samples_per_s:,.0f}" if step.samples_per_s else "-",
                Text(step.note or "baseline", style="green" if step.kept else ""),
            )
        console.print(table)
        if report.best:
            console.print(
                "best: " + ", ".join(f"{knob}={value}" for knob, value in report.best.items()),
                style="bold",
            )


def _topology_and_notes(report: ScaleReport, console: Console) -> None:
    if report.topology is not None:
        table = Table(title="topology", title_justify="left", box=None)
        table.add_column("")
        for i in range(len(report.topology.matrix)):
            table.add_column(f"GPU{i}")
        for i, row in enumerate(report.topology.matrix):
            table.add_row(f"GPU{i}", *row)
        console.print(table)
    for pub in published_for([x.gpus for x in report.points if x.samples_per_s]):
        eff = (
            f"{pub.efficiency_low:.0%}"
            if pub.efficiency_low == pub.efficiency_high
            else f"{pub.efficiency_low:.0%}-{pub.efficiency_high:.0%}"
        )
        console.print(Text(f"published: {pub.label}: efficiency {eff}", style="dim"))
    for warning in report.topology_warnings:
        console.print(Text(f"! {warning}", style="yellow"))
    console.print(Text("efficiency = N-GPU throughput / (N x 1-GPU throughput)", style="dim"))
    console.print(
        Text(
            "all-reduce ms: one all-reduce of the gradients through the same cross-device "
            "ops, timed alone; in brackets, the share of the step it would take were it "
            "not overlapped",
            style="dim",
        )
    )


def tfconfig_text(cfg: TfConfig, script: str, console: Console) -> None:
    console.print(
        Text(
            f"TF_CONFIG for {cfg.task_type} {cfg.task_index} of {cfg.num_workers} worker(s):",
            style="bold",
        )
    )
    console.print(cfg.to_json(), soft_wrap=True)
    console.print(
        Text("\nwhat each worker runs (same script, same cluster, its own index):", style="bold")
    )
    for line in cfg.commands(script):
        console.print(line, soft_wrap=True)
    console.print(
        Text(
            "\nThe script builds its model inside "
            "tf.distribute.MultiWorkerMirroredStrategy().scope().",
            style="dim",
        )
    )


def mps_text(status: MpsStatus, console: Console) -> None:
    state = Text(
        "running" if status.running else "not running",
        style="yellow" if status.running else "green",
    )
    console.print(Text("MPS control daemon: ").append(state))
    console.print(f"pipe directory {status.pipe_dir}, log directory {status.log_dir}")
    if status.processes:
        console.print("processes: " + ", ".join(status.processes))
    console.print(f"control binary: {status.control_binary or 'not on PATH'}")
    if status.compute_modes:
        console.print("compute mode per GPU: " + ", ".join(status.compute_modes))
    for advice in status.advice:
        console.print(Text(f"-> {advice}", style="cyan"))


def scale_plot(series: Sequence[tuple[str, ScaleReport]], path: Path) -> Path:
    """Throughput and efficiency against GPU count (PNG): one line per run (host input,
    device input, ...), the linear ideal from each run's 1-GPU point, the tuned single
    GPU when known, and the published efficiencies at the counts measured."""
    plt = pyplot()

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    counts: set[int] = set()
    ref = None
    lines: list[tuple[str, str, list[ScalePoint], list[float]]] = []
    for label, report in series:
        pts = [point for point in report.points if point.samples_per_s]
        rates = [point.samples_per_s or 0.0 for point in pts]
        if not pts:
            continue
        counts |= {point.gpus for point in pts}
        line = left.plot([point.gpus for point in pts], rates, "o-", label=label)[0]
        one = next((point.samples_per_s for point in pts if point.gpus == 1), None)
        if one:
            gpu_counts = sorted({point.gpus for point in pts})
            left.plot(
                gpu_counts,
                [one * count for count in gpu_counts],
                ":",
                color=line.get_color(),
                alpha=0.6,
            )
            right.plot(  # the run's own efficiency: N-GPU / (N x its 1-GPU point)
                [point.gpus for point in pts if point.efficiency is not None],
                [point.efficiency for point in pts if point.efficiency is not None],
                "o-",
                color=line.get_color(),
                label=label,
            )
        ref = ref or report.tuned_reference
        lines.append((label, line.get_color(), pts, rates))
    if ref:  # efficiency against the tuned single GPU: the target users measure against
        for label, color, pts, rates in lines:
            right.plot(
                [point.gpus for point in pts],
                [
                    x / (point.gpus * ref["samples_per_s"])
                    for x, point in zip(rates, pts, strict=True)
                ],
                "x--",
                color=color,
                label=f"{label}, against tuned 1 GPU",
            )
    if ref:
        gpu_counts = sorted(counts | {1})
        left.plot(
            gpu_counts,
            [ref["samples_per_s"] * count for count in gpu_counts],
            "--",
            color="#555555",
            label=f"N x tuned single GPU ({ref['samples_per_s']:,.0f}/s)",
        )
    for point in published_for(sorted(counts)):
        right.errorbar(
            [point.gpus],
            [(point.efficiency_low + point.efficiency_high) / 2],
            yerr=[[(point.efficiency_high - point.efficiency_low) / 2]],
            fmt="s",
            color="#888888",
            capsize=4,
        )
        right.annotate(
            point.label,
            (point.gpus, point.efficiency_low),
            fontsize=7,
            xytext=(4, -10),
            textcoords="offset points",
        )
    ticks = sorted(counts) or [1]
    left.set_xticks(ticks)
    right.set_xticks(ticks)
    left.set_xlabel("GPUs")
    left.set_ylabel("samples/s (dotted: linear from 1 GPU)")
    right.set_xlabel("GPUs")
    right.set_ylabel("efficiency = N-GPU / (N x 1-GPU)")
    right.set_ylim(0, 1.15)
    right.axhline(1.0, color="#cccccc", lw=0.8)
    left.legend(fontsize=8)
    if right.lines:
        right.legend(fontsize=8, loc="lower left")
    workload = series[0][1].workload if series else ""
    fig.suptitle(f"tfaccel scale: {workload}")
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)
    return path
