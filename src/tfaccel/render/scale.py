"""Rendering of `tfaccel scale` and `tfaccel mps`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfaccel.scale.mps import MpsStatus
from tfaccel.scale.runner import ScaleReport
from tfaccel.scale.tfconfig import TfConfig


def scale_text(r: ScaleReport, console: Console) -> None:
    t = Table(
        title=f"tfaccel scale: {r.workload}, {r.per_replica_batch} per replica "
        f"({', '.join(f'{k}={v}' for k, v in r.settings.items())})",
        title_justify="left",
    )
    left = ("engine", "all-reduce", "update", "status")
    for col in (
        "GPUs",
        "global batch",
        "samples/s",
        "efficiency",
        "engine",
        "all-reduce",
        "all-reduce ms",
        "update",
        "status",
    ):
        t.add_column(col, justify="left" if col in left else "right")
    for p in r.points:
        eff = "" if p.efficiency is None else f"{p.efficiency:.0%}"
        share = p.allreduce_share
        ar = (
            ""
            if p.allreduce_ms is None
            else f"{p.allreduce_ms:.1f}" + (f" ({share:.0%} of step)" if share else "")
        )
        t.add_row(
            str(p.gpus),
            str(p.global_batch),
            f"{p.samples_per_s:,.0f}" if p.samples_per_s else "-",
            eff,
            p.engine or "",
            p.cross_device_ops or "",
            ar,
            p.update or "",
            Text(
                p.status if p.status == "ok" else f"{p.status}: {(p.error or '')[:60]}",
                style="green" if p.status == "ok" else "red",
            ),
        )
    console.print(t)
    for p in r.points:
        if p.update_error:
            console.print(
                Text(
                    f"! {p.gpus} GPU(s): the fused optimizer update fell back to Keras' "
                    f"per-variable update: {p.update_error}",
                    style="yellow",
                )
            )
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
    if r.topology is not None:
        m = Table(title="topology", title_justify="left", box=None)
        m.add_column("")
        for i in range(len(r.topology.matrix)):
            m.add_column(f"GPU{i}")
        for i, row in enumerate(r.topology.matrix):
            m.add_row(f"GPU{i}", *row)
        console.print(m)
    for w in r.topology_warnings:
        console.print(Text(f"! {w}", style="yellow"))
    console.print(Text("efficiency = N-GPU throughput / (N x 1-GPU throughput)", style="dim"))
    console.print(
        Text(
            "all-reduce ms: one all-reduce of the gradients through the same cross-device "
            "ops, timed alone (the share of the step it would take were it not overlapped)",
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
