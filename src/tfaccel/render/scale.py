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


def point_line(p: ScalePoint) -> Text:
    """One GPU count, as it finishes."""
    if p.status != "ok" or not p.samples_per_s:
        return Text(f"{p.gpus} GPU(s): {p.status}: {(p.error or '')[:120]}", style="red")
    line = Text(f"{p.gpus} GPU(s): ")
    line.append(f"{p.samples_per_s:,.0f} samples/s", style="bold")
    if p.efficiency is not None and p.gpus > 1:
        line.append(f", efficiency {p.efficiency:.0%}")
    return line


def scale_text(r: ScaleReport, console: Console) -> None:
    console.print(_points_table(r))
    _point_notes(r, console)
    _search_and_reference(r, console)
    _topology_and_notes(r, console)


def _points_table(r: ScaleReport) -> Table:
    # What every point shares (engine, all-reduce, update path) goes under the title;
    # a column only where the points differ.
    shared_fields = {
        "engine": [p.engine for p in r.points],
        "all-reduce": [p.cross_device_ops for p in r.points],
        "update": [p.update for p in r.points],
    }
    shared = {k: v[0] for k, v in shared_fields.items() if v and len(set(v)) == 1 and v[0]}
    varying = [k for k in shared_fields if k not in shared]
    title = (
        f"tfaccel scale: {r.workload}, {r.per_replica_batch} per replica "
        f"({', '.join(f'{k}={v}' for k, v in r.settings.items())})"
    )
    if shared:
        title += "\n" + " · ".join(f"{k}: {v}" for k, v in shared.items())
    t = Table(title=title, title_justify="left")
    left = ("engine", "all-reduce", "update", "status")
    columns = ["GPUs", "global batch", "samples/s", "efficiency", *varying]
    columns += ["all-reduce ms", "input GB/s", "status"]
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    for p in r.points:
        eff = "" if p.efficiency is None else f"{p.efficiency:.0%}"
        share = p.allreduce_share
        ar = (
            ""
            if p.allreduce_ms is None
            else f"{p.allreduce_ms:.1f}" + (f" ({share:.0%})" if share else "")
        )
        values = {
            "engine": p.engine or "",
            "all-reduce": p.cross_device_ops or "",
            "update": p.update or "",
        }
        t.add_row(
            str(p.gpus),
            str(p.global_batch),
            f"{p.samples_per_s:,.0f}" if p.samples_per_s else "-",
            eff,
            *[values[k] for k in varying],
            ar,
            "" if p.input_gb_s is None else f"{p.input_gb_s:.2g}",
            Text(p.status, style="green" if p.status == "ok" else "red"),
        )
    return t


def _point_notes(r: ScaleReport, console: Console) -> None:
    """Failed points, fallbacks, and low efficiency with host input."""
    for p in r.points:
        if p.status != "ok":
            console.print(Text(f"! {p.gpus} GPU(s) {p.status}: {p.error or ''}", style="red"))
        if p.update_error:
            console.print(
                Text(
                    f"! {p.gpus} GPU(s): the fused optimizer update fell back to Keras' "
                    f"per-variable update: {p.update_error}",
                    style="yellow",
                )
            )
    low = [p for p in r.points if p.gpus > 1 and p.efficiency is not None and p.efficiency < 0.85]
    if low and low[-1].input == "host" and r.gpu_names:  # not for --cpu-replicas runs
        p = low[-1]
        traffic = f" ({p.input_gb_s:.2g} GB/s at {p.gpus} GPUs)" if p.input_gb_s else ""
        console.print(
            Text(
                f"! efficiency {p.efficiency:.0%} at {p.gpus} GPUs: with host input the "
                f"copies to the GPUs{traffic} are the first suspect. --input device shows "
                "what compute and all-reduce alone reach; --input-cast compute halves the "
                "bytes of float inputs",
                style="yellow",
            )
        )


def _search_and_reference(r: ScaleReport, console: Console) -> None:
    """Against the tuned single GPU, and the search at the largest count."""
    ref = r.tuned_reference
    if ref:
        ratios = ", ".join(f"{n} GPU(s) {x:.2f}x" for n, x in ref["ratio"].items())
        console.print(
            f"against the tuned single GPU ({ref['source']}: "
            f"{ref['samples_per_s']:,.0f}/s): {ratios or 'no point ran'}"
        )
    if r.search:
        st = Table(title=f"search at {max(p.gpus for p in r.points)} GPU(s)", title_justify="left")
        for col in ("option", "value", "samples/s", "result"):
            st.add_column(col, justify="right" if col == "samples/s" else "left")
        for step in r.search:
            st.add_row(
                step.option,
                str(step.value),
                f"{step.samples_per_s:,.0f}" if step.samples_per_s else "-",
                Text(step.note or "baseline", style="green" if step.kept else ""),
            )
        console.print(st)
        if r.best:
            console.print("best: " + ", ".join(f"{k}={v}" for k, v in r.best.items()), style="bold")


def _topology_and_notes(r: ScaleReport, console: Console) -> None:
    if r.topology is not None:
        m = Table(title="topology", title_justify="left", box=None)
        m.add_column("")
        for i in range(len(r.topology.matrix)):
            m.add_column(f"GPU{i}")
        for i, row in enumerate(r.topology.matrix):
            m.add_row(f"GPU{i}", *row)
        console.print(m)
    for pub in published_for([x.gpus for x in r.points if x.samples_per_s]):
        eff = (
            f"{pub.efficiency_low:.0%}"
            if pub.efficiency_low == pub.efficiency_high
            else f"{pub.efficiency_low:.0%}-{pub.efficiency_high:.0%}"
        )
        console.print(Text(f"published: {pub.label}: efficiency {eff}", style="dim"))
    for w in r.topology_warnings:
        console.print(Text(f"! {w}", style="yellow"))
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


def mps_text(s: MpsStatus, console: Console) -> None:
    state = Text(
        "running" if s.running else "not running", style="yellow" if s.running else "green"
    )
    console.print(Text("MPS control daemon: ").append(state))
    console.print(f"pipe directory {s.pipe_dir}, log directory {s.log_dir}")
    if s.processes:
        console.print("processes: " + ", ".join(s.processes))
    console.print(f"control binary: {s.control_binary or 'not on PATH'}")
    if s.compute_modes:
        console.print("compute mode per GPU: " + ", ".join(s.compute_modes))
    for a in s.advice:
        console.print(Text(f"-> {a}", style="cyan"))


def scale_plot(series: Sequence[tuple[str, ScaleReport]], path: Path) -> Path:
    """Throughput and efficiency against GPU count (PNG): one line per run (host input,
    device input, ...), the linear ideal from each run's 1-GPU point, the tuned single
    GPU when known, and the published efficiencies at the counts measured."""
    plt = pyplot()

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    counts: set[int] = set()
    ref = None
    lines: list[tuple[str, str, list[ScalePoint], list[float]]] = []
    for label, r in series:
        pts = [p for p in r.points if p.samples_per_s]
        rates = [p.samples_per_s or 0.0 for p in pts]
        if not pts:
            continue
        counts |= {p.gpus for p in pts}
        line = left.plot([p.gpus for p in pts], rates, "o-", label=label)[0]
        one = next((p.samples_per_s for p in pts if p.gpus == 1), None)
        if one:
            xs = sorted({p.gpus for p in pts})
            left.plot(xs, [one * n for n in xs], ":", color=line.get_color(), alpha=0.6)
            right.plot(  # the run's own efficiency: N-GPU / (N x its 1-GPU point)
                [p.gpus for p in pts if p.efficiency is not None],
                [p.efficiency for p in pts if p.efficiency is not None],
                "o-",
                color=line.get_color(),
                label=label,
            )
        ref = ref or r.tuned_reference
        lines.append((label, line.get_color(), pts, rates))
    if ref:  # efficiency against the tuned single GPU: the target users measure against
        for label, color, pts, rates in lines:
            right.plot(
                [p.gpus for p in pts],
                [x / (p.gpus * ref["samples_per_s"]) for x, p in zip(rates, pts, strict=True)],
                "x--",
                color=color,
                label=f"{label}, against tuned 1 GPU",
            )
    if ref:
        xs = sorted(counts | {1})
        left.plot(
            xs,
            [ref["samples_per_s"] * n for n in xs],
            "--",
            color="#555555",
            label=f"N x tuned single GPU ({ref['samples_per_s']:,.0f}/s)",
        )
    for p in published_for(sorted(counts)):
        right.errorbar(
            [p.gpus],
            [(p.efficiency_low + p.efficiency_high) / 2],
            yerr=[[(p.efficiency_high - p.efficiency_low) / 2]],
            fmt="s",
            color="#888888",
            capsize=4,
        )
        right.annotate(
            p.label,
            (p.gpus, p.efficiency_low),
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
