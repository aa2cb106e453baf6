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
    n = max(0, min(width, round(pct / 100 * width)))
    style = "green" if pct < 70 else ("yellow" if pct < 90 else "red")
    t = Text("█" * n, style=style)
    t.append("░" * (width - n), style="dim")
    t.append(f" {pct:3.0f}%")
    return t


def snapshot_view(snap: Snapshot) -> Group:
    t = Table(box=None, padding=(0, 1), header_style="bold")
    for col in (
        "GPU",
        "util",
        "mem",
        "temp",
        "power",
        "SM clock",
        "mem clock",
        "PCIe tx/rx",
        "ECC",
        "throttle",
    ):
        t.add_column(col)
    for g in snap.gpus:
        if g.error:
            t.add_row(str(g.index), Text(f"LOST: {g.error}", style="bold red"))
            continue
        temp = Text(_f(g.temp_c, "{:.0f} C"))
        if g.temp_slowdown_c:
            temp.append(f" /{g.temp_slowdown_c:.0f}", style="dim")
        mem = _bar(g.mem_pct)
        mem.append(
            f" {(g.mem_used_mib or 0) / 1024:.1f}/{(g.mem_total_mib or 0) / 1024:.0f} G",
            style="dim",
        )
        t.add_row(
            f"{g.index} {g.name or ''}",
            _bar(g.util_gpu_pct),
            mem,
            temp,
            f"{_f(g.power_w)}/{_f(g.power_limit_w)} W",
            f"{_f(g.sm_clock_mhz)}/{_f(g.sm_clock_max_mhz)}",
            f"{_f(g.mem_clock_mhz)}/{_f(g.mem_clock_max_mhz)}",
            f"{_f(g.pcie_tx_mbs)}/{_f(g.pcie_rx_mbs)} MB/s",
            f"{_f(g.ecc_corrected)}/{_f(g.ecc_uncorrected)}",
            Text(
                ", ".join(g.throttle) or "-",
                style="yellow" if any(r not in ("gpu_idle",) for r in g.throttle) else "dim",
            ),
        )
    parts: list[object] = [t]
    procs = [(g.index, p) for g in snap.gpus for p in g.processes]
    if procs:
        pt = Table(title="processes", title_justify="left", box=None, padding=(0, 1))
        for col in ("GPU", "pid", "name", "memory"):
            pt.add_column(col)
        for gi, (pid, name, mib) in procs:
            pt.add_row(str(gi), str(pid), name, _f(mib, "{:,.0f} MiB"))
        parts.append(pt)
    for a in snap.alerts:
        parts.append(
            Text(f"! {a.message}", style="bold red" if a.severity == "critical" else "yellow")
        )
    return Group(*parts)  # type: ignore[arg-type]


def power_table(infos: Sequence[PowerInfo]) -> Table:
    t = Table(title="power", title_justify="left")
    for col in ("GPU", "limit", "default", "allowed range", "drawing", "energy since load"):
        t.add_column(col)
    for p in infos:
        t.add_row(
            f"{p.index} {p.name or ''}",
            _f(p.limit_w, "{:g} W"),
            _f(p.default_limit_w, "{:g} W"),
            f"{_f(p.min_limit_w, '{:g}')}-{_f(p.max_limit_w, '{:g}')} W",
            _f(p.draw_w, "{:g} W"),
            _f(p.energy_j, "{:,.0f} J"),
        )
    return t


def sweep_table(res: SweepResult) -> Group:
    t = Table(title=f"power sweep, GPU {res.index}", title_justify="left")
    for col in ("limit", "samples/s", "mean power", "samples/J", "max temp", "note"):
        t.add_column(col)
    for p in res.points:
        t.add_row(
            f"{p.limit_w:g} W",
            _f(p.samples_per_s, "{:,.0f}"),
            _f(p.power_mean_w, "{:.0f} W"),
            _f(p.samples_per_j, "{:.2f}"),
            _f(p.temp_max_c, "{:.0f} C"),
            p.error or "",
        )
    restore = Text(
        f"original limit {_f(res.original_limit_w, '{:g} W')} restored"
        if res.restored
        else f"RESTORE FAILED: {res.restore_error}",
        style="green" if res.restored else "bold red",
    )
    return Group(t, restore)
