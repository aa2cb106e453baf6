"""Rendering of `tfaccel monitor` and `tfaccel power`."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tfaccel.monitor.metrics import Snapshot
from tfaccel.monitor.power import PowerInfo, SweepResult

NA = "n/a"


def _f(v: float | None, fmt: str = "{:.0f}") -> str:
    return NA if v is None else fmt.format(v)


def _bar(pct: float | None, width: int = 10) -> Text:
    if pct is None:
        return Text(NA, style="dim")
    cells = max(0, min(width, round(pct / 100 * width)))
    style = "green" if pct < 70 else ("yellow" if pct < 90 else "red")
    text = Text("█" * cells, style=style)
    text.append("░" * (width - cells), style="dim")
    text.append(f" {pct:3.0f}%")
    return text


# Under this many columns the view drops the memory clock, PCIe and ECC columns (an
# uncorrected ECC error still raises an alert) and memory in GiB, and draws shorter bars.
COMPACT_BELOW = 140


def snapshot_view(snap: Snapshot, width: int | None = None) -> Group:
    compact = width is not None and width < COMPACT_BELOW
    bar = 5 if compact else 10
    columns = ["GPU", "util", "mem", "temp", "power", "SM clock"]
    columns += [] if compact else ["mem clock", "PCIe tx/rx", "ECC"]
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for col in [*columns, "throttle"]:
        table.add_column(
            col,
            no_wrap=col != "throttle",
            overflow="fold" if col == "throttle" else "ellipsis",  # never a cut-off number
            min_width=12 if col == "throttle" else None,
        )
    for gpu in snap.gpus:
        if gpu.error:
            table.add_row(str(gpu.index), Text(f"LOST: {gpu.error}", style="bold red"))
            continue
        temp = Text(_f(gpu.temp_c, "{:.0f} C"))
        if gpu.temp_slowdown_c:
            temp.append(f" /{gpu.temp_slowdown_c:.0f}", style="dim")
        mem = _bar(gpu.mem_pct, bar)
        if not compact:
            mem.append(
                f" {(gpu.mem_used_mib or 0) / 1024:.1f}/{(gpu.mem_total_mib or 0) / 1024:.0f} G",
                style="dim",
            )
        cells: list[object] = [
            f"{gpu.index} {gpu.name or ''}".removesuffix(" ") if not compact else str(gpu.index),
            _bar(gpu.util_gpu_pct, bar),
            mem,
            temp,
            f"{_f(gpu.power_w)}/{_f(gpu.power_limit_w)} W",
            f"{_f(gpu.sm_clock_mhz)}/{_f(gpu.sm_clock_max_mhz)}",
        ]
        if not compact:
            cells += [
                f"{_f(gpu.mem_clock_mhz)}/{_f(gpu.mem_clock_max_mhz)}",
                f"{_f(gpu.pcie_tx_mbs)}/{_f(gpu.pcie_rx_mbs)} MB/s",
                f"{_f(gpu.ecc_corrected)}/{_f(gpu.ecc_uncorrected)}",
            ]
        cells.append(
            Text(
                ", ".join(gpu.throttle) or "-",
                style="yellow"
                if any(reason not in ("gpu_idle",) for reason in gpu.throttle)
                else "dim",
            )
        )
        table.add_row(*cells)  # type: ignore[arg-type]
    names = {gpu.name for gpu in snap.gpus if gpu.name and not gpu.error}
    head: list[object] = [Text(", ".join(sorted(names)), style="bold")] if compact and names else []
    parts: list[object] = [*head, table]
    procs = [(gpu.index, proc) for gpu in snap.gpus for proc in gpu.processes]
    if procs:
        proc_table = Table(title="processes", title_justify="left", box=None, padding=(0, 1))
        for col in ("GPU", "pid", "name", "memory"):
            proc_table.add_column(col)
        for gpu_index, (pid, name, mib) in procs:
            proc_table.add_row(str(gpu_index), str(pid), name, _f(mib, "{:,.0f} MiB"))
        parts.append(proc_table)
    for alert in snap.alerts:
        parts.append(
            Text(
                f"! {alert.message}", style="bold red" if alert.severity == "critical" else "yellow"
            )
        )
    return Group(*parts)  # type: ignore[arg-type]


def power_table(infos: Sequence[PowerInfo]) -> Table:
    table = Table(title="power", title_justify="left")
    for col in ("GPU", "limit", "default", "allowed range", "drawing", "energy since load"):
        table.add_column(col)
    for info in infos:
        table.add_row(
            f"{info.index} {info.name or ''}",
            _f(info.limit_w, "{:g} W"),
            _f(info.default_limit_w, "{:g} W"),
            f"{_f(info.min_limit_w, '{:g}')}-{_f(info.max_limit_w, '{:g}')} W",
            _f(info.draw_w, "{:g} W"),
            _f(info.energy_j, "{:,.0f} J"),
        )
    return table


def sweep_table(res: SweepResult) -> Group:
    table = Table(title=f"power sweep, GPU {res.index}", title_justify="left")
    for col in ("limit", "samples/s", "mean power", "samples/J", "max temp", "note"):
        table.add_column(col)
    for point in res.points:
        table.add_row(
            f"{point.limit_w:g} W",
            _f(point.samples_per_s, "{:,.0f}"),
            _f(point.power_mean_w, "{:.0f} W"),
            _f(point.samples_per_j, "{:.2f}"),
            _f(point.temp_max_c, "{:.0f} C"),
            point.error or "",
        )
    restore = Text(
        f"original limit {_f(res.original_limit_w, '{:g} W')} restored"
        if res.restored
        else f"RESTORE FAILED: {res.restore_error}",
        style="green" if res.restored else "bold red",
    )
    return Group(table, restore)
